#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <spdlog/spdlog.h>

#include "backend/elementwise_ops.h"
#include "backend/train_ops.h"
#include "config/params.h"
#include "core/error.h"
#include "data/held_samples.h"
#include "train/batch_scaling.h"
#include "train/callback.h"
#include "train/callbacks.h"
#include "train/memory_plan.h"
#include "train/run_folder.h"

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

namespace {

/// With from_logits: fails at the layer whose activation makes the model's
/// output (the last layer, or before it the layers that only move, resize or
/// pass values: Dropout, a linear Activation, UpSampling2D, Cropping2D,
/// ZeroPadding2D, Reshape, the poolings) when that activation is not linear,
/// since the output would then not be logits (a sigmoid there would be applied
/// twice). The model must not have been switched to logits.
void check_logits_output(const Config& config, const Model& model) {
  int i = model.num_layers() - 1;
  for (;;) {
    const LayerDescription d = model.layer(i).describe();
    if (model.layer(i).passes_values() && model.layer_inputs(i).size() == 1 && model.layer_inputs(i)[0] > 0) {
      i = model.layer_inputs(i)[0];
      continue;
    }
    std::string act = d.softmax                       ? "softmax"
                      : d.kind == LayerKind::PReLU     ? "a PReLU"
                      : !d.activation.linear()         ? activation_name(d.activation)
                                                       : "";
    if (act.empty()) return;
    const auto& l = config.model.layers[size_t(i)];
    throw UserError(yaml_location(config.path, l.mark) + ": layer '" + l.name + "' (" + l.type + ") ends in " + act +
                    (i + 1 < model.num_layers() ? ", which makes the model's output," : "") + " but " +
                    config.training.loss.where + " has from_logits: true (the model outputs logits and the loss "
                    "applies the sigmoid or softmax); remove the activation, or set from_logits: false if the "
                    "output is already probabilities");
  }
}

/// How to say that the model outputs logits: from_logits in training.loss.
std::string from_logits_fix(const LossConfig& lc) {
  return "if the model outputs logits, add from_logits: true to training.loss (" + lc.where.substr(0, lc.where.rfind(": ")) +
         "), e.g. loss: {type: " + keras_loss_class(lc.kind) + ", from_logits: true}";
}

}  // namespace

void require_trainable_weights(const Config& config, const Model& model) {
  if (model.num_params() > 0) return;
  std::string frozen;
  for (const std::string& name : model.frozen_layers()) frozen += (frozen.empty() ? "'" : ", '") + name + "'";
  throw UserError(config.path + ": the model has no trainable weights, so training would change nothing" +
                  (frozen.empty() ? "; add a layer with weights (Conv2D)"
                                  : " (trainable: false on " + frozen +
                                        "); set trainable: true (or leave the key out) on the layers to train"));
}

namespace {

/// UserError at training.metrics for a metric the loss's kind cannot have: Keras's MeanIoU with binary masks
/// (`classes` 0), a binary metric with K classes.
void check_metrics_for_masks(const Config& config, int classes, const std::string& loss) {
  for (const std::string& m : config.training.metrics) {
    if (classes == 0 && m == "mean_io_u")
      throw UserError(config.training.metrics_where + ": 'MeanIoU' needs a categorical loss (a softmax over the "
                      "classes); on a sigmoid output Keras's MeanIoU(num_classes=2) casts the probabilities to "
                      "class ids, so nearly every pixel counts as background. Use BinaryIoU (Keras's "
                      "BinaryIoU(target_class_ids=[0, 1]): the mean IoU of background and foreground at 0.5) or "
                      "mean_iou (the foreground's IoU averaged over thresholds 0.5 to 0.95; docs/config.md)");
    if (classes > 0 && binary_only_metric(m))
      throw UserError(config.training.metrics_where + ": '" + m + "' is for binary masks, not the " +
                      std::to_string(classes) + " classes of loss '" + loss + "'; use accuracy, MeanIoU (Keras's; "
                      "mean_iou is the same) or dice (the mean over the classes)");
  }
}

}  // namespace

