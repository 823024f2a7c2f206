#pragma once
// The part GroupNormalization and LayerNormalization share: each normalises
// groups of values of one sample by the group's own mean and biased variance,
//   y = gamma[c] * (x - mean) / sqrt(var + epsilon) + beta[c],
// in training and inference alike (no moving statistics, so N towers compute
// what one does with no communication). A derived layer says what a group is
// (rows, compute_stats, apply, compute_grads: GroupNormalization's channel
// groups of a sample through the group_norm_* ops, LayerNormalization's
// pixels through layer_norm_*). Weights (Keras order and names): gamma [C]
// (when scale), beta [C] (when center). Backward, xhat = (x - mean) * istd,
// over a group's M values:
//   dbeta = sum dy, dgamma = sum dy * xhat (over the samples and pixels),
//   dx = istd * (gamma dy - mean(gamma dy) - xhat * mean(gamma dy * xhat)).
#include <string>
#include <utility>

#include "backend/elementwise_ops.h"
#include "config/params.h"
#include "core/buffer.h"
#include "nn/layer.h"
#include "nn/regularizer.h"

namespace trainer {

/// Keras's keys shared by both layers (defaults as Keras 3).
struct NormOptions {
  double epsilon = 1e-3;
  bool center = true, scale = true;
  std::string beta_init = "zeros", gamma_init = "ones";
  Regularizer beta_regularizer, gamma_regularizer;
};

/// Reads epsilon, center, scale, the initializers and regularizers, and
/// refuses an axis other than -1 or 3 (UserError naming the key; axis_fix is
/// appended to the message, e.g. how to normalise other axes).
NormOptions read_norm_options(ParamReader& p, const std::string& layer_type, const std::string& axis_fix);

class SampleNormLayer : public Layer {
 public:
  SampleNormLayer(std::string name, NormOptions o) : Layer(std::move(name)), o_(std::move(o)) {}

  std::vector<ParamSpec> param_specs() const override;
  void bind(const std::vector<float*>& params, const std::vector<float*>& grads) override;
  /// y [N, H, W, C] from x: the groups' statistics (kept for backward), then apply.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override;
  /// dgamma, dbeta (this tower's sums; the tower all-reduce adds them) and,
  /// when the model needs it, dx. InternalError without a training forward
  /// of x's batch size.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                const std::vector<Tensor*>& dx) override;

 protected:
  /// The number of groups (statistics) of an x of shape s.
  virtual size_t rows(Shape s) const = 0;
  /// a.mean, a.istd [rows(x)] of x's groups. The derived layer adds what
  /// else its ops need to a (NormArgs: the statistics and weights are set).
  virtual void compute_stats(const Device& d, const Tensor& x, NormArgs a) = 0;
  /// y <- gn_apply of every element of x with its group's statistics.
  virtual void apply(const Device& d, const Tensor& x, NormArgs a, float* y) = 0;
  /// a.dgamma, a.dbeta (each skipped when nullptr) and dx (skipped when nullptr).
  virtual void compute_grads(const Device& d, const Tensor& x, const Tensor& dy, NormArgs a, float* dx) = 0;

  NormOptions o_;
  Shape in_;  ///< The per-sample input shape, set by infer().

 private:
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  /// Per group mean and 1 / sqrt(var + epsilon), on the tower's device.
  struct Stats {
    Buffer<float> mean, istd;
  };
  Stats train_, inference_;  ///< Of the last training forward, and of the last inference one.
  /// st's statistics with the weights and their gradients.
  NormArgs args(Stats& st) const;
};

}  // namespace trainer
