#include "train/trainer.h"

#include <cstring>

#include "config/params.h"
#include "core/error.h"
#include "core/math.h"
#include "train/callbacks.h"

namespace trainer {

std::vector<std::pair<int, int>> split_batch(int batch, int towers) {
  std::vector<std::pair<int, int>> out;
  int start = 0;
  for (int r = 0; r < towers; ++r) {
    int n = batch / towers + (r < batch % towers ? 1 : 0);
    out.emplace_back(start, start + n);
    start += n;
  }
  return out;
}

void validate_for_training(const Config& config, Model& model) {
  const auto& layers = config.model.layers;
  const std::string first = yaml_location(config.path, layers.front().mark) + ": layer '" + layers.front().name + "': ";
  const std::string last = yaml_location(config.path, layers.back().mark) + ": layer '" + layers.back().name + "': ";
  const Shape in = model.input_shape(), out = model.output_shape();
  if (in.c != 1 && in.c != 3)
    throw UserError(first + "input has " + std::to_string(in.c) +
                    " channels; images are read as gray (1) or RGB (3): use shape [H, W, 1] or [H, W, 3]");
  if (out.c != 1 || out.h != in.h || out.w != in.w)
    throw UserError(last + "the model outputs " + out.hwc() + " but masks are [" + std::to_string(in.h) + ", " +
                    std::to_string(in.w) + ", 1] (one channel at the input size); end the model with "
                    "Conv2D filters: 1 and keep the sizes (padding: same)");
  if (!model.use_logits_output())
    throw UserError(last + "loss '" + config.training.loss +
                    "' needs the last layer to end in a sigmoid (the loss is fused with it for "
                    "numerical stability); add activation: sigmoid");
  const ModelCheckpointConfig& mc = config.training.model_checkpoint;
  if (mc.enabled) {
    std::map<std::string, double> logs{{"loss", 0.0}, {"val_loss", 0.0}};
    for (const auto& m : config.training.metrics) logs[m] = logs["val_" + m] = 0.0;
    format_filepath(mc.filepath, 1, logs);  // throws UserError for an unknown placeholder
  }
}

Trainer::Tower::Tower(const Config& config) : model(config.model, config.path) {
  validate_for_training(config, model);
  params.assign(model.num_params(), 0.f);
  grads.assign(model.num_params(), 0.f);
  state.assign(model.num_state(), 0.f);
  model.bind(params.data(), grads.data(), state.data());
  optimizer = make_optimizer(config.training.optimizer, params.size());
}

Trainer::Trainer(const Config& config, int towers, int threads_per_tower)
    : config_(config),
      loss_(loss_kind(config.training.loss)),
      comm_(towers),
      pool_(towers, threads_per_tower, [this](int rank, const std::string& msg) {
        comm_.abort("tower " + std::to_string(rank) + " failed: " + msg);
      }) {
  for (int r = 0; r < towers; ++r) towers_.push_back(std::make_unique<Tower>(config));
  towers_[0]->model.initialize(config.training.seed, towers_[0]->params.data(), towers_[0]->state.data());
  pool_.run([&](int r) {
    Tower& t = *towers_[size_t(r)];
    comm_.broadcast(r, t.params.data(), t.params.size(), 0);
    comm_.broadcast(r, t.state.data(), t.state.size(), 0);
  });
}

void Trainer::gather(Tower& t, const Tensor& images, const Tensor* masks, const std::vector<int>& indices,
                     int lo, int hi) {
  const Shape in = t.model.input_shape();
  if (!images.shape().same_sample(in))
    throw InternalError("images " + images.shape().hwc() + " do not match the model input " + in.hwc());
  Tensor& x = t.model.input_buffer();
  x.resize(in.with_batch(hi - lo));
  for (int k = lo; k < hi; ++k)
    std::memcpy(x.sample(k - lo), images.sample(indices[size_t(k)]), in.sample_numel() * sizeof(float));
  if (!masks) return;
  t.y.resize(masks->shape().with_batch(hi - lo));
  for (int k = lo; k < hi; ++k)
    std::memcpy(t.y.sample(k - lo), masks->sample(indices[size_t(k)]),
                masks->shape().sample_numel() * sizeof(float));
}

void Trainer::reduce_stats(int rank, BatchStats& s) {
  std::vector<double>& v = towers_[size_t(rank)]->reduce_buffer;
  v.resize(2 + MetricCounts::kSize);
  v[0] = s.loss_sum;
  v[1] = s.samples;
  std::copy(s.counts.v.begin(), s.counts.v.end(), v.begin() + 2);
  comm_.all_reduce_sum(rank, v.data(), v.size());
  s.loss_sum = v[0];
  s.samples = v[1];
  std::copy(v.begin() + 2, v.end(), s.counts.v.begin());
}

BatchStats Trainer::train_step(const Dataset& data, const std::vector<int>& indices) {
  const int batch = int(indices.size());
  const auto shards = split_batch(batch, towers());
  const uint64_t step = uint64_t(iterations());
  pool_.run([&](int r) {
    Tower& t = *towers_[size_t(r)];
    const auto [lo, hi] = shards[size_t(r)];
    gather(t, data.images, &data.masks, indices, lo, hi);
    Context ctx{true, &comm_, r, config_.training.seed, step, lo};
    const Tensor& out = t.model.forward(ctx, t.model.input_buffer());
    Tensor& dlogits = t.model.output_grad_buffer();
    t.stats = BatchStats{};
    t.stats.samples = hi - lo;
    if (hi > lo) {
      t.stats.loss_sum = loss_sum(loss_, out, t.y, &dlogits);
      accumulate_metrics(out, t.y, t.stats.counts);
    } else {
      dlogits.resize(out.shape());
      std::fill(t.grads.begin(), t.grads.end(), 0.f);  // no samples: contributes nothing
    }
    t.model.backward(ctx, dlogits);
    comm_.all_reduce_sum(r, t.grads.data(), t.grads.size());
    const float scale = 1.f / float(batch);
    float* g = t.grads.data();
    const long long n = (long long)t.grads.size();
#pragma omp parallel for simd schedule(static)
    for (long long i = 0; i < n; ++i) g[i] *= scale;
    t.optimizer->step(t.params.data(), t.grads.data());
    if (!t.state.empty()) comm_.broadcast(r, t.state.data(), t.state.size(), 0);
    reduce_stats(r, t.stats);
  });
  return towers_[0]->stats;
}

BatchStats Trainer::evaluate(const Dataset& data, const std::vector<int>& indices, int batch_size) {
  pool_.run([&](int r) {
    Tower& t = *towers_[size_t(r)];
    t.stats = BatchStats{};
    for (size_t b = 0; b < indices.size(); b += size_t(batch_size)) {
      const int batch = int(std::min(indices.size() - b, size_t(batch_size)));
      const auto [lo, hi] = split_batch(batch, towers())[size_t(r)];
      if (hi == lo) continue;
      gather(t, data.images, &data.masks, indices, int(b) + lo, int(b) + hi);
      Context ctx{false, &comm_, r, config_.training.seed, uint64_t(iterations()), int(b) + lo};
      const Tensor& out = t.model.forward(ctx, t.model.input_buffer());
      t.stats.loss_sum += loss_sum(loss_, out, t.y, nullptr);
      t.stats.samples += hi - lo;
      accumulate_metrics(out, t.y, t.stats.counts);
    }
    reduce_stats(r, t.stats);
  });
  return towers_[0]->stats;
}

Tensor Trainer::predict(const Tensor& images, int batch_size) {
  const int n = images.shape().n;
  std::vector<int> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) all[size_t(i)] = i;
  const Shape out_shape = model().output_shape();
  Tensor probabilities(out_shape.with_batch(n));
  pool_.run([&](int r) {
    Tower& t = *towers_[size_t(r)];
    for (int b = 0; b < n; b += batch_size) {
      const auto [lo, hi] = split_batch(std::min(n - b, batch_size), towers())[size_t(r)];
      if (hi == lo) continue;
      gather(t, images, nullptr, all, b + lo, b + hi);
      Context ctx{false, &comm_, r, config_.training.seed, uint64_t(iterations()), b + lo};
      const Tensor& logits = t.model.forward(ctx, t.model.input_buffer());
      float* dst = probabilities.sample(b + lo);
      for (size_t i = 0; i < logits.numel(); ++i) dst[i] = stable_sigmoid(logits.data()[i]);
    }
  });
  return probabilities;
}