void validate_for_training(const Config& config, Model& model) {
  const auto& layers = config.model.layers;
  const std::string first = yaml_location(config.path, layers.front().mark) + ": layer '" + layers.front().name + "': ";
  const std::string last = yaml_location(config.path, layers.back().mark) + ": layer '" + layers.back().name + "': ";
  const Shape in = model.input_shape(), out = model.output_shape();
  if (in.c != 1 && in.c != 3)
    throw UserError(first + "input has " + std::to_string(in.c) +
                    " channels; images are read as gray (1) or RGB (3): use shape [H, W, 1] or [H, W, 3]");
  const LossConfig& lc = config.training.loss;
  const LossKind loss = lc.kind;
  if (lc.from_logits) check_logits_output(config, model);  // then nothing is stripped below
  const std::string sizes = "[" + std::to_string(in.h) + ", " + std::to_string(in.w);
  if (loss_classes(loss, out) == 0) {
    if (out.c != 1 || out.h != in.h || out.w != in.w)
      throw UserError(last + "the model outputs " + out.hwc() + " but masks are " + sizes + ", 1] (one channel at the "
                      "input size); end the model with Conv2D filters: 1 and keep the sizes (padding: same)" +
                      (out.c > 1 && out.h == in.h && out.w == in.w
                           ? " (or, for masks of " + std::to_string(out.c) + " classes, use loss: "
                             "sparse_categorical_crossentropy with activation: softmax" +
                                 std::string(loss == LossKind::Dice || loss == LossKind::BceDice
                                                 ? "; Keras 3's Dice (loss: Dice) is over the softmax channels"
                                                 : "") +
                                 ")"
                           : ""));
    const OutputActivation a = model.use_logits_output();
    if (!lc.from_logits && a != OutputActivation::Sigmoid)
      throw UserError(last + "loss '" + loss_name(lc.kind) +
                      "' needs the last layer to end in a sigmoid (the loss is fused with it for numerical "
                      "stability); " + (a == OutputActivation::Softmax ? "replace its softmax, which is 1 on a single "
                                                                         "channel, with a sigmoid"
                                                                       : "add activation: sigmoid, or, " +
                                                                             from_logits_fix(lc)));
  } else {
    if (out.c < 2 || out.c > kMaxClasses || out.h != in.h || out.w != in.w)
      throw UserError(last + "the model outputs " + out.hwc() + " but loss '" + loss_name(lc.kind) +
                      "' needs one channel per class at the input size, " + sizes + ", K] with 2 <= K <= " +
                      std::to_string(kMaxClasses) + "; end the model with Conv2D filters: <classes>, "
                      "activation: softmax and keep the sizes (padding: same)" +
                      (out.c == 1 ? " (for one foreground class use loss: binary_crossentropy with a sigmoid)" : ""));
    if (!lc.from_logits && model.use_logits_output() != OutputActivation::Softmax)
      throw UserError(last + "loss '" + loss_name(lc.kind) +
                      "' needs the last layer to end in a softmax over the classes (the loss is fused with it for "
                      "numerical stability); set activation: softmax, or, " + from_logits_fix(lc));

    if (is_overlap(loss) && lc.axis_leaves_channels)
      throw UserError(lc.where + ": axis [1, 2] leaves out the channels, which over the model's " +
                      std::to_string(out.c) + " softmax channels is, in Keras, one ratio per image and class (a "
                      "mean over the classes), not supported yet; use axis [1, 2, 3] (one ratio per image over "
                      "every class) or leave axis out (one ratio over the batch)");
    if (!lc.alphas.empty() && lc.alphas.size() != size_t(out.c))
      throw UserError(lc.where + ": alpha lists " + std::to_string(lc.alphas.size()) + " values for a model of " +
                      std::to_string(out.c) + " classes (its last layer's filters); give one per class");
  }
  check_metrics_for_masks(config, loss_classes(loss, out), loss_name(lc.kind));
  if (const std::vector<double>& cw = config.training.class_weight; !cw.empty()) {
    if (loss == LossKind::Dice || loss == LossKind::BceDice || is_overlap(loss))
      throw UserError(config.training.class_weight_where + ": weighs each pixel's cross-entropy, but loss '" +
                      loss_name(lc.kind) + "' is a ratio of sums over the pixels; use " +
                      (loss_classes(loss, out) > 0 ? "sparse_categorical_crossentropy or categorical_focal_crossentropy"
                                                    : "binary_crossentropy or binary_focal_crossentropy") +
                      ", or remove class_weight");
    const size_t classes = is_categorical(loss) ? size_t(out.c) : 2;
    if (cw.size() > classes) {
      const std::string extra = cw.size() - 1 == classes ? "class " + std::to_string(classes)
                                                         : "classes " + std::to_string(classes) + ".." +
                                                               std::to_string(cw.size() - 1);
      const int ignored = lc.ignore_class;
      throw UserError(config.training.class_weight_where + ": gives weights to " + extra + ", but " +
                      (is_categorical(loss) ? "the model has " + std::to_string(classes) + " classes (0.." +
                                                  std::to_string(classes - 1) + ")"
                                            : std::string("binary masks have classes 0 (background) and 1 "
                                                          "(foreground)")) +
                      "; remove them" +
                      (ignored >= int(classes) && size_t(ignored) < cw.size()
                           ? " (pixels of ignore_class " + std::to_string(ignored) + " are left out of the loss "
                             "already)"
                           : ""));
    }
  }
  const AugmentationConfig& aug = config.data.augmentation;
  if (aug.rotate_90 && in.h != in.w)
    throw UserError(aug.where + ": rotate_90 turns samples by 90 degrees, which needs a square input; the Input "
                    "shape is " + in.hwc() + ": make its height and width equal or set rotate_90: false");
}

