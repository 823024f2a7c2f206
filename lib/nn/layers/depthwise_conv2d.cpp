// DepthwiseConv2D (Keras): each input channel convolved alone with
// depth_multiplier kernels, x [N, H, W, Cin] -> y [N, Ho, Wo, Cin * M]
// (output channel c * M + m from input channel c), depthwise_kernel
// [kh, kw, Cin, M], bias [Cin * M], then the activation. It runs as a grouped
// Conv2D (groups = Cin), whose kernel [kh, kw, 1, Cin * M] holds the same
// values in the same order.
#include "nn/layers/conv_common.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class DepthwiseConv2D final : public ConvLayerBase<Conv2DOp> {
 public:
  DepthwiseConv2D(std::string name, const ConvConfig& c, int multiplier)
      : ConvLayerBase(std::move(name), c), multiplier_(multiplier) {}
  std::string type() const override { return "DepthwiseConv2D"; }
  /// A Conv2D with group = Cin (the ONNX exporter writes Conv with 'group').
  LayerDescription describe() const override { return describe_conv(LayerKind::Conv2D, in_, out_); }

  /// [Ho, Wo, Cin * depth_multiplier] (Ho as Conv2D's). UserError when the
  /// number of inputs is not 1 or the output would be empty.
  Shape infer(const std::vector<Shape>& inputs) override {
    const long long channels = inputs.empty() ? 1 : (long long)inputs[0].c * multiplier_;
    if (channels > 65536)
      throw UserError("depth_multiplier " + std::to_string(multiplier_) + " gives " + std::to_string(channels) +
                      " output channels, more than 65536; use a smaller depth_multiplier");
    infer_conv(inputs, int(channels));
    c_.filters = out_.c;
    set_groups(in_.c);
    return out_;
  }

  /// depthwise_kernel [kh, kw, Cin, M] with Keras's fans of that shape
  /// (receptive = kh*kw, fan_in = Cin*receptive, fan_out = M*receptive); bias [Cin * M].
  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> specs = kernel_and_bias_specs(in_.c, multiplier_);
    specs[0].name = "depthwise_kernel";
    return specs;
  }

 protected:
  int conv_filters() const override { return c_.filters; }

 private:
  int multiplier_;
};

}  // namespace

std::unique_ptr<Layer> make_depthwise_conv2d(ParamReader& p, const std::string& name) {
  if (p.has("filters"))
    p.fail("filters", "is not a DepthwiseConv2D key: its output has depth_multiplier channels per input channel; "
                      "use depth_multiplier, or Conv2D (or SeparableConv2D) for a number of filters");
  ConvConfig c;
  read_conv_geometry(p, c);
  const int multiplier = p.get_int("depth_multiplier", 1, 1, 65536);
  read_affine_keys(p, c, "depthwise");
  return std::make_unique<DepthwiseConv2D>(name, c, multiplier);
}

}  // namespace trainer
