// Conv2D (Keras): y = activation(conv(x, kernel) + bias), x [N, H, W, Cin] ->
// y [N, Ho, Wo, filters], kernel [kh, kw, Cin, filters], bias [filters].
#include "nn/layers/conv_common.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Conv2D final : public ConvLayerBase<Conv2DOp> {
 public:
  using ConvLayerBase::ConvLayerBase;
  std::string type() const override { return "Conv2D"; }
  /// Padding of the input for the inferred shapes, as the backend applies it.
  LayerDescription describe() const override {
    LayerDescription d = describe_conv(LayerKind::Conv2D);
    d.pad_h = conv_padding(in_.h, out_.h, c_.geom.kh, c_.geom.stride_h);
    d.pad_w = conv_padding(in_.w, out_.w, c_.geom.kw, c_.geom.stride_w);
    return d;
  }

  /// Ho = conv_output_length(H, kh, stride_h, same) (Keras). UserError when the
  /// number of inputs is not 1 or the output would be empty.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("Conv2D takes one input, got " + std::to_string(inputs.size()));
    const Conv2DParams& g = c_.geom;
    in_ = inputs[0];
    int ho = conv_output_length(in_.h, g.kh, g.stride_h, g.same_padding);
    int wo = conv_output_length(in_.w, g.kw, g.stride_w, g.same_padding);
    if (ho <= 0 || wo <= 0)
      throw UserError("input is " + window_text(in_.h, in_.w) + " but kernel_size is " +
                      window_text(g.kh, g.kw) +
                      " with padding 'valid'; use padding: same or a smaller kernel_size");
    out_ = Shape{in_.n, ho, wo, c_.filters};
    return out_;
  }

  /// kernel [kh, kw, Cin, filters] with Keras's fans: receptive = kh*kw,
  /// fan_in = Cin*receptive, fan_out = filters*receptive; bias [filters].
  std::vector<ParamSpec> param_specs() const override {
    const double receptive = double(c_.geom.kh) * c_.geom.kw;
    std::vector<ParamSpec> specs{ParamSpec{"kernel",
                                           {c_.geom.kh, c_.geom.kw, in_.c, c_.filters},
                                           c_.kernel_initializer,
                                           in_.c * receptive,
                                           c_.filters * receptive,
                                           true}};
    if (c_.use_bias) specs.push_back(bias_spec());
    return specs;
  }
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(ParamReader& p, const std::string& name) {
  return std::make_unique<Conv2D>(name, read_conv_config(p));
}

}  // namespace trainer