Trainer::Tower::Tower(const Config& config, const Device& d)
    : device(d),
      model(config.model, config.path),
      params(d, model.num_params()),
      grads(d, model.num_params()),
      state(d, model.num_state()),
      clipping(config.training.optimizer, model.weights(), grads.data(), d) {
  validate_for_training(config, model);
  model.set_device(d);
  // bf16 towers keep bf16 activations between the layers that take them (as
  // PyTorch's autocast and Keras's mixed_bfloat16 do).
  model.set_activation_type(d.precision == Precision::BF16 ? DType::BF16 : DType::F32);
  // Two Winograd convolutions in a row on a CPU pass their activations in
  // oneDNN's blocked layout (no reorders between them).
  model.set_activation_layouts(d);
  y.set_device(d);
  staged.set_device(d);
  params.zero();
  grads.zero();
  state.zero();
  model.bind(params.data(), grads.data(), state.data());
  optimizer = make_optimizer(config.training.optimizer, params.size(), d);
  eval_form = cross_entropy_form(config.training.loss);
  if (const std::vector<double>& a = config.training.loss.alphas; !a.empty()) {  // one per class (validated)
    alphas.set_device(d);
    alphas.resize(a.size());
    alphas.copy_from_host(std::vector<float>(a.begin(), a.end()));
    eval_form.alphas = alphas.data();
  }
  train_form = eval_form;
  if (const std::vector<double>& cw = config.training.class_weight; !cw.empty()) {
    const std::vector<float> w =
        class_weight_table(cw, loss_classes(config.training.loss.kind, model.output_shape()));
    class_weights.set_device(d);
    class_weights.resize(w.size());
    class_weights.copy_from_host(w);
    train_form.class_weights = class_weights.data();
  }
}

namespace {

DevicePlan cpu_plan(int towers) {
  DevicePlan plan;
  plan.cpu_towers = towers;
  return plan;
}

}  // namespace

Trainer::Trainer(const Config& config, int towers, int threads_per_tower)
    : Trainer(config, cpu_plan(towers), threads_per_tower) {}

Trainer::Trainer(const Config& config, const DevicePlan& plan, int threads_per_tower, ProcessGroup* world)
    : config_(config),
      loss_(config.training.loss.kind),
      overlap_(overlap_form(config.training.loss)),
      devices_(std::make_unique<TowerDevices>(plan, config.training.precision, config.training.collective_timeout,
                                              world)),
      pool_(plan.towers(), threads_per_tower, [this](int rank, const std::string& msg) {
        const std::string reason = "tower " + std::to_string(rank) + " failed: " + msg;
        devices_->abort(reason);
      }) {
  // batch_size_per_device and learning_rate_scaling need the world's towers: the optimizers take the result.
  lr_scale_ = resolve_batch_scaling(config_.training, world_towers());
  for (int r = 0; r < devices_->size(); ++r) {
    devices_->bind_thread(r);
    towers_.push_back(std::make_unique<Tower>(config_, devices_->device(r)));
  }
  classes_ = loss_classes(loss_, model().output_shape());
  const std::vector<std::string>& metrics = config_.training.metrics;
  auc_ = std::find(metrics.begin(), metrics.end(), "auc") != metrics.end();
  for (const WeightSlot& w : model().weights())
    if (w.spec.trainable && w.spec.regularizer.any())
      regularized_.push_back({w.offset, w.spec.numel(), w.spec.regularizer});
  for (const RegularizedWeight& w : regularized_) {
    penalty_args_.weights.push_back(towers_[0]->params.data() + w.offset);
    penalty_args_.sizes.push_back(w.size);
  }
  penalty_args_.sums.resize(2 * regularized_.size());
  decide_cuda_graphs();
  std::vector<float> params(model().num_params()), state(model().num_state());
  model().initialize(config.training.seed, params.data(), state.data());
  devices_->bind_thread(0);
  towers_[0]->params.copy_from_host(params);
  towers_[0]->state.copy_from_host(state);
  run_towers([&](int r) {
    Tower& t = *towers_[size_t(r)];
    Communicator& comm = devices_->comm();
    comm.broadcast(r, t.params.data(), t.params.size(), 0);
    if (!t.state.empty()) comm.broadcast(r, t.state.data(), t.state.size(), 0);
    comm.synchronize(r);
  });
}

Trainer::~Trainer() = default;

void Trainer::decide_cuda_graphs() {
  if (!config_.training.cuda_graphs) return;
  const Device& d = towers_[0]->device;
  if (d.kind != DeviceKind::CUDA)
    why_no_graphs_ = "CPU towers queue no GPU work to record";
  else if (world_towers() > 1)
    why_no_graphs_ = "the run has " + std::to_string(world_towers()) +
                     " towers, whose gradient all-reduce overlaps backward; steps are recorded for runs of one "
                     "GPU tower only";
  else if (const std::string layer = model().unreplayable_layer(); !layer.empty())
    why_no_graphs_ = "layer " + layer + " draws new random values every step";
  cuda_graphs_ = why_no_graphs_.empty();
  if (!cuda_graphs_) spdlog::warn("training.cuda_graphs: off for this run: {}", why_no_graphs_);
}

