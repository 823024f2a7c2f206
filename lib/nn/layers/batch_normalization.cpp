// BatchNormalization (keras.layers.BatchNormalization) over the channel axis of
// [N, H, W, C] (Ioffe & Szegedy 2015):
//   y = gamma * (x - mean) / sqrt(var + epsilon) + beta,  per channel.
// Training: mean and biased var over N, H, W of the batch; the moving
// statistics are updated as moving = moving * momentum + batch * (1 - momentum),
// where the batch variance is the unbiased one, var * m / (m - 1) (m pixels per
// channel, m - 1 clamped to >= 1): this is what TensorFlow's fused batch-norm
// kernel (the path Keras 2 takes for 4-D NHWC input) returns for the moving
// average. Keras 3 and Keras 2's non-fused path use the biased variance there.
// Inference: mean and var are the moving statistics. A frozen layer
// (trainable: false) computes as in inference in training too, and leaves its
// moving statistics as they are, as Keras 3 does for trainable = False.
//
// YAML keys (Keras names and defaults): axis: -1 (or 3; nothing else),
// momentum: 0.99, epsilon: 0.001, center: true, scale: true,
// beta_initializer: zeros, gamma_initializer: ones, moving_mean_initializer:
// zeros, moving_variance_initializer: ones, synchronized: false.
//
// synchronized: true (Keras 2.12+): the per-channel sums (sum x, sum x^2) of
// the forward pass and (sum dy, sum dy * xhat) of the backward pass are
// all-reduced over the towers through ctx.comm, and the pixel count is that of
// the global batch (ctx.global_batch * H * W), so N towers compute exactly the
// statistics of one tower on the whole batch. Such a layer is collective(): a
// tower with no samples still joins the collectives (with zeros).
//
// Weights (Keras order and names): gamma [C] (when scale), beta [C] (when
// center), moving_mean [C], moving_variance [C] (the last two not trainable).
// Parameter gradients are this tower's sums (the tower all-reduce adds them).
#include "backend/elementwise_ops.h"
#include "core/buffer.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "nn/initializers.h"
#include "nn/layers/on_device.h"
#include "nn/onnx_graph.h"
#include "nn/registry.h"

namespace trainer {

namespace {

struct BNOptions {
  double momentum = 0.99, epsilon = 1e-3;
  bool center = true, scale = true, synchronized = false;
  std::string beta_init = "zeros", gamma_init = "ones", mean_init = "zeros", var_init = "ones";
};

class BatchNormalization : public Layer {
 public:
  BatchNormalization(std::string name, BNOptions o) : Layer(std::move(name)), o_(std::move(o)) {}
  std::string type() const override { return "BatchNormalization"; }
  bool collective() const override { return o_.synchronized && !frozen(); }
  /// Inference form: the moving statistics (gamma and beta absent when scale or center is false).
  LayerDescription describe() const override {
    LayerDescription d;
    d.kind = LayerKind::BatchNormalization;
    d.epsilon = o_.epsilon;
    return d;
  }
  /// BatchNormalization with the moving statistics.
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const WeightRecord& mean = io.weight("moving_mean");
    const int64_t c = int64_t(mean.values.size());
    const std::string& name = io.name;
    auto it = io.weights.find("gamma");
    const std::vector<float> gamma = it != io.weights.end() ? it->second->values : std::vector<float>(size_t(c), 1.f);
    it = io.weights.find("beta");
    const std::vector<float> beta = it != io.weights.end() ? it->second->values : std::vector<float>(size_t(c), 0.f);
    g.node("BatchNormalization",
           {io.ins[0], g.constant(name + "/gamma", {c}, gamma), g.constant(name + "/beta", {c}, beta),
            g.constant(name + "/moving_mean", {c}, mean.values),
            g.constant(name + "/moving_variance", {c}, io.weight("moving_variance").values)},
           io.out, name)
        .real("epsilon", float(describe().epsilon));
  }

  /// One input [H, W, C]; same shape out. UserError otherwise.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1)
      throw UserError("BatchNormalization takes exactly 1 input, got " + std::to_string(inputs.size()));
    c_ = inputs[0].c;
    return inputs[0];
  }

  /// Seven fp32 per-channel vectors (the batch's mean and inverse deviation,
  /// the forward's and backward's coefficients) and the per-channel sums in
  /// double: a few kilobytes.
  LayerMemory gpu_training_memory(const LayerMemoryQuery&) const override {
    LayerMemory m;
    m.kept = size_t(c_) * (7 * sizeof(float) + 2 * sizeof(double));
    return m;
  }

