// UpSampling2D (keras.layers.UpSampling2D), nearest-neighbour only:
//   y[n, i, j, c] = x[n, i / sh, j / sw, c],  y: [N, H*sh, W*sw, C].
// YAML: {type: UpSampling2D, size: 2 | [sh, sw] (default 2), interpolation: nearest}
// 'bilinear' (a Keras option) is rejected with a UserError. Backward sums dy
// over each sh x sw block.
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class UpSampling2D : public Layer {
 public:
  UpSampling2D(std::string name, int sh, int sw) : Layer(std::move(name)), sh_(sh), sw_(sw) {}
  std::string type() const override { return "UpSampling2D"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::UpSampling2D;
    d.size_h = sh_;
    d.size_w = sw_;
    return d;
  }

  /// One input [H, W, C] -> [H*sh, W*sw, C]. UserError for another input count.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("UpSampling2D takes exactly 1 input, got " + std::to_string(inputs.size()));
    const Shape& s = inputs[0];
    return Shape{s.n, checked_side((long long)s.h * sh_), checked_side((long long)s.w * sw_), s.c};
  }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Shape s = x[0]->shape();
    y.resize(Shape{s.n, s.h * sh_, s.w * sw_, s.c});
    upsample_nearest_forward(ctx.device, x[0]->data(), s, UpSample2DParams{sh_, sw_}, y.data());
  }

  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    const Shape s = x[0]->shape();
    dx[0]->resize(s);
    upsample_nearest_backward(ctx.device, dy.data(), s, UpSample2DParams{sh_, sw_}, dx[0]->data());
  }

 private:
  int sh_, sw_;
};

}  // namespace

std::unique_ptr<Layer> make_up_sampling2d(ParamReader& p, const std::string& name) {
  std::vector<int> size = p.get_int_pair("size", std::vector<int>{2, 2}, 1, 1024);
  std::string interp = p.get_string("interpolation", std::string("nearest"));
  if (interp == "bilinear")
    p.fail("interpolation",
           "value 'bilinear' is not supported by trainer. Use 'nearest' (or a Conv2DTranspose to learn "
           "the upsampling)");
  if (interp != "nearest")
    p.fail("interpolation", "has unknown value '" + interp + "'. The only supported value is 'nearest'");
  return std::make_unique<UpSampling2D>(name, size[0], size[1]);
}

}  // namespace trainer