void Trainer::set_learning_rate_warmup(int64_t steps) {
  for (auto& t : towers_) t->optimizer->set_warmup(steps, 1.0 / lr_scale_);
}

std::vector<std::pair<int, int>> Trainer::world_shards(int batch) const {
  const auto all = split_batch(batch, world_towers());
  const auto first = all.begin() + devices_->first_tower();
  return {first, first + towers()};
}

std::pair<int, int> Trainer::process_shard(int batch) const {
  const auto shards = world_shards(batch);
  return {shards.front().first, shards.back().second};
}

size_t Trainer::host_activation_bytes(int batch) const {
  const auto shards = world_shards(batch);
  size_t bytes = 0;
  for (int r = 0; r < towers(); ++r) {
    const int n = shards[size_t(r)].second - shards[size_t(r)].first;
    if (!devices_->device(r).is_cuda() && n > 0) bytes += towers_[size_t(r)]->model.planned_activation_bytes(n);
  }
  return bytes;
}

void Trainer::run_towers(const std::function<void(int)>& fn) {
  pool_.run([&](int r) {
    devices_->bind_thread(r);
    try {
      fn(r);
    } catch (const DeviceOutOfMemory& e) {
      Tower& t = *towers_[size_t(r)];
      const Shape in = t.model.input_buffer().shape();
      const TrainingConfig& tc = config_.training;
      const std::string batch =
          tc.batch_size_per_device
              ? "training.batch_size_per_device " + std::to_string(tc.batch_size_per_device) + " on each of " +
                    std::to_string(world_towers()) + " tower(s)); lower training.batch_size_per_device"
              : "training.batch_size " + std::to_string(tc.batch_size) + " over " + std::to_string(world_towers()) +
                    " tower(s)); lower training.batch_size (or --batch-size)";
      const std::string plan = memory_plan_hint(config_, in.n);
      throw DeviceOutOfMemory(std::string(e.what()) + ": tower " + std::to_string(r) +
                                  " needs more memory for its shard of " + std::to_string(in.n) + " image(s) of " +
                                  in.hwc() + " (" + batch + ", use a smaller input shape" +
                                  (tc.batch_size_per_device ? "" : ", or train on more GPUs") +
                                  (plan.empty() ? "" : ". " + plan),
                              e.requested_bytes, e.in_use_bytes);
    }
  });
}

void Trainer::reduce_stats(int rank, BatchStats& s) {
  std::vector<double>& v = towers_[size_t(rank)]->stats_host;
  v.resize(2 + s.counts.v.size());  // the same on every tower; allocates once
  v[0] = s.loss_sum;
  v[1] = s.samples;
  std::copy(s.counts.v.begin(), s.counts.v.end(), v.begin() + 2);
  devices_->host_comm().all_reduce_sum(rank, v.data(), v.size());
  s.loss_sum = v[0];
  s.samples = v[1];
  std::copy(v.begin() + 2, v.end(), s.counts.v.begin());
}

namespace {

/// Waits for the device's queued work (a GPU; CPU ops are synchronous), then reads the host clock. The
/// rank's collectives are polled first (Communicator::synchronize), so that a stuck one raises within the
/// communicator's timeout instead of blocking the wait on the streams.
std::chrono::steady_clock::time_point synced_now(const Device& d, Communicator& comm, int rank) {
  if (d.is_cuda()) {
    comm.synchronize(rank);
    d.ctx->synchronize();
  }
  return std::chrono::steady_clock::now();
}

}  // namespace

Trainer::PhaseClock::PhaseClock(std::array<double, kPhases>* seconds, const Device& device, Communicator& comm,
                                int rank)
    : seconds_(seconds), device_(device), comm_(comm), rank_(rank) {
  if (seconds_) last_ = synced_now(device_, comm_, rank_);  // earlier queued work is not this step's
}

void Trainer::PhaseClock::lap(Phase p) {
  if (!seconds_) return;
  const auto now = synced_now(device_, comm_, rank_);
  (*seconds_)[p] += std::chrono::duration<double>(now - last_).count();
  last_ = now;
}

double Trainer::regularization_penalty() const {
  devices_->bind_thread(0);
  return penalty();
}

double Trainer::penalty() const {
  if (regularized_.empty()) return 0.0;
  const PenaltyArgs& a = penalty_args_;
  abs_and_square_sums(towers_[0]->device, a.weights.data(), a.sizes.data(), regularized_.size(), a.sums.data());
  double total = 0;
  for (size_t j = 0; j < regularized_.size(); ++j)
    total += regularized_[j].r.l1 * a.sums[2 * j] + regularized_[j].r.l2 * a.sums[2 * j + 1];
  return total;
}

