// Dropout (keras.layers.Dropout), inverted dropout: in training each element is
// kept with probability 1 - rate and scaled by 1 / (1 - rate), else zeroed; in
// inference y = x. YAML: {type: Dropout, rate: 0.1 (required, [0, 1)), seed: 7}.
// SpatialDropout2D (keras.layers.SpatialDropout2D, Tompson et al. 2015) keeps
// or drops whole feature maps: one draw per (sample, channel), Keras's
// noise_shape (N, 1, 1, C); same keys.
//
// The mask is a pure function of (run seed ctx.seed, layer seed, ctx.step,
// global sample index ctx.sample_offset + n, element index within the sample,
// or its channel for SpatialDropout2D),
// computed with the splitmix64 mixing function (Steele, Lea & Flood 2014) as a
// counter-based generator, so a global batch gets the same masks however it is
// split across towers. The layer seed is 'seed' when given, else a 64-bit
// FNV-1a hash of the layer's name.
#include <spdlog/fmt/fmt.h>

#include <cmath>
#include <cstdint>

#include "backend/elementwise_ops.h"
#include "core/buffer.h"
#include "core/error.h"
#include "nn/data_format.h"
#include "nn/layers/on_device.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

/// 64-bit FNV-1a of s.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ULL;
  return h;
}

class Dropout : public Layer {
 public:
  Dropout(std::string name, double rate, uint64_t seed, bool spatial)
      : Layer(std::move(name)),
        seed_(seed),
        threshold_(uint32_t(std::llround(rate * double(1u << 24)))),
        scale_(float(1.0 / (1.0 - rate))),
        spatial_(spatial) {}
  std::string type() const override { return spatial_ ? "SpatialDropout2D" : "Dropout"; }
  /// Inference drops nothing: the identity.
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::Identity;
    return d;
  }
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override { g.node("Identity", io.ins, io.out, io.name); }
  bool identity_at_inference() const override { return true; }
  /// Each step draws its own mask (the step is a kernel argument), unless nothing is dropped.
  bool replayable() const override { return threshold_ == 0; }

  /// One input; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError(type() + " takes exactly 1 input, got " + std::to_string(inputs.size()));
    sample_numel_ = inputs[0].sample_numel();
    return inputs[0];
  }

  /// The mask, a byte an element, when the rate is above 0.
  LayerMemory gpu_training_memory(const LayerMemoryQuery& q) const override {
    LayerMemory m;
    if (threshold_ > 0) m.kept = sample_numel_ * size_t(q.batch);
    return m;
  }

  /// Training: y = x * mask / (1 - rate), the mask is kept for backward.
  /// Inference (or rate 0): y = x.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    masked_ = ctx.training && threshold_ > 0;
    if (!masked_) {
      y = *x[0];
      return;
    }
    const Shape s = x[0]->shape();
    y.resize(s);
    on_device(mask_, ctx.device).resize(s.numel());
    dropout_forward(ctx.device, x[0]->data(), s, dropout_step_key(ctx.seed, seed_, ctx.step), ctx.sample_offset,
                    DropoutParams{threshold_, scale_, spatial_}, y.data(), mask_.data());
  }

  /// Reads its input's shape and its own mask.
  BackwardReads backward_reads() const override { return {false, false}; }
  /// dx = dy * mask / (1 - rate) after a training forward, else dx = dy.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (!dx[0]) return;
    if (!masked_) {
      *dx[0] = dy;
      return;
    }
    dx[0]->resize(x[0]->shape());
    dropout_backward(ctx.device, dy.data(), mask_.data(), scale_, dx[0]->data(), dy.numel());
  }

 private:
  uint64_t seed_;
  uint32_t threshold_;  ///< An element is kept when its 24-bit draw is >= threshold_ = rate * 2^24.
  float scale_;
  bool spatial_;          ///< SpatialDropout2D: whole channels.
  bool masked_ = false;  ///< Whether the last forward applied a mask.
  size_t sample_numel_ = 0;  ///< Elements of one sample of the input (infer()).
  Buffer<uint8_t> mask_;  ///< Kept elements (0 or 1) on the tower's device.
};

std::unique_ptr<Layer> make(ParamReader& p, const std::string& name, bool spatial) {
  double rate = p.get_double("rate", std::nullopt);
  if (!(rate >= 0.0 && rate < 1.0))
    p.fail("rate", "must be in [0, 1) (the fraction dropped; 1 would drop everything), got " +
                       fmt::format("{}", rate));
  // null is Keras's seed=None: the default.
  uint64_t seed = p.given("seed") ? uint64_t(int64_t(p.get_int("seed", std::nullopt))) : fnv1a(name);
  p.skip("seed");  // known when absent too (unknown-key suggestions)
  return std::make_unique<Dropout>(name, rate, seed, spatial);
}

}  // namespace

std::unique_ptr<Layer> make_dropout(ParamReader& p, const std::string& name) { return make(p, name, false); }

std::unique_ptr<Layer> make_spatial_dropout2d(ParamReader& p, const std::string& name) {
  read_data_format(p);
  return make(p, name, true);
}

}  // namespace trainer
