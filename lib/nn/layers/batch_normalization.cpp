// BatchNormalization (keras.layers.BatchNormalization) over the channel axis of
// [N, H, W, C] (Ioffe & Szegedy 2015):
//   y = gamma * (x - mean) / sqrt(var + epsilon) + beta,  per channel.
// Training: mean and biased var over N, H, W of the batch; the moving
// statistics are updated as moving = moving * momentum + batch * (1 - momentum),
// where the batch variance is the unbiased one, var * m / (m - 1) (m pixels per
// channel, m - 1 clamped to >= 1): this is what TensorFlow's fused batch-norm
// kernel (the path Keras 2 takes for 4-D NHWC input) returns for the moving
// average. Keras 3 and Keras 2's non-fused path use the biased variance there.
// Inference: mean and var are the moving statistics.
//
// YAML keys (Keras names and defaults): axis: -1 (or 3; nothing else),
// momentum: 0.99, epsilon: 0.001, center: true, scale: true,
// beta_initializer: zeros, gamma_initializer: ones, moving_mean_initializer:
// zeros, moving_variance_initializer: ones, synchronized: false.
//
// synchronized: true (Keras 2.12+): the per-channel sums (sum x, sum x^2,
// count) of the forward pass and (sum dy, sum dy * xhat) of the backward pass
// are all-reduced over the towers through ctx.comm, so N towers compute exactly
// the statistics of one tower on the whole batch. Such a layer is collective():
// a tower with no samples still joins the collectives (with zeros).
//
// Weights (Keras order and names): gamma [C] (when scale), beta [C] (when
// center), moving_mean [C], moving_variance [C] (the last two not trainable).
// Parameter gradients are this tower's sums (the tower all-reduce adds them).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "dist/communicator.h"
#include "nn/initializers.h"
#include "nn/registry.h"

namespace trainer {

namespace {

struct BNOptions {
  double momentum = 0.99, epsilon = 1e-3;
  bool center = true, scale = true, synchronized = false;
  std::string beta_init = "zeros", gamma_init = "ones", mean_init = "zeros", var_init = "ones";
};

/// Per-channel sums of f(p, c) and g(p, c) over P pixels of C channels, in
/// double: out[c] = sum_p f, out[C + c] = sum_p g. Each thread sums a static
/// range of pixels; the partial sums are added in thread order (deterministic
/// for a fixed thread count). partial is scratch space.
template <class F>
void channel_sums(long long P, int C, std::vector<double>& partial, std::vector<double>& out, F fg) {
  const int T = omp_get_max_threads();
  partial.assign(size_t(T) * 2 * C, 0.0);
  out.assign(size_t(2) * C, 0.0);
#pragma omp parallel num_threads(T)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    double* s1 = partial.data() + size_t(t) * 2 * C;
    double* s2 = s1 + C;
    const long long begin = P * t / nt, end = P * (t + 1) / nt;
    for (long long p = begin; p < end; ++p) fg(p, s1, s2);
  }
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < 2 * C; ++i) out[i] += partial[size_t(t) * 2 * C + i];
}

class BatchNormalization : public Layer {
 public:
  BatchNormalization(std::string name, BNOptions o) : Layer(std::move(name)), o_(std::move(o)) {}
  std::string type() const override { return "BatchNormalization"; }
  bool collective() const override { return o_.synchronized; }
  /// Inference form: the moving statistics (gamma and beta absent when scale or center is false).
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::BatchNormalization;
    d.epsilon = o_.epsilon;
    return d;
  }

  /// One input [H, W, C]; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("BatchNormalization takes exactly 1 input, got " + std::to_string(inputs.size()));
    c_ = inputs[0].c;
    return inputs[0];
  }

  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> v;
    auto spec = [&](const char* name, const std::string& init, bool trainable) {
      v.push_back(ParamSpec{name, {c_}, init, double(c_), double(c_), trainable});
    };
    if (o_.scale) spec("gamma", o_.gamma_init, true);
    if (o_.center) spec("beta", o_.beta_init, true);
    spec("moving_mean", o_.mean_init, false);
    spec("moving_variance", o_.var_init, false);
    return v;
  }

  void bind(const std::vector<float*>& params, const std::vector<float*>& grads) override {
    size_t i = 0;
    if (o_.scale) gamma_ = params[i], dgamma_ = grads[i], ++i;
    if (o_.center) beta_ = params[i], dbeta_ = grads[i], ++i;
    moving_mean_ = params[i++];
    moving_var_ = params[i];
  }

  /// y [N, H, W, C] from x [N, H, W, C]; training mode updates the moving statistics.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Shape s = x[0]->shape();
    const int C = c_;
    const long long P = (long long)s.n * s.h * s.w;
    const float* in = x[0]->data();
    y.resize(s);
    mean_.resize(C), istd_.resize(C), a_.resize(C), b_.resize(C);
    batch_stats_ = ctx.training;
    if (ctx.training) {
      channel_sums(P, C, partial_, sums_, [in, C](long long p, double* s1, double* s2) {
        const float* row = in + p * C;
        for (int c = 0; c < C; ++c) {
          const double v = row[c];
          s1[c] += v;
          s2[c] += v * v;
        }
      });
      sums_.push_back(double(P));
      if (o_.synchronized && ctx.comm) ctx.comm->all_reduce_sum(ctx.rank, sums_.data(), sums_.size());
      count_ = sums_[2 * C];
      if (count_ == 0) return;  // Every tower is empty: nothing to normalise or learn from.
      const double unbias = count_ / std::max(count_ - 1.0, 1.0), mom = o_.momentum;
      for (int c = 0; c < C; ++c) {
        const double mean = sums_[c] / count_;
        const double var = std::max(sums_[C + c] / count_ - mean * mean, 0.0);
        mean_[c] = float(mean);
        istd_[c] = float(1.0 / std::sqrt(var + o_.epsilon));
        moving_mean_[c] = float(moving_mean_[c] * mom + mean * (1.0 - mom));
        moving_var_[c] = float(moving_var_[c] * mom + var * unbias * (1.0 - mom));
      }
    } else {
      for (int c = 0; c < C; ++c) {
        mean_[c] = moving_mean_[c];
        istd_[c] = float(1.0 / std::sqrt(double(moving_var_[c]) + o_.epsilon));
      }
    }
    for (int c = 0; c < C; ++c) {
      a_[c] = (gamma_ ? gamma_[c] : 1.f) * istd_[c];
      b_[c] = (beta_ ? beta_[c] : 0.f) - mean_[c] * a_[c];
    }
    const float* a = a_.data();
    const float* b = b_.data();
    float* out = y.data();
