// LayerNormalization (keras.layers.LayerNormalization; Ba et al. 2016) over
// the channel axis of x [N, H, W, C]: each pixel's C values are normalised by
// their own mean and biased variance,
//   y = gamma[c] * (x - mean) / sqrt(var + epsilon) + beta[c],
// in training and inference alike (so N towers compute what one does, with no
// communication), as ConvNeXt-style blocks use it. This is Keras's default
// axis=-1; normalising each sample over H, W and C is GroupNormalization with
// groups: 1 (with [C] weights, where Keras's axis=[1, 2, 3] has [H, W, C]).
// The ops are layer_norm_* (backend/elementwise_ops.h; no scratch kept);
// weights, backward and the shared keys in norm_common.h.
//
// YAML keys (Keras 3's names and defaults): axis: -1 (or 3, or a one-element
// list of either; nothing else),
// epsilon: 0.001, center: true, scale: true, beta_initializer: zeros,
// gamma_initializer: ones, beta_regularizer and gamma_regularizer: none;
// rms_scaling: false (true, Keras 3's RMS normalisation, is refused).
#include <climits>

#include "backend/elementwise_ops.h"
#include "core/error.h"
#include "nn/layers/norm_common.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class LayerNormalization : public SampleNormLayer {
 public:
  using SampleNormLayer::SampleNormLayer;
  std::string type() const override { return "LayerNormalization"; }
  /// The same computation in inference (gamma and beta absent when scale or center is false).
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::LayerNormalization;
    d.epsilon = o_.epsilon;
    d.input = in_;
    return d;
  }
  /// ONNX's LayerNormalization is opset 17: each pixel's channels as a row of
  /// [N * H * W, 1, C] (NHWC order), InstanceNormalization over it, back to
  /// [N, C, H, W], then gamma and beta (channel_affine).
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const LayerDescription d = describe();
    const Shape& s = d.input;
    const int64_t c = s.c;
    const std::string& name = io.name;
    g.node("Transpose", io.ins, name + "/nhwc", name + "/to_nhwc").ints("perm", {0, 2, 3, 1});
    g.node("Reshape", {name + "/nhwc", g.int_constant(name + "/rows_shape", {-1, 1, c})}, name + "/rows",
           name + "/to_rows");
    g.node("InstanceNormalization",
           {name + "/rows", g.constant(name + "/one", {1}, {1.f}), g.constant(name + "/zero", {1}, {0.f})},
           name + "/normalized", name + "/normalize")
        .real("epsilon", float(d.epsilon));
    g.node("Reshape", {name + "/normalized", g.int_constant(name + "/shape", {-1, s.h, s.w, c})},
           name + "/normalized_nhwc", name + "/from_rows");
    g.node("Transpose", {name + "/normalized_nhwc"}, name + "/nchw", name + "/to_nchw").ints("perm", {0, 3, 1, 2});
    g.channel_affine(io.weights, c, name + "/nchw", io.out, name);
  }

  /// One input [H, W, C]; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("LayerNormalization takes exactly 1 input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    return inputs[0];
  }

 protected:
  size_t rows(Shape s) const override { return size_t(s.n) * size_t(s.h) * size_t(s.w); }
  void compute_stats(const Device& d, const Tensor& x, NormArgs a) override {
    layer_norm_stats(d, x.data(), x.shape(), o_.epsilon, a);
  }
  /// group_norm_apply of x seen as [rows, 1, 1, C] with one group: a row's statistics for its C values.
  void apply(const Device& d, const Tensor& x, NormArgs a, float* y) override {
    const size_t n = rows(x.shape());
    if (n > size_t(INT_MAX))
      throw UserError("layer '" + name() + "': " + std::to_string(n) +
                      " pixels in one tower's batch are more than LayerNormalization handles (2^31 - 1); lower "
                      "training.batch_size");
    a.groups = 1;
    group_norm_apply(d, x.data(), Shape{int(n), 1, 1, x.shape().c}, a, y);
  }
  void compute_grads(const Device& d, const Tensor& x, const Tensor& dy, NormArgs a, float* dx) override {
    layer_norm_backward(d, x.data(), dy.data(), x.shape(), a, dx);
  }
};

}  // namespace

std::unique_ptr<Layer> make_layer_normalization(ParamReader& p, const std::string& name) {
  if (p.get_bool("rms_scaling", false))
    p.fail("rms_scaling", "is not supported: trainer's LayerNormalization subtracts the mean; set it to false or "
                          "remove the key");
  return std::make_unique<LayerNormalization>(
      name, read_norm_options(p, "LayerNormalization",
                              "; to normalise each sample over H, W and C (Keras's axis [1, 2, 3]), use "
                              "GroupNormalization with groups: 1"));
}

}  // namespace trainer