void Trainer::backward_and_update(int rank, const Context& ctx, Tensor& dlogits, int batch, bool overlap,
                                  PhaseClock& clock) {
  Tower& t = *towers_[size_t(rank)];
  Communicator& comm = devices_->comm();
  const size_t total = t.grads.size(), bucket = bucket_bytes_ / sizeof(float);
  std::vector<Tower::Bucket>& buckets = t.buckets;  // kept across steps: no allocation once warm
  buckets.clear();
  auto start = [&](size_t begin, size_t end) {
    buckets.push_back({begin, end, overlap ? comm.start_all_reduce_sum(rank, t.grads.data() + begin, end - begin) : -1});
  };
  size_t pending_end = total;  // [ready, pending_end) is final but not yet reducing
  if (cuda_graphs_) {  // one tower in the world: nothing to overlap, one bucket
    t.graphs.backward(t.model, ctx, dlogits, [&] {
      const Buffer<float> kept = t.state;  // the moving statistics as this step's forward left them
      t.model.forward(ctx, t.model.input_buffer());
      t.state.copy_from(kept);
    });
  } else {
    t.model.backward(ctx, dlogits, [&](size_t ready) {
      if (pending_end - ready < bucket) return;
      start(ready, pending_end);
      pending_end = ready;
    });
  }
  if (pending_end > 0) start(0, pending_end);
  if (!overlap)  // the same buckets, in the same order, now
    for (Tower::Bucket& b : buckets) b.ticket = comm.start_all_reduce_sum(rank, t.grads.data() + b.begin, b.end - b.begin);
  clock.lap(kBackward);
  const float scale = 1.f / float(batch);
  for (const Tower::Bucket& b : buckets) {
    comm.wait(rank, b.ticket);
    float* g = t.grads.data() + b.begin;
    scale_shift_forward(t.device, g, scale, 0.f, g, b.end - b.begin);
    for (const RegularizedWeight& w : regularized_) {  // the penalty's gradient, where w is in the bucket
      const size_t lo = std::max(w.offset, b.begin), hi = std::min(w.offset + w.size, b.end);
      if (lo < hi)
        regularizer_grad(t.device, t.params.data() + lo, t.grads.data() + lo, hi - lo, float(w.r.l1), float(w.r.l2));
    }
    t.clipping.clip_values(b.begin, b.end);
    if (!t.clipping.by_norm()) t.optimizer->update(t.params.data(), t.grads.data(), b.begin, b.end);
  }
  if (t.clipping.by_norm()) {  // the norms need every bucket
    t.clipping.clip_norms();
    t.optimizer->update(t.params.data(), t.grads.data(), 0, total);
  }
  t.optimizer->finish_step();
  comm.wait_all(rank);
  // Tower 0's moving statistics for all (each tower's BN saw its own shard); frozen weights never change.
  if (const size_t moving = t.model.num_moving_state()) comm.broadcast(rank, t.state.data(), moving, 0);
  clock.lap(kUpdate);
}

bool Trainer::ignores_pixels() const { return classes_ > 0 && config_.training.loss.ignore_class >= 0; }

ShardReduce Trainer::shard_reduce(int rank) {
  if (!pools_batch(loss_, overlap_)) return {};
  return [this, rank](double* sums, size_t n) { devices_->host_comm().all_reduce_sum(rank, sums, n); };
}

Tensor& Trainer::queue_loss_and_counts(int r, const Tensor& out, int batch, int samples) {
  Tower& t = *towers_[size_t(r)];
  // With an ignored class the loss is the mean over the global batch's counted pixels.
  std::optional<double> weight;
  if (ignores_pixels()) {
    double v = t.counted_pixels;
    devices_->host_comm().all_reduce_sum(r, &v, 1);
    weight = counted_pixel_weight(batch, v);
  }
  Tensor& dlogits = t.model.output_grad_buffer();
  const ShardReduce reduce = shard_reduce(r);
  if (samples > 0) {
    queue_loss(t.loss, loss_, out, t.y, &dlogits, weight, t.train_form, overlap_, reduce);
    queue_metrics(t.metrics, out, t.y, t.stats.counts);
    return dlogits;
  }
  if (reduce) join_pooled_loss(reduce);
  dlogits.resize(out.shape());
  t.grads.zero();  // no samples: contributes nothing
  return dlogits;
}

