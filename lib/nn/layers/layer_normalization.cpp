// LayerNormalization (keras.layers.LayerNormalization; Ba et al. 2016) over
// the channel axis of x [N, H, W, C]: each pixel's C values are normalised by
// their own mean and biased variance,
//   y = gamma[c] * (x - mean) / sqrt(var + epsilon) + beta[c],
// in training and inference alike (so N towers compute what one does, with no
// communication), as ConvNeXt-style blocks use it. This is Keras's default
// axis=-1; normalising each sample over H, W and C is GroupNormalization with
// groups: 1 (with [C] weights, where Keras's axis=[1, 2, 3] has [H, W, C]).
// Computed as GroupNormalization's ops over [N * H * W, 1, 1, C] with one
// group: weights, backward and the shared keys in norm_common.h.
//
// YAML keys (Keras 3's names and defaults): axis: -1 (or 3; nothing else),
// epsilon: 0.001, center: true, scale: true, beta_initializer: zeros,
// gamma_initializer: ones, beta_regularizer and gamma_regularizer: none;
// rms_scaling: false (true, Keras 3's RMS normalisation, is refused).
#include "core/error.h"
#include "nn/layers/norm_common.h"
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

  /// One input [H, W, C]; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("LayerNormalization takes exactly 1 input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    return inputs[0];
  }

 protected:
  Shape stats_shape(Shape s) const override { return Shape{s.n * s.h * s.w, 1, 1, s.c}; }
  int groups() const override { return 1; }
};

}  // namespace

std::unique_ptr<Layer> make_layer_normalization(ParamReader& p, const std::string& name) {
  if (p.get_bool("rms_scaling", false))
    p.fail("rms_scaling", "is not supported: trainer's LayerNormalization subtracts the mean; remove the key");
  return std::make_unique<LayerNormalization>(name, read_norm_options(p, "LayerNormalization"));
}

}  // namespace trainer
