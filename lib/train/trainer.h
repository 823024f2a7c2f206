#pragma once
// Trainer: data-parallel training over towers (replicas), one per device.
//
// Every tower holds the whole model with its own parameters, gradients (one
// contiguous buffer), optimizer state and activations, all on the tower's
// device (a CPU tower, or a GPU from --gpus; see train/tower_devices.h for
// the communicators). Weights are initialised from training.seed and
// broadcast from tower 0. A step splits the global batch into near-equal
// contiguous shards (the first batch % towers towers get one sample more; a
// tower may get none), runs forward and backward on all towers in parallel,
// sums the gradients with the Communicator, scales them by 1 / (global sample
// count) and applies the same optimizer step on every tower. The update
// therefore equals single-device training on the whole batch (up to float
// summation order), for uneven splits and short batches too. BN moving
// statistics are broadcast from tower 0 after each step (as PyTorch DDP does
// with buffers).
//
// Gradient buckets (as PyTorch DDP and llm.c): backward reports, layer by
// layer from the output, which tail of the gradient buffer is final; each
// time at least kBucketBytes are final, their all-reduce starts (on a GPU
// tower: on the communication stream, overlapping the rest of backward), and
// the optimizer updates each bucket once its reduction is done (with the
// optimizer's clipnorm or global_clipnorm, every bucket once all are done:
// train/gradient_clipping.h). The buckets depend only on the model, so every
// tower forms the same ones. The first step of each global batch size starts
// its buckets after backward instead, on every tower: that backward runs
// cuDNN's timed algorithm search, which buckets spinning on the same GPU
// (NCCL kernels waiting for slower towers) would skew towards algorithms
// that need fewer SMs, a choice then kept for the run; and NCCL sets up its
// connections for new sizes there, which must not run beside the other
// communicator's collectives (dist/nccl_communicator.h). The decision depends
// on the global batch alone, so every rank issues its collectives of both
// kinds in the same order.
//
// Feeding GPU towers: each tower's thread gathers its shard into a pinned
// host buffer and queues the upload on the copy stream; the step's compute
// waits only for that copy (see DeviceContext), and the time it waited is
// reported per tower (take_input_wait_seconds).
#include <array>
#include <chrono>
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "dist/device_plan.h"
#include "io/checkpoint.h"
#include "nn/model.h"
#include "train/loss.h"
#include "train/gradient_clipping.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/step_graphs.h"
#include "train/tower_devices.h"
#include "train/tower_pool.h"

namespace trainer {

/// Loss and metric sums of a step or of an evaluation, reduced over towers.
struct BatchStats {
  /// Zero sums, with metric counts for `classes` classes (0: binary), with
  /// the AUC's histogram when `auc` (MetricCounts).
  explicit BatchStats(int classes = 0, bool auc = false) : counts(classes, auc) {}
  double loss_sum = 0;     ///< Sum over samples of the per-sample loss.
  double samples = 0;      ///< Number of samples.
  MetricCounts counts;     ///< Pixel counts for the metrics.
  void add(const BatchStats& o) {
    loss_sum += o.loss_sum;
    samples += o.samples;
    counts.add(o.counts);
  }
  double loss() const { return samples > 0 ? loss_sum / samples : 0.0; }
};

/// Checks that model can be trained with config before any data is read, and
/// switches its output to logits (the loss is fused with the final sigmoid).
/// Throws UserError naming the config place and the fix when the input is not
/// 1 or 3 channels, the output is not [H, W, 1] at the input's size, the last
/// layer does not end in a sigmoid, or data.augmentation asks for quarter
/// turns of a non-square input.
void validate_for_training(const Config& config, Model& model);

/// Throws UserError naming config's file and its frozen layers when model
/// has no trainable weight (every layer with weights has trainable: false, or
/// none has weights): a training run would change nothing. Keras runs such a
/// model (its TensorFlow backend warns); the train command refuses it before
/// any data is read, while summary, evaluate, predict and export take it.
void require_trainable_weights(const Config& config, const Model& model);

/// [start, end) of each tower's shard of a batch of `batch` samples over `towers` towers.
std::vector<std::pair<int, int>> split_batch(int batch, int towers);

class Trainer {
 public:
  /// Bytes of gradients per all-reduce bucket (PyTorch DDP's default bucket_cap_mb = 25).
  static constexpr size_t kBucketBytes = size_t(25) << 20;

