// Dense (Keras): y = activation(x · kernel + bias) on the last axis, x
// [N, H, W, Cin] -> y [N, H, W, units], kernel [Cin, units], bias [units]: as
// Keras applies a Dense layer to every pixel of a 4-D input (the same as a
// 1x1 Conv2D, which is how it runs). A GlobalAveragePooling2D's [N, C]
// output, held as [N, 1, 1, C], gives Keras's [N, units] (a
// squeeze-and-excitation block's bottleneck).
#include "nn/layers/conv_common.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Dense final : public ConvLayerBase<Conv2DOp> {
 public:
  using ConvLayerBase::ConvLayerBase;
  std::string type() const override { return "Dense"; }
  /// A 1x1 Conv2D (the ONNX exporter writes Conv, the kernel as [units, Cin, 1, 1]).
  LayerDescription describe() const override { return describe_conv(LayerKind::Conv2D, in_, out_); }

  /// [H, W, units]. UserError when the number of inputs is not 1.
  Shape infer(const std::vector<Shape>& inputs) override {
    set_input(inputs);
    out_ = Shape{in_.n, in_.h, in_.w, c_.filters};
    return out_;
  }

  /// kernel [Cin, units] with Keras's fans (fan_in Cin, fan_out units: a 1x1
  /// kernel's, whose elements it holds in the same order); bias [units].
  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> specs = kernel_and_bias_specs(in_.c, c_.filters);
    specs[0].shape = {in_.c, c_.filters};
    return specs;
  }

 protected:
  int conv_filters() const override { return c_.filters; }
};

}  // namespace

std::unique_ptr<Layer> make_dense(ParamReader& p, const std::string& name) {
  if (!p.has("units") && p.has("filters"))
    p.fail("filters", "is Conv2D's key; Dense takes 'units' (its output channels), e.g. units: 64");
  ConvConfig c;  // geometry: 1x1, strides 1, valid
  c.filters = p.get_int("units", std::nullopt, 1, 65536);
  read_affine_keys(p, c);
  return std::make_unique<Dense>(name, c);
}

}  // namespace trainer
