// UpSampling2D (keras.layers.UpSampling2D), x [N, H, W, C] -> y [N, H*sh, W*sw, C]:
//   nearest:  y[n, i, j, c] = x[n, i / sh, j / sw, c] (backward sums dy over
//             each sh x sw block);
//   bilinear: tf.image.resize's bilinear interpolation with half-pixel
//             centres (backend/elementwise_math.h, bilinear_tap).
// YAML: {type: UpSampling2D, size: 2 | [sh, sw] (default 2), interpolation:
// nearest | bilinear (default nearest)}; Keras's other interpolations are a
// UserError.
#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/data_format.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class UpSampling2D : public Layer {
 public:
  UpSampling2D(std::string name, int sh, int sw, bool bilinear)
      : Layer(std::move(name)), sh_(sh), sw_(sw), bilinear_(bilinear) {}
  std::string type() const override { return "UpSampling2D"; }
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::UpSampling2D;
    d.size_h = sh_;
    d.size_w = sw_;
    d.bilinear = bilinear_;
    return d;
  }
  /// Resize by the factors: nearest, asymmetric, floor (y[i] = x[floor(i / size)], exactly Keras's), or
  /// linear with half-pixel centres (TensorFlow's half_pixel_centers).
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const std::string roi = g.constant(io.name + "/roi", {0}, {});
    const std::string scales = g.constant(io.name + "/scales", {4}, {1.f, 1.f, float(sh_), float(sw_)});
    OnnxNode n = g.node("Resize", {io.ins[0], roi, scales}, io.out, io.name);
    if (bilinear_)
      n.text("mode", "linear").text("coordinate_transformation_mode", "half_pixel");
    else
      n.text("mode", "nearest").text("coordinate_transformation_mode", "asymmetric").text("nearest_mode", "floor");
  }
  bool passes_values() const override { return true; }

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
    const UpSample2DParams p{sh_, sw_};
    if (bilinear_)
      upsample_bilinear_forward(ctx.device, x[0]->data(), s, p, y.data());
    else
      upsample_nearest_forward(ctx.device, x[0]->data(), s, p, y.data());
  }

  /// Reads only its inputs' shapes.
  BackwardReads backward_reads() const override { return {false, false}; }
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    const Shape s = x[0]->shape();
    dx[0]->resize(s);
    const UpSample2DParams p{sh_, sw_};
    if (bilinear_)
      upsample_bilinear_backward(ctx.device, dy.data(), s, p, dx[0]->data());
    else
      upsample_nearest_backward(ctx.device, dy.data(), s, p, dx[0]->data());
  }

 private:
  int sh_, sw_;
  bool bilinear_;  ///< interpolation: bilinear (else nearest).
};

}  // namespace

std::unique_ptr<Layer> make_up_sampling2d(ParamReader& p, const std::string& name) {
  read_data_format(p);
  std::vector<int> size = p.get_int_pair("size", std::vector<int>{2, 2}, 1, 1024);
  const std::string interp = p.get_string("interpolation", std::string("nearest"));
  if (interp == "bicubic" || interp == "lanczos3" || interp == "lanczos5" || interp == "area")
    p.fail("interpolation", "value '" + interp + "' is not supported by trainer. Use 'nearest' or 'bilinear' (or a "
                            "Conv2DTranspose to learn the upsampling)");
  if (interp != "nearest" && interp != "bilinear")
    p.fail("interpolation", "has unknown value '" + interp + "'; use 'nearest' or 'bilinear'");
  return std::make_unique<UpSampling2D>(name, size[0], size[1], interp == "bilinear");
}

}  // namespace trainer