  /// Builds one replica of config.model per tower of plan (UserError for a
  /// bad model; InternalError when a GPU cannot be initialised), GPU towers
  /// computing convolutions in config.training.precision, initialises tower
  /// 0's weights from training.seed and broadcasts them to the others.
  /// threads_per_tower: OpenMP threads each CPU tower's ops use. The Trainer
  /// keeps its own copy of config.
  /// world: the run's processes when several train together (an MPI launch;
  /// nullptr: this process alone), outliving the Trainer. Its towers are then
  /// this process's part of the world's (TowerDevices), batches are split over
  /// all of them and tower 0's weights are world tower 0's.
  Trainer(const Config& config, const DevicePlan& plan, int threads_per_tower, ProcessGroup* world = nullptr);
  /// `towers` CPU towers.
  Trainer(const Config& config, int towers, int threads_per_tower);
  ~Trainer();

  /// This process's towers, and the towers of every process of the run
  /// (the same alone); a global batch is split over the latter.
  int towers() const { return int(towers_.size()); }
  int world_towers() const { return devices_->world_size(); }
  /// [start, end): the positions of a global batch of `batch` samples that
  /// this process's towers take (the shards of its towers, which are
  /// consecutive in the world; the whole batch alone).
  std::pair<int, int> process_shard(int batch) const;
  /// The classes the masks hold: the output's channels K for a categorical
  /// loss, 0 for binary masks (loss_classes).
  int classes() const { return classes_; }
  /// Zero stats with counts for classes() classes, and for the AUC when training.metrics lists it.
  BatchStats empty_stats() const { return BatchStats(classes_, auc_); }
  /// Whether the loss ignores a class's pixels (a categorical loss with
  /// ignore_class): its batch loss is then the mean over the counted pixels.
  bool ignores_pixels() const;
  /// The config the trainer was built from.
  const Config& config() const { return config_; }
  const Model& model() const { return towers_[0]->model; }
  int64_t iterations() const { return towers_[0]->optimizer->iterations(); }
  /// The optimizers' learning rate before decay (the same on every tower).
  double learning_rate() const { return towers_[0]->optimizer->learning_rate(); }
  /// The rate of the update at step t (a learning_rate schedule's, or with decay).
  double learning_rate_at(int64_t t) const { return towers_[0]->optimizer->learning_rate_at(t); }
  /// Sets it on every tower's optimizer, between steps (ReduceLROnPlateau).
  void set_learning_rate(double lr) {
    for (auto& t : towers_) t->optimizer->set_learning_rate(lr);
  }
  /// The factor training.learning_rate_scaling applied to the learning rate
  /// (train/batch_scaling.h; 1 without it). config() holds the resolved
  /// batch_size and learning_rate.
  double learning_rate_scale() const { return lr_scale_; }
  /// Goyal et al.'s warm-up over the optimizer's first `steps` steps, from the
  /// unscaled rate to the scaled one (nothing when the scale is 1 or steps 0).
  void set_learning_rate_warmup(int64_t steps);

  /// One synchronous training step on the global batch data[indices]
  /// (images [B, H, W, C], masks [B, H, W, 1]); B >= 1. A GPU tower whose
  /// shard does not fit in its memory raises DeviceOutOfMemory (a UserError)
  /// saying what was needed and what to lower; a failed or timed-out NCCL
  /// collective, or a failed CUDA call, raises InternalError naming the tower
  /// and the GPU. On GPU towers the host waits once per step for the forward
  /// pass and the loss (to read the loss and metric sums), after it has
  /// queued backward and the update (before, for the losses QueuedLoss reads
  /// at once); the rest of the step stays queued when it returns. Only the
  /// positions of this process's towers
  /// (process_shard) are read: the others' indices may be -1.
  BatchStats train_step(const Dataset& data, const std::vector<int>& indices);
  /// Inference-mode loss and metrics over data[indices], batch_size samples
  /// per global batch split over the towers; as in train_step, only this
  /// process's positions of each global batch are read. A GPU tower reads
  /// the batches' losses and counts kLateBatches batches at a time.
  BatchStats evaluate(const Dataset& data, const std::vector<int>& indices, int batch_size);
  /// Batches evaluate reads the losses and counts of at once (bounds the host memory they take).
  static constexpr size_t kLateBatches = 64;