void Trainer::load_weights(const std::vector<WeightRecord>& weights, const std::string& source) {
  const Tower& t0 = *towers_[0];
  const std::vector<WeightSlot>& slots = t0.model.weights();
  auto fail = [&](const std::string& what) {
    throw UserError(source + ": " + what + "; the checkpoint was written for another model (compare its "
                    "config with " + config_.path + ")");
  };
  if (weights.size() != slots.size())
    fail("it holds " + std::to_string(weights.size()) + " weights, the model has " + std::to_string(slots.size()));
  std::vector<float> params(t0.params.size()), state(t0.state.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const WeightSlot& w = slots[i];
    const WeightRecord& rec = weights[i];
    const std::string name = t0.model.layer(w.layer).name() + "/" + w.spec.name;
    if (rec.layer + "/" + rec.name != name) fail("weight " + std::to_string(i) + " is '" + rec.layer + "/" +
                                                 rec.name + "', the model expects '" + name + "'");
    if (rec.shape != w.spec.shape || rec.values.size() != w.spec.numel())
      fail("'" + name + "' has another shape than the model's");
    std::copy(rec.values.begin(), rec.values.end(),
              (w.spec.trainable ? params.data() : state.data()) + w.offset);
  }
  set_weights(params, state);
}

void Trainer::save_optimizer(Checkpoint& ckpt) {
  Optimizer& opt = *towers_[0]->optimizer;
  ckpt.state_scalars["optimizer_iterations"] = double(opt.iterations());
  for (const auto& [name, values] : opt.state()) ckpt.state_arrays["optimizer_" + name] = *values;
}