BatchStats Trainer::train_step(const Dataset& data, const std::vector<int>& indices) {
  const int batch = int(indices.size());
  const auto shards = world_shards(batch);
  const uint64_t step = uint64_t(iterations());
  // The first step of a global batch size (its shards' shapes, on every tower of every process alike) holds
  // the buckets until backward ends.
  const bool searched = std::find(searched_batches_.begin(), searched_batches_.end(), batch) != searched_batches_.end();
  if (!searched) searched_batches_.push_back(batch);
  const bool overlap = bucket_overlap_ && searched;
  run_towers([&](int r) {
    Tower& t = *towers_[size_t(r)];
    const auto [lo, hi] = shards[size_t(r)];
    PhaseClock clock(profiling_ && r == 0 ? &phase_seconds_ : nullptr, t.device, devices_->comm(), r);
    gather(t, data.images, &data.masks, indices, lo, hi,
           config_.data.augmentation.any() ? std::optional<uint64_t>(step) : std::nullopt);
    Communicator& comm = devices_->comm();
    clock.lap(kGather);
    // With graphs the world is this tower: synchronized BN's all-reduce would be the identity (left out, as a
    // recording leaves out collectives).
    Context ctx{true, cuda_graphs_ ? nullptr : &comm, r, config_.training.seed, step, lo, batch, t.device};
    const Tensor& out = cuda_graphs_ ? t.graphs.forward(t.model, ctx, searched && !profiling_)
                                     : t.model.forward(ctx, t.model.input_buffer());
    // The queued collectives (the last step's, this forward's), polled with the
    // timeout, before the host waits on the device: for the loss, at the step's
    // end, or at once for the losses and penalties read so (QueuedLoss).
    comm.synchronize(r);
    clock.lap(kForward);
    // The loss and the metric counts reach the host once backward is queued: the device runs on meanwhile.
    DeferredReadBacks late(t.device);
    t.stats = empty_stats();
    t.stats.samples = hi - lo;
    Tensor& dlogits = queue_loss_and_counts(r, out, batch, hi - lo);
    // At the weights of this forward, for every sample; once in the world (the stats are summed over it).
    const double penalty_sum = devices_->first_tower() + r == 0 ? penalty() * batch : 0.0;
    clock.lap(kLoss);
    backward_and_update(r, ctx, dlogits, batch, overlap, clock);
    late.finish();
    if (hi > lo) {
      t.stats.loss_sum = t.loss.value();
      add_metrics(t.metrics, t.stats.counts);
    }
    t.stats.loss_sum += penalty_sum;
    reduce_stats(r, t.stats);
    clock.lap(kStats);
  });
  if (profiling_) profiled_steps_++;
  return towers_[0]->stats;
}

BatchStats Trainer::evaluate(const Dataset& data, const std::vector<int>& indices, int batch_size) {
  const size_t batches = (indices.size() + size_t(batch_size) - 1) / size_t(batch_size);
  run_towers([&](int r) {
    Tower& t = *towers_[size_t(r)];
    devices_->comm().synchronize(r);
    t.graphs.drop();  // the model's calls below move the storage the graphs hold
    // With an ignored class, each batch's weight from its masks (never augmented here): every tower counts
    // its shards' pixels (the only samples this process may hold), summed over the world once.
    std::vector<std::optional<double>> weights(batches);
    if (ignores_pixels()) {
      const auto samples = [&](size_t b) {  // in global batch b
        return std::min(indices.size() - b * size_t(batch_size), size_t(batch_size));
      };
      std::vector<double> counted(batches, 0.0);  // integers: the sum is exact in any order
      std::vector<float> mask(data.masks.shape().sample_numel());
      for (size_t b = 0; b < batches; ++b) {
        const auto [lo, hi] = world_shards(int(samples(b)))[size_t(r)];
        for (int k = lo; k < hi; ++k) {
          mask_sample_to_float(data.masks, indices[b * size_t(batch_size) + size_t(k)], mask.data());
          counted[b] += double(counted_pixels(mask.data(), mask.size(), classes_));
        }
      }
      devices_->host_comm().all_reduce_sum(r, counted.data(), batches);
      for (size_t b = 0; b < batches; ++b) weights[b] = counted_pixel_weight(double(samples(b)), counted[b]);
    }
    t.stats = empty_stats();
    evaluate_batches(r, data, indices, batch_size, weights);
    if (devices_->first_tower() + r == 0) t.stats.loss_sum += penalty() * double(indices.size());
    reduce_stats(r, t.stats);
  });
  return towers_[0]->stats;
}