  /// The weight regularizers' penalty at the current weights: the sum over
  /// regularized weights of l1 * sum |w| + l2 * sum w^2 (nn/regularizer.h),
  /// 0 without regularizers. train_step and evaluate add it to every sample's
  /// loss, as Keras adds model.losses to the loss and val_loss (once, on
  /// tower 0, before the towers' sums are reduced). Binds the calling thread
  /// to tower 0's device.
  double regularization_penalty() const;
  /// The number of trainable weights with a regularizer.
  size_t regularized_weights() const { return regularized_.size(); }

  /// Probabilities sigmoid(output) [N, H, W, 1], or a categorical model's
  /// softmax(output) [N, H, W, K] (a host tensor), for images
  /// [N, H, W, C] (float 0..255, as a Dataset holds them), batch_size images
  /// per global batch split over the towers, in inference mode.
  Tensor predict(const Tensor& images, int batch_size);
  /// Copies weights (as weights() returns them, e.g. from a checkpoint) into
  /// every tower. Throws UserError naming source when a weight is missing,
  /// extra, renamed or of another shape (a checkpoint of another model).
  void load_weights(const std::vector<WeightRecord>& weights, const std::string& source);

  /// Adds the optimizer's iterations (scalar "optimizer_iterations") and slots
  /// (arrays "optimizer_<slot>", e.g. optimizer_m) of tower 0 to ckpt.
  void save_optimizer(Checkpoint& ckpt);
  /// Restores them on every tower. Throws UserError naming source when a slot
  /// is missing or of another size (a checkpoint of another optimizer or model).
  void load_optimizer(const Checkpoint& ckpt, const std::string& source);

  /// Host copy of a tower's trainable parameters (model().num_params() floats).
  std::vector<float> params(int tower) const { return towers_[size_t(tower)]->params.to_host(); }
  /// Host copy of a tower's non-trainable state (BN moving statistics; model().num_state() floats).
  std::vector<float> state(int tower) const { return towers_[size_t(tower)]->state.to_host(); }
  /// Every weight of tower 0 in Keras layout, in model order (for checkpoints).
  std::vector<WeightRecord> weights() const;
  /// Copies host params (model().num_params() floats) and state
  /// (model().num_state()) into every tower (e.g. EarlyStopping's
  /// restore_best_weights). InternalError for other sizes.
  void set_weights(const std::vector<float>& params, const std::vector<float>& state);

  /// The towers' devices and communicators.
  const TowerDevices& devices() const { return *devices_; }
  /// Returns once every tower's queued device work (kernels, copies and
  /// collectives of the steps so far) has completed: train_step may return
  /// with its update still running on a GPU. Nothing to wait for on CPU
  /// towers. Throws InternalError on a device error or a collective that
  /// outlives the communicator's timeout (Communicator::synchronize).
  void synchronize();
  /// Per tower, the seconds it waited for input data since the last call: on
  /// a GPU the time its compute stream stalled for the upload, on the CPU the
  /// time spent copying the shard into the tower's input.
  std::vector<double> take_input_wait_seconds();
  /// Sets the gradient bucket size (bytes, at least one float; kBucketBytes by
  /// default). The result of a step does not depend on it, only how early
  /// reductions start (tests use tiny buckets to exercise many).
  void set_bucket_bytes(size_t bytes) { bucket_bytes_ = std::max(bytes, sizeof(float)); }
  /// false: every step starts its buckets' all-reduces only after backward
  /// (no overlap; bench/scaling.sh compares it with the default, true). The
  /// result of a step does not depend on it.
  void set_bucket_overlap(bool overlap) { bucket_overlap_ = overlap; }
  /// Whether training steps are recorded and replayed as CUDA graphs
  /// (training.cuda_graphs, where the run allows it: why_no_cuda_graphs()).
  bool cuda_graphs() const { return cuda_graphs_; }
  /// With training.cuda_graphs, why this run trains without them; else empty.
  const std::string& why_no_cuda_graphs() const { return why_no_graphs_; }
  /// Training steps whose forward and backward tower 0 replayed from CUDA graphs so far.
  int64_t replayed_steps() const { return towers_[0]->graphs.replayed_steps(); }
  /// Per tower, the peak device memory held (bytes); 0 for CPU towers.
  std::vector<size_t> peak_memory_bytes() const;
  /// Bytes the layer outputs and their gradients of this process's CPU
  /// towers take at a training step's peak for their shards of a global
  /// batch of `batch` samples (Model::planned_activation_bytes, in the
  /// towers' storage types). A lower bound of a step's host memory beyond
  /// the weights (the layers' scratch comes on top); GPU towers add nothing
  /// (their activations are on the device).
  size_t host_activation_bytes(int batch) const;

