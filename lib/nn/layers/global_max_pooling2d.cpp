// GlobalMaxPooling2D (Keras): x [N, H, W, C] -> y [N, C] (held as
// [N, 1, 1, C]), the largest value of each channel over the H*W pixels of a
// sample; pixels that tie for it share its gradient (tf.reduce_max's).
// Keys: keepdims, data_format (nn/layers/global_pooling.h).
#include "backend/elementwise_ops.h"
#include "nn/layers/global_pooling.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class GlobalMaxPooling2D final : public GlobalPooling2D {
 public:
  using GlobalPooling2D::GlobalPooling2D;
  std::string type() const override { return "GlobalMaxPooling2D"; }
  /// A MaxPooling2D whose one window is the whole input.
  LayerDescription describe() const override { return describe_window(LayerKind::MaxPooling2D); }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    y.resize(Shape{xt.shape().n, 1, 1, in_.c});
    global_max_pool_forward(ctx.device, xt.data(), xt.shape(), y.data());
  }

  /// dx = dy / k at the k pixels equal to the maximum, 0 elsewhere.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    global_max_pool_backward(ctx.device, x[0]->data(), x[0]->shape(), y.data(), dy.data(), dx[0]->data());
  }
};

}  // namespace

std::unique_ptr<Layer> make_global_max_pooling2d(ParamReader& p, const std::string& name) {
  const bool keepdims = read_global_pooling_keys(p);
  return std::make_unique<GlobalMaxPooling2D>(name, keepdims);
}

}  // namespace trainer