void Trainer::evaluate_batches(int r, const Dataset& data, const std::vector<int>& indices, int batch_size,
                               const std::vector<std::optional<double>>& weights) {
  Tower& t = *towers_[size_t(r)];
  const ShardReduce reduce = shard_reduce(r);  // a pooled loss: one ratio per global batch
  // The batches' losses and counts are read late, kLateBatches at a time: the device runs on meanwhile.
  DeferredReadBacks late(t.device);
  t.late_losses.resize(kLateBatches);
  t.late_metrics.resize(kLateBatches);
  size_t queued = 0;
  const auto deliver = [&] {
    finish_read_backs(t.device);
    for (size_t i = 0; i < queued; ++i) {
      t.stats.loss_sum += t.late_losses[i].value();
      add_metrics(t.late_metrics[i], t.stats.counts);
    }
    queued = 0;
  };
  for (size_t b = 0; b < indices.size(); b += size_t(batch_size)) {
    const int batch = int(std::min(indices.size() - b, size_t(batch_size)));
    const auto [lo, hi] = world_shards(batch)[size_t(r)];
    if (hi == lo) {
      if (reduce) join_pooled_loss(reduce);
      continue;
    }
    gather(t, data.images, &data.masks, indices, int(b) + lo, int(b) + hi);
    Context ctx{false, &devices_->comm(), r, config_.training.seed, uint64_t(iterations()), int(b) + lo, batch,
                t.device};
    const Tensor& out = t.model.forward(ctx, t.model.input_buffer());
    queue_loss(t.late_losses[queued], loss_, out, t.y, nullptr, weights[b / size_t(batch_size)], t.eval_form,
               overlap_, reduce);
    queue_metrics(t.late_metrics[queued], out, t.y, t.stats.counts);
    t.stats.samples += hi - lo;
    if (++queued == kLateBatches) deliver();
  }
  deliver();
  late.finish();
}

Tensor Trainer::predict(const Tensor& images, int batch_size) {
  const int n = images.shape().n;
  std::vector<int> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) all[size_t(i)] = i;
  const Shape out_shape = model().output_shape();
  Tensor probabilities(out_shape.with_batch(n));
  run_towers([&](int r) {
    Tower& t = *towers_[size_t(r)];
    devices_->comm().synchronize(r);
    t.graphs.drop();  // the model's calls below move the storage the graphs hold
    for (int b = 0; b < n; b += batch_size) {
      const int batch = std::min(n - b, batch_size);
      const auto [lo, hi] = world_shards(batch)[size_t(r)];
      if (hi == lo) continue;
      gather(t, images, nullptr, all, b + lo, b + hi);
      Context ctx{false, &devices_->comm(), r, config_.training.seed, uint64_t(iterations()), b + lo, batch,
                  t.device};
      t.y.copy_from(t.model.forward(ctx, t.model.input_buffer()));
      if (classes_ > 0)
        softmax_channels(t.device, t.y.data(), t.y.numel() / size_t(classes_), classes_);
      else
        activation_forward(t.device, Activation{ActivationKind::Sigmoid}, t.y.data(), t.y.numel());
      device_copy(probabilities.device(), probabilities.sample(b + lo), t.device, t.y.data(),
                  t.y.numel() * sizeof(float));
    }
  });
  return probabilities;
}

void Trainer::synchronize() {
  run_towers([&](int r) {
    devices_->comm().synchronize(r);
    const Device& d = towers_[size_t(r)]->device;
    if (d.is_cuda()) d.ctx->synchronize();
  });
}

std::vector<double> Trainer::take_input_wait_seconds() {
  std::vector<double> out(towers_.size());
  run_towers([&](int r) {
    Tower& t = *towers_[size_t(r)];
    out[size_t(r)] = t.device.is_cuda() ? t.device.ctx->take_input_wait_seconds() : t.input_wait;
    t.input_wait = 0;
  });
  return out;
}

std::vector<size_t> Trainer::peak_memory_bytes() const {
  std::vector<size_t> out;
  for (const auto& t : towers_) out.push_back(t->device.is_cuda() ? t->device.ctx->peak_bytes() : 0);
  return out;
}

void Trainer::set_profiling(bool on) {
  profiling_ = on;
  if (on) {
    phase_seconds_.fill(0);
    profiled_steps_ = 0;
  }
  for (auto& t : towers_) {
    t->model.set_profiling(on);
    if (on) t->model.reset_layer_times();
  }
}