  /// Step profile (off by default). Turning it on starts a new profile: every
  /// tower's model times its layers (Model::set_profiling) and train_step
  /// times the phases of tower 0's step. The device is synchronized after
  /// every layer and every phase, which slows training: use it to find the
  /// slow part of a step, not to measure throughput. evaluate() and predict()
  /// while on add their forward times to the layers too.
  void set_profiling(bool on);
  /// Text table of tower 0's profile since set_profiling(true): each phase of
  /// a training step (ms per step and % of the step), then every layer sorted
  /// by forward + backward time (name, type, forward and backward ms per step,
  /// % of the step). Per step: divided by the training steps profiled.
  std::string profile_report() const;

 private:
  /// Phases of a training step, in order (profile_report's rows): gathering
  /// and uploading the shard (and waiting for the last step's collectives);
  /// forward; loss and metric counts; backward, with the bucket reductions it
  /// starts; waiting for the buckets, scaling them and the optimizer updates
  /// (and the BN statistics broadcast); the all-reduce of the loss and metric sums.
  enum Phase { kGather, kForward, kLoss, kBackward, kUpdate, kStats, kPhases };
  /// Times the phases of one step of tower 0 while profiling: lap(p) waits for
  /// the tower's queued device work, then adds the time since the previous lap
  /// (or construction) to phase p. Does nothing when seconds is null.
  class PhaseClock {
   public:
    PhaseClock(std::array<double, kPhases>* seconds, const Device& device, Communicator& comm, int rank);
    void lap(Phase p);

   private:
    std::array<double, kPhases>* seconds_;
    Device device_;
    Communicator& comm_;  ///< The tower's collectives, polled before each wait.
    int rank_;
    std::chrono::steady_clock::time_point last_;
  };

