// Conv2D (Keras): y = activation(conv(x, kernel) + bias), x [N, H, W, Cin] ->
// y [N, Ho, Wo, filters], kernel [kh, kw, Cin / groups, filters], bias
// [filters]; with groups > 1 (Keras's groups) output group g of filters /
// groups channels convolves input group g of Cin / groups channels alone.
#include "nn/layers/conv_common.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class Conv2D final : public ConvLayerBase<Conv2DOp> {
 public:
  Conv2D(std::string name, const ConvConfig& c, int groups) : ConvLayerBase(std::move(name), c) { set_groups(groups); }
  std::string type() const override { return "Conv2D"; }
  /// Padding of the input for the inferred shapes, as the backend applies it.
  LayerDescription describe() const override { return describe_conv(LayerKind::Conv2D, in_, out_); }

  /// Ho = conv_output_length(H, span_h, stride_h, same) (Keras). UserError when the
  /// number of inputs is not 1, the output would be empty, or groups does not
  /// divide the input's channels and the filters.
  Shape infer(const std::vector<Shape>& inputs) override {
    infer_conv(inputs, c_.filters);
    const int g = c_.geom.groups;
    if (in_.c % g != 0 || c_.filters % g != 0)
      throw UserError("groups " + std::to_string(g) + " must divide the input's " + std::to_string(in_.c) +
                      " channels and the " + std::to_string(c_.filters) +
                      " filters (as Keras requires); choose a groups value that divides both");
    return out_;
  }

  /// kernel [kh, kw, Cin / groups, filters] with Keras's fans: receptive =
  /// kh*kw, fan_in = (Cin / groups)*receptive, fan_out = filters*receptive; bias [filters].
  std::vector<ParamSpec> param_specs() const override {
    return kernel_and_bias_specs(in_.c / c_.geom.groups, c_.filters);
  }

 protected:
  int conv_filters() const override { return c_.filters; }
};

}  // namespace

std::unique_ptr<Layer> make_conv2d(ParamReader& p, const std::string& name) {
  const ConvConfig c = read_conv_config(p);
  return std::make_unique<Conv2D>(name, c, p.get_int("groups", 1, 1, 65536));
}

}  // namespace trainer
