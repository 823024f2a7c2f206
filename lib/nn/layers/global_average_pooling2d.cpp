// GlobalAveragePooling2D (Keras): x [N, H, W, C] -> y [N, C] (held as
// [N, 1, 1, C]), the mean of each channel over the H*W pixels of a sample.
// Keys: keepdims, data_format (nn/layers/global_pooling.h).
#include "backend/elementwise_ops.h"
#include "nn/layers/global_pooling.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class GlobalAveragePooling2D final : public GlobalPooling2D {
 public:
  using GlobalPooling2D::GlobalPooling2D;
  std::string type() const override { return "GlobalAveragePooling2D"; }
  /// An AveragePooling2D whose one window is the whole input.
  LayerDescription describe() const override { return describe_window(LayerKind::AveragePooling2D); }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    y.resize(Shape{xt.shape().n, 1, 1, in_.c});
    global_avg_pool_forward(ctx.device, xt.data(), xt.shape(), y.data());
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  /// dx = dy / (H*W) at every pixel.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    global_avg_pool_backward(ctx.device, dy.data(), x[0]->shape(), dx[0]->data());
  }
};

}  // namespace

std::unique_ptr<Layer> make_global_average_pooling2d(ParamReader& p, const std::string& name) {
  const bool keepdims = read_global_pooling_keys(p);
  return std::make_unique<GlobalAveragePooling2D>(name, keepdims);
}

}  // namespace trainer