void Trainer::load_optimizer(const Checkpoint& ckpt, const std::string& source) {
  auto it = ckpt.state_scalars.find("optimizer_iterations");
  if (it == ckpt.state_scalars.end())
    throw UserError(source + " holds no optimizer state (a weights-only file); resume from a checkpoint "
                             "written by trainer during training, such as last.h5");
  for (auto& t : towers_) {
    t->optimizer->set_iterations(int64_t(it->second));
    for (const auto& [name, values] : t->optimizer->state()) {
      auto slot = ckpt.state_arrays.find("optimizer_" + name);
      if (slot == ckpt.state_arrays.end() || slot->second.size() != values->size())
        throw UserError(source + ": optimizer state '" + name + "' is missing or of another size; the "
                        "checkpoint was written with another optimizer (" + config_.training.optimizer.type +
                        " is configured)");
      *values = slot->second;
    }
  }
}

std::vector<WeightRecord> Trainer::weights() const {
  const Tower& t = *towers_[0];
  std::vector<WeightRecord> out;
  for (const WeightSlot& w : t.model.weights()) {
    const float* src = (w.spec.trainable ? t.params.data() : t.state.data()) + w.offset;
    out.push_back(WeightRecord{t.model.layer(w.layer).name(), w.spec.name, w.spec.shape,
                               std::vector<float>(src, src + w.spec.numel())});
  }
  return out;
}

void Trainer::set_weights(const std::vector<float>& params, const std::vector<float>& state) {
  for (auto& t : towers_) {
    std::copy(params.begin(), params.end(), t->params.begin());
    std::copy(state.begin(), state.end(), t->state.begin());
  }
}

}  // namespace trainer
