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
  LayerDescription describe() const override { return describe_conv(LayerKind::Conv2D, in_, out_); }

  /// Ho = conv_output_length(H, span_h, stride_h, same) (Keras). UserError when the
  /// number of inputs is not 1 or the output would be empty.
  Shape infer(const std::vector<Shape>& inputs) override {
    set_input(inputs);
    const Conv2DParams& g = c_.geom;
    int ho = conv_output_length(in_.h, g.span_h(), g.stride_h, g.same_padding);
    int wo = conv_output_length(in_.w, g.span_w(), g.stride_w, g.same_padding);
    if (ho <= 0 || wo <= 0) {
      const bool dilated = g.dilation_h > 1 || g.dilation_w > 1;
      throw UserError("input is " + window_text(in_.h, in_.w) + " but kernel_size is " + window_text(g.kh, g.kw) +
                      (dilated ? " (spanning " + window_text(g.span_h(), g.span_w()) + " with dilation_rate " +
                                     window_text(g.dilation_h, g.dilation_w) + ")"
                               : std::string()) +
                      " with padding 'valid'; use padding: same or a smaller kernel_size" +
                      (dilated ? " or dilation_rate" : ""));
    }
    out_ = Shape{in_.n, ho, wo, c_.filters};
    return out_;
  }

  /// kernel [kh, kw, Cin, filters] with Keras's fans: receptive = kh*kw,
  /// fan_in = Cin*receptive, fan_out = filters*receptive; bias [filters].
  std::vector<ParamSpec> param_specs() const override {
    return kernel_and_bias_specs(in_.c, c_.filters);
  }

 protected:
  int conv_filters() const override { return c_.filters; }
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(ParamReader& p, const std::string& name) {
  return std::make_unique<Conv2D>(name, read_conv_config(p));
}

}  // namespace trainer
