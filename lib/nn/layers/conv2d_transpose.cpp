// Conv2DTranspose (Keras): y = activation(conv_transpose(x, kernel) + bias),
// x [N, H, W, Cin] -> y [N, Ho, Wo, filters], kernel [kh, kw, filters, Cin]
// (Keras layout), bias [filters]. No output_padding (Keras's default None)
// and no dilation_rate (refused).
#include "nn/layers/conv_common.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Conv2DTranspose final : public ConvLayerBase<Conv2DTransposeOp> {
 public:
  using ConvLayerBase::ConvLayerBase;
  std::string type() const override { return "Conv2DTranspose"; }
  /// The crop of the full output: the padding of the convolution this one
  /// transposes (output -> input), as the backend applies it.
  LayerDescription describe() const override {
    return describe_conv(LayerKind::Conv2DTranspose, out_, in_);
  }

  /// Ho = conv_transpose_output_length(H, kh, stride_h, same) (Keras's
  /// deconv_output_length): never empty. UserError when the number of inputs is not 1.
  Shape infer(const std::vector<Shape>& inputs) override {
    set_input(inputs);
    const Conv2DParams& g = c_.geom;
    out_ = Shape{in_.n, conv_transpose_output_length(in_.h, g.kh, g.stride_h, g.same_padding),
                 conv_transpose_output_length(in_.w, g.kw, g.stride_w, g.same_padding), c_.filters};
    return out_;
  }

  /// kernel [kh, kw, filters, Cin]; Keras computes fans from the shape as it
  /// would for Conv2D: receptive = kh*kw, fan_in = filters*receptive,
  /// fan_out = Cin*receptive; bias [filters].
  std::vector<ParamSpec> param_specs() const override {
    return kernel_and_bias_specs(c_.filters, in_.c);
  }

 protected:
  /// cuDNN runs the transposed convolution as a Conv2D from y to x: K = Cin.
  int conv_filters() const override { return in_.c; }
};

}  // namespace

std::unique_ptr<Layer> make_conv2d_transpose(ParamReader& p, const std::string& name) {
  ConvConfig c = read_conv_config(p);
  if (c.geom.dilation_h > 1 || c.geom.dilation_w > 1)
    p.fail("dilation_rate", "must be 1: a dilated Conv2DTranspose is not supported; use dilation_rate on Conv2D");
  return std::make_unique<Conv2DTranspose>(name, c);
}

}  // namespace trainer