  struct Tower {
    Tower(const Config& config, const Device& device);
    Device device;                     ///< Where everything below lives (except host vectors).
    Model model;
    Buffer<float> params, grads, state;
    std::unique_ptr<Optimizer> optimizer;
    GradientClipping clipping;         ///< The optimizer's clipnorm, global_clipnorm or clipvalue on grads.
    Buffer<float> class_weights;       ///< training.class_weight per class (empty without).
    Buffer<float> alphas;              ///< The focal loss's per-class alphas (empty without).
    /// The loss's form (label smoothing, focal parameters, alphas) for
    /// evaluate, and with class_weights for training (Keras's validation
    /// leaves the class weights out).
    CrossEntropyForm eval_form, train_form;
    Tensor y;                          ///< Masks of this tower's shard [n, H, W, 1] (predict: probabilities).
    Buffer<float> staged;              ///< GPU: the uploaded shard, images then masks.
    std::vector<double> stats_host;    ///< Loss and metric sums [2 + counts.v.size()] (host).
    QueuedLoss loss;                   ///< The training step's loss, read once backward is queued.
    QueuedMetrics metrics;             ///< The training step's metric counts, likewise.
    /// evaluate's batches' losses and counts, read kLateBatches at a time.
    std::vector<QueuedLoss> late_losses;
    std::vector<QueuedMetrics> late_metrics;
    BatchStats stats;
    double input_wait = 0;             ///< CPU: seconds spent gathering input since the last report.
    /// With ignores_pixels(): the counted pixels of the shard's masks as gathered (after augmentation).
    double counted_pixels = 0;
    /// A range of the gradient buffer whose all-reduce was started (this step).
    struct Bucket {
      size_t begin, end;
      int ticket;
    };
    std::vector<Bucket> buckets;
    StepGraphs graphs;                 ///< With cuda_graphs(): the recorded forward and backward (destroyed first).
  };
  /// Copies images[indices[lo..hi)] (a host tensor, held as
  /// data/held_samples.h says) into the tower's input as float32 (and masks
  /// into t.y when given), on the tower's device (train/gather.cpp). A GPU
  /// tower gathers into its pinned buffer and uploads on the copy stream:
  /// 8- and 16-bit samples as they are held, converted and augmented on
  /// the device (augment_batch), unless pixels are counted on the host
  /// (ignores_pixels), when, as float32 samples, they are converted and
  /// augmented on the host first. With augment_step (training with
  /// data.augmentation), each image and its mask are transformed as
  /// draw_sample_augmentation draws for that step and the sample's
  /// position lo + k in the global batch.
  void gather(Tower& t, const Tensor& images, const Tensor* masks, const std::vector<int>& indices, int lo, int hi,
              std::optional<uint64_t> augment_step = std::nullopt);
  /// A GPU tower's gathered samples (n images of img floats, then n masks of
  /// msk floats, in its pinned staging buffer) uploaded on the copy stream and
  /// unpacked into its input and t.y on the compute stream.
  void upload_gathered(Tower& t, int n, size_t img, size_t msk);
  /// evaluate's batches on tower r: its shards of each global batch of
  /// batch_size from indices, forward in inference mode, their losses (with
  /// weights[batch]) and counts added to t.stats (loss_sum, samples,
  /// counts), read kLateBatches batches at a time.
  void evaluate_batches(int r, const Dataset& data, const std::vector<int>& indices, int batch_size,
                        const std::vector<std::optional<double>>& weights);
  /// Queues tower r's loss and metric counts of its shard (`samples` of the
  /// global batch's `batch`; none: a zero gradient) into t.loss and
  /// t.metrics (for t.stats.counts' layout), their values there once the
  /// tower's read-backs are delivered; returns dL/dlogits, the model's
  /// output gradient (written, or queued on a GPU).
  Tensor& queue_loss_and_counts(int r, const Tensor& out, int batch, int samples);
  /// regularization_penalty() on tower 0's weights (tower 0 alone computes
  /// it: the towers hold the same weights), the calling thread bound to its
  /// device.
  double penalty() const;
  /// Sets cuda_graphs() and why_no_cuda_graphs() from the config and the
  /// run's towers and model, warning when the config's graphs are off.
  void decide_cuda_graphs();
  /// All-reduces s over the towers (host values, through the host communicator).
  void reduce_stats(int rank, BatchStats& s);
  /// With a loss that pools the global batch (pools_batch), loss_sum's reduce
  /// for tower rank: the host communicator's sum over the towers; else empty.
  ShardReduce shard_reduce(int rank);
  /// Runs fn(rank) on every tower's thread, bound to its device; a GPU running
  /// out of memory becomes a DeviceOutOfMemory naming what to lower.
  void run_towers(const std::function<void(int)>& fn);
  /// [start, end) of each of this process's towers' shard of a global batch of `batch` samples.
  std::vector<std::pair<int, int>> world_shards(int batch) const;
  /// Sums the gradients in buckets as backward makes them final (overlap), or
  /// once backward has ended, then scales and applies each bucket (one
  /// training step's second half). clock: laps kBackward after backward and
  /// kUpdate after the updates.
  void backward_and_update(int rank, const Context& ctx, Tensor& dlogits, int batch, bool overlap, PhaseClock& clock);

  /// A regularized trainable weight: its place in the parameter buffer and its factors.
  struct RegularizedWeight {
    size_t offset, size;
    Regularizer r;
  };
  /// Tower 0's regularized weights and their sizes, as abs_and_square_sums
  /// takes them, and room for its sums [k, 2].
  struct PenaltyArgs {
    std::vector<const float*> weights;
    std::vector<size_t> sizes;
    mutable std::vector<double> sums;
  };

  /// A copy (a caller's config may be a temporary, a test's parse_config(...)), with the batch and learning
  /// rate resolved for the world's towers (resolve_batch_scaling).
  Config config_;
  double lr_scale_ = 1.0;  ///< learning_rate_scale()
  LossKind loss_;
  OverlapForm overlap_;  ///< Dice's and tversky's arguments.
  int classes_ = 0;  ///< classes()
  bool auc_ = false;  ///< training.metrics lists auc
  std::vector<RegularizedWeight> regularized_;  ///< In parameter order (the same on every tower).
  PenaltyArgs penalty_args_;
  size_t bucket_bytes_ = kBucketBytes;
  bool bucket_overlap_ = true;
  bool cuda_graphs_ = false;  ///< cuda_graphs()
  std::string why_no_graphs_;  ///< why_no_cuda_graphs()
  std::vector<int> searched_batches_;  ///< Global batch sizes trained so far (their first backward searched).
  std::unique_ptr<TowerDevices> devices_;  ///< Destroyed after the towers (it owns their memory).
  std::vector<std::unique_ptr<Tower>> towers_;
  TowerPool pool_;
  bool profiling_ = false;
  std::array<double, kPhases> phase_seconds_{};  ///< Tower 0's profiled seconds per phase, summed over steps.
  long profiled_steps_ = 0;
};

}  // namespace trainer