  std::vector<ParamSpec> param_specs() const override {
    std::vector<ParamSpec> v;
    auto spec = [&](const char* name, const std::string& init, bool trainable) {
      v.push_back(ParamSpec{name, {c_}, init, double(c_), double(c_), trainable, Regularizer{}});
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
  /// The backend computes the per-channel sums (sum x, sum x^2), all-reduced
  /// here over the towers when synchronized, then the coefficients and y.
  /// The pixel count per channel is n*H*W, or ctx.global_batch*H*W when
  /// synchronized over ctx.comm.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Shape s = x[0]->shape();
    const int C = c_;
    const Device& d = ctx.device;
    BatchNormBackend& bn = op_.on(d);
    const float* in = x[0]->data();
    y.resize(s);
    for (Buffer<float>* v : {&mean_, &istd_, &a_, &b_}) on_device(*v, d).resize(size_t(C));
    batch_stats_ = ctx.training && !frozen();
    if (batch_stats_) {
      const bool sync = o_.synchronized && ctx.comm;
      on_device(sums_, d).resize(size_t(2) * C);
      bn.stat_sums(in, s, sums_.data());
      if (sync) ctx.comm->all_reduce_sum(ctx.rank, sums_.data(), sums_.size());
      count_ = double(sync ? ctx.global_batch : s.n) * s.h * s.w;
      if (count_ == 0) return;  // Every tower is empty: nothing to normalise or learn from.
      bn.train_coefficients(sums_.data(), count_, BatchNormSettings{o_.epsilon, o_.momentum}, channels());
    } else {
      bn.inference_coefficients(o_.epsilon, channels());
    }
    bn.apply(in, s, a_.data(), b_.data(), y.data());
  }

  /// Reads its inputs, not its output.
  BackwardReads backward_reads() const override { return {true, false}; }
  /// Batch statistics (Ioffe & Szegedy 2015, section 3), m = count, xhat = (x - mean) * istd:
  ///   dbeta = sum dy, dgamma = sum dy * xhat,
  ///   dx = gamma * istd * (dy - sum(dy) / m - xhat * sum(dy * xhat) / m),
  /// the sums in dx taken over all towers when synchronized (all-reduced here
  /// between the backend's reduction and its dx step). After an inference
  /// forward (or any forward of a frozen layer) the statistics are constants:
  /// dx = gamma * istd * dy, and a frozen layer needs no sums at all.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor&, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    const Shape s = x[0]->shape();
    const int C = c_;
    const Device& d = ctx.device;
    BatchNormBackend& bn = op_.on(d);
    const float* in = x[0]->data();
    on_device(sums_, d).resize(size_t(2) * C);
    if (batch_stats_ || dgamma_ || dbeta_) {
      bn.grad_sums(in, dy.data(), s, channels(), sums_.data());
      bn.param_grads(sums_.data(), C, dgamma_, dbeta_);
    }
    if (batch_stats_ && o_.synchronized && ctx.comm)
      ctx.comm->all_reduce_sum(ctx.rank, sums_.data(), sums_.size());
    if (!dx[0]) return;
    dx[0]->resize(s);
    if (s.numel() == 0) return;
    for (Buffer<float>* v : {&k1_, &k2_, &k3_}) on_device(*v, d).resize(size_t(C));
    bn.backward_coefficients(sums_.data(), count_, batch_stats_, channels());
    bn.backward_data(in, dy.data(), s, channels(), dx[0]->data());
  }

 private:
  /// The per-channel vectors for the backend (those not allocated yet are nullptr).
  BatchNormChannels channels() {
    BatchNormChannels v;
    v.C = c_;
    v.gamma = gamma_, v.beta = beta_;
    v.moving_mean = moving_mean_, v.moving_var = moving_var_;
    v.mean = mean_.data(), v.istd = istd_.data();
    v.a = a_.data(), v.b = b_.data();
    v.k1 = k1_.data(), v.k2 = k2_.data(), v.k3 = k3_.data();
    return v;
  }

  BNOptions o_;
  int c_ = 0;
  float *gamma_ = nullptr, *beta_ = nullptr, *dgamma_ = nullptr, *dbeta_ = nullptr;
  float *moving_mean_ = nullptr, *moving_var_ = nullptr;
  bool batch_stats_ = false;  ///< Whether the last forward used batch statistics.
  double count_ = 0;          ///< Pixels per channel behind those statistics (all towers).
  Buffer<float> mean_, istd_, a_, b_, k1_, k2_, k3_;  ///< Per channel [C], on the tower's device.
  Buffer<double> sums_;       ///< Per-channel sums [2C], on the tower's device.
  BatchNormOp op_;
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
