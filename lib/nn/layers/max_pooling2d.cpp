// MaxPooling2D (Keras): x [N, H, W, C] -> y [N, Ho, Wo, C], the maximum of
// each pool_size window; 'same' padding pads with pixels that never win.
#include "backend/ops.h"
#include "config/params.h"
#include "core/error.h"
#include "nn/layer.h"
#include "nn/onnx_graph.h"
#include "nn/layers/conv_common.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class MaxPooling2D final : public Layer {
 public:
  MaxPooling2D(std::string name, Pool2DParams p) : Layer(std::move(name)), p_(p), op_(p) {}
  std::string type() const override { return "MaxPooling2D"; }
  /// Window, strides and the padding the backend applies for the inferred shapes.
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::MaxPooling2D;
    d.kh = p_.ph, d.kw = p_.pw, d.stride_h = p_.stride_h, d.stride_w = p_.stride_w;
    d.pad_h = conv_padding(in_.h, out_.h, p_.ph, p_.stride_h);
    d.pad_w = conv_padding(in_.w, out_.w, p_.pw, p_.stride_w);
    return d;
  }
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override { g.pool(describe(), io); }
  bool passes_values() const override { return true; }

  /// Ho = conv_output_length(H, ph, stride_h, same) (Keras). UserError when the
  /// number of inputs is not 1 or the output would be empty.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("MaxPooling2D takes one input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    out_ = pool_output_shape(in_, p_);
    return out_;
  }

  /// Pooling only selects values: any type, y of x's.
  DTypeSupport dtype_support() const override { return DTypeSupport::Uniform; }

  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    require_type(y, xt.dtype());
    Shape ys = out_.with_batch(xt.shape().n);
    y.resize(ys);
    op_.forward(ctx.device, xt.view(), y.view(), ctx.training);
  }

  /// Routes dy to the maxima of the last training forward (see MaxPool2DOp).
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&,
                const Tensor& dy, const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    dx[0]->resize(xt.shape());
    require_type(*dx[0], dy.dtype());
    op_.backward(ctx.device, dy.view(), dx[0]->view());
  }

 private:
  Pool2DParams p_;
  MaxPool2DOp op_;
  Shape in_, out_;
};

}  // namespace

std::unique_ptr<Layer> make_max_pooling2d(ParamReader& p, const std::string& name) {
  return std::make_unique<MaxPooling2D>(name, read_pool_params(p));
}

}  // namespace trainer