#pragma omp parallel for schedule(static)
    for (long long p = 0; p < P; ++p) {
      const float* src = in + p * C;
      float* dst = out + p * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dst[c] = src[c] * a[c] + b[c];
    }
  }

  /// Batch statistics (Ioffe & Szegedy 2015, section 3), m = count, xhat = (x - mean) * istd:
  ///   dbeta = sum dy, dgamma = sum dy * xhat,
  ///   dx = gamma * istd * (dy - sum(dy) / m - xhat * sum(dy * xhat) / m),
  /// the sums in dx taken over all towers when synchronized. After an inference
  /// forward the statistics are constants: dx = gamma * istd * dy.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    const Shape s = x[0]->shape();
    const int C = c_;
    const long long P = (long long)s.n * s.h * s.w;
    const float* in = x[0]->data();
    const float* g = dy.data();
    const float* mean = mean_.data();
    const float* istd = istd_.data();
    channel_sums(P, C, partial_, sums_, [=](long long p, double* s1, double* s2) {
      const float* xr = in + p * C;
      const float* gr = g + p * C;
      for (int c = 0; c < C; ++c) {
        s1[c] += gr[c];
        s2[c] += double(gr[c]) * ((xr[c] - mean[c]) * istd[c]);
      }
    });
    for (int c = 0; c < C; ++c) {
      if (dbeta_) dbeta_[c] = float(sums_[c]);
      if (dgamma_) dgamma_[c] = float(sums_[C + c]);
    }
    if (batch_stats_ && o_.synchronized && ctx.comm)
      ctx.comm->all_reduce_sum(ctx.rank, sums_.data(), sums_.size());
    if (!dx[0]) return;
    dx[0]->resize(s);
    if (P == 0) return;
    k1_.resize(C), k2_.resize(C), k3_.resize(C);
    for (int c = 0; c < C; ++c) {
      k1_[c] = (gamma_ ? gamma_[c] : 1.f) * istd_[c];
      k2_[c] = batch_stats_ ? float(sums_[c] / count_) : 0.f;
      k3_[c] = batch_stats_ ? float(sums_[C + c] / count_) : 0.f;
    }
    const float* k1 = k1_.data();
    const float* k2 = k2_.data();
    const float* k3 = k3_.data();
    float* out = dx[0]->data();
#pragma omp parallel for schedule(static)
    for (long long p = 0; p < P; ++p) {
      const float* xr = in + p * C;
      const float* gr = g + p * C;
      float* dr = out + p * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) dr[c] = k1[c] * (gr[c] - k2[c] - (xr[c] - mean[c]) * istd[c] * k3[c]);
    }
  }

 private:
  BNOptions o_;
  int c_ = 0;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *moving_mean_ = nullptr, *moving_var_ = nullptr;
  bool batch_stats_ = false;  ///< Whether the last forward used batch statistics.
  double count_ = 0;          ///< Pixels per channel behind those statistics (all towers).
  std::vector<float> mean_, istd_, a_, b_, k1_, k2_, k3_;  ///< Per channel [C].
  std::vector<double> partial_, sums_;                      ///< Reduction scratch.
};

}  // namespace

std::unique_ptr<Layer> make_batch_normalization(ParamReader& p, const std::string& name) {
  int axis = p.get_int("axis", -1);
  if (axis != -1 && axis != 3)
    p.fail("axis", "must be -1 (or 3): trainer normalises over the channel axis of NHWC tensors only");
  BNOptions o;
  o.momentum = p.get_double("momentum", 0.99, 0.0, 1.0);
  o.epsilon = p.get_double("epsilon", 1e-3, 1e-12);
  o.center = p.get_bool("center", true);
  o.scale = p.get_bool("scale", true);
  o.beta_init = p.get_string("beta_initializer", std::string("zeros"), initializer_names());
  o.gamma_init = p.get_string("gamma_initializer", std::string("ones"), initializer_names());
  o.mean_init = p.get_string("moving_mean_initializer", std::string("zeros"), initializer_names());
  o.var_init = p.get_string("moving_variance_initializer", std::string("ones"), initializer_names());
  o.synchronized = p.get_bool("synchronized", false);
  return std::make_unique<BatchNormalization>(name, o);
}

}  // namespace trainer