std::string Trainer::profile_report() const {
  static const char* const kPhaseNames[kPhases] = {
      "gather/upload", "forward", "loss+metrics", "backward (+bucket starts)", "bucket waits+optimizer",
      "stats reduction"};
  const Tower& t0 = *towers_[0];
  const double steps = double(std::max(1L, profiled_steps_));
  double step_s = 0;
  for (double s : phase_seconds_) step_s += s;
  const double step_ms = 1e3 * step_s / steps;
  auto pct = [&](double ms) { return step_ms > 0 ? 100 * ms / step_ms : 0.0; };
  std::vector<LayerTime> layers = t0.model.layer_times();
  std::stable_sort(layers.begin(), layers.end(), [](const LayerTime& a, const LayerTime& b) {
    return a.forward_s + a.backward_s > b.forward_s + b.backward_s;
  });
  size_t wn = 5, wt = 4;
  for (const LayerTime& l : layers) wn = std::max(wn, l.name.size()), wt = std::max(wt, l.type.size());
  std::string out = "step profile of tower 0 (" + t0.device.str() + "), " + std::to_string(profiled_steps_) +
                    " step(s); the device is synchronized after every layer and phase, so a profiled step is "
                    "slower than an unprofiled one\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-28s %12s %8s\n", "phase", "ms/step", "% step");
  out += line;
  for (int p = 0; p < kPhases; ++p) {
    const double ms = 1e3 * phase_seconds_[size_t(p)] / steps;
    std::snprintf(line, sizeof line, "%-28s %12.3f %7.1f%%\n", kPhaseNames[p], ms, pct(ms));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-28s %12.3f %7.1f%%\n", "step", step_ms, pct(step_ms));
  out += line;
  std::snprintf(line, sizeof line, "\n%-*s %-*s %6s %12s %12s %8s\n", int(wn), "layer", int(wt), "type", "output",
                "fwd ms/step", "bwd ms/step", "% step");
  out += line;
  for (const LayerTime& l : layers) {
    const double fwd = 1e3 * l.forward_s / steps, bwd = 1e3 * l.backward_s / steps;
    std::snprintf(line, sizeof line, "%-*s %-*s %6s %12.3f %12.3f %7.1f%%\n", int(wn), l.name.c_str(), int(wt),
                  l.type.c_str(), dtype_name(l.output), fwd, bwd, pct(fwd + bwd));
    out += line;
  }
  return out;
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
  std::vector<float> params(t0.model.num_params()), state(t0.model.num_state());
  for (size_t i = 0; i < slots.size(); ++i) {
    const WeightSlot& w = slots[i];
    const WeightRecord& rec = weights[i];
    const std::string name = t0.model.layer(w.layer).name() + "/" + w.spec.name;
    if (rec.layer + "/" + rec.name != name) fail("weight " + std::to_string(i) + " is '" + rec.layer + "/" +
                                                 rec.name + "', the model expects '" + name + "'");
    if (rec.shape != w.spec.shape || rec.values.size() != w.spec.numel())
      fail("'" + name + "' is " + shape_text(rec.shape) + " there, " + shape_text(w.spec.shape) + " in the model");
    std::copy(rec.values.begin(), rec.values.end(),
              (w.spec.trainable ? params.data() : state.data()) + w.offset);
  }
  set_weights(params, state);
}

void Trainer::save_optimizer(Checkpoint& ckpt) {
  Optimizer& opt = *towers_[0]->optimizer;
  ckpt.state_scalars["optimizer_iterations"] = double(opt.iterations());
  for (const auto& [name, values] : opt.state()) ckpt.state_arrays["optimizer_" + name] = values->to_host();
}

void Trainer::load_optimizer(const Checkpoint& ckpt, const std::string& source) {
  auto it = ckpt.state_scalars.find("optimizer_iterations");
  if (it == ckpt.state_scalars.end())
    throw UserError(source + " holds no optimizer state (a weights-only file)");  // the CLI says more before
  if (!(it->second >= 0 && it->second <= 1e15) || it->second != std::floor(it->second))
    throw UserError(source + ": training state 'optimizer_iterations' is " + std::to_string(it->second) +
                    ", which no run writes" + kDamagedState);
  for (auto& t : towers_) {
    t->optimizer->set_iterations(int64_t(it->second));
    for (const auto& [name, values] : t->optimizer->state()) {
      auto slot = ckpt.state_arrays.find("optimizer_" + name);
      // Files of older builds name the slot optimizer_v_hat.
      if (slot == ckpt.state_arrays.end() && name == "vhat") slot = ckpt.state_arrays.find("optimizer_v_hat");
      if (slot == ckpt.state_arrays.end() || slot->second.size() != values->size())
        throw UserError(source + ": optimizer state '" + name + "' is missing or of another size; the "
                        "checkpoint was written with another optimizer (" + optimizer_name(config_.training.optimizer.type) +
                        " is configured)");
      values->copy_from_host(slot->second);
    }
  }
}

std::vector<WeightRecord> Trainer::weights() const {
  const Tower& t = *towers_[0];
  const std::vector<float> params = t.params.to_host(), state = t.state.to_host();
  std::vector<WeightRecord> out;
  for (const WeightSlot& w : t.model.weights()) {
    const float* src = (w.spec.trainable ? params.data() : state.data()) + w.offset;
    out.push_back(WeightRecord{t.model.layer(w.layer).name(), w.spec.name, w.spec.shape,
                               std::vector<float>(src, src + w.spec.numel())});
  }
  return out;
}

void Trainer::set_weights(const std::vector<float>& params, const std::vector<float>& state) {
  if (params.size() != model().num_params() || state.size() != model().num_state())
    throw InternalError("set_weights: " + std::to_string(params.size()) + " params and " +
                        std::to_string(state.size()) + " state values for a model of " +
                        std::to_string(model().num_params()) + " and " + std::to_string(model().num_state()));
  for (auto& t : towers_) {
    t->params.copy_from_host(params);
    t->state.copy_from_host(state);
  }
}

}  // namespace trainer
