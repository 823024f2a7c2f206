// AveragePooling2D (Keras): x [N, H, W, C] -> y [N, Ho, Wo, C], the mean of
// each pool_size window over its pixels inside x; 'same' padding is not
// counted (TensorFlow's avg_pool). Keys as MaxPooling2D's.
#include "backend/elementwise_ops.h"
#include "config/params.h"
#include "core/error.h"
#include "nn/layer.h"
#include "nn/onnx_graph.h"
#include "nn/layers/conv_common.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class AveragePooling2D final : public Layer {
 public:
  AveragePooling2D(std::string name, Pool2DParams p) : Layer(std::move(name)), p_(p) {}
  std::string type() const override { return "AveragePooling2D"; }
  /// Window, strides and TensorFlow's padding for the inferred shapes.
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::AveragePooling2D;
    d.kh = p_.ph, d.kw = p_.pw, d.stride_h = p_.stride_h, d.stride_w = p_.stride_w;
    d.pad_h = pad_h(), d.pad_w = pad_w();
    return d;
  }
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override { g.pool(describe(), io); }
  bool passes_values() const override { return true; }

  /// Ho = conv_output_length(H, ph, stride_h, same) (Keras). UserError when the
  /// number of inputs is not 1 or the output would be empty.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("AveragePooling2D takes one input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    out_ = pool_output_shape(in_, p_);
    return out_;
  }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    const Shape ys = out_.with_batch(xt.shape().n);
    y.resize(ys);
    avg_pool_forward(ctx.device, xt.data(), xt.shape(), p_, pad_h(), pad_w(), y.data(), ys);
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  /// Each dy shared equally among its window's pixels inside x.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    dx[0]->resize(x[0]->shape());
    avg_pool_backward(ctx.device, dy.data(), dy.shape(), p_, pad_h(), pad_w(), dx[0]->data(), x[0]->shape());
  }

 private:
  PadPair pad_h() const { return conv_padding(in_.h, out_.h, p_.ph, p_.stride_h); }
  PadPair pad_w() const { return conv_padding(in_.w, out_.w, p_.pw, p_.stride_w); }
  Pool2DParams p_;
  Shape in_, out_;  ///< Per-sample shapes from infer().
};

}  // namespace

std::unique_ptr<Layer> make_average_pooling2d(ParamReader& p, const std::string& name) {
  return std::make_unique<AveragePooling2D>(name, read_pool_params(p));
}

}  // namespace trainer
