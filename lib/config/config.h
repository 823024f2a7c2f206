#pragma once
// The run configuration: a YAML file with sections model, data and training,
// in Keras's vocabulary. load_config() checks syntax, types, ranges and
// unknown keys of every section (errors name file:line:column); the model's
// layer parameters and shapes are checked when the Model is built from
// config.model (nn/model.h), still before any data is read.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"

namespace trainer {

/// A callback's mode: which way its monitor improves. Auto: max for
/// metrics, min for losses (Keras's rule, monitor_is_max).
enum class MonitorMode { Auto, Min, Max };
/// "auto", "min", "max".
const char* mode_name(MonitorMode mode);

/// Keras's fill_mode: the pixels a transform brings in from outside the
/// image are cval (Constant), the nearest edge pixel, the image mirrored
/// (Reflect: d c b a | a b c d), or the image repeated (Wrap).
enum class FillMode { Constant, Nearest, Reflect, Wrap };
/// "constant", "nearest", "reflect", "wrap".
const char* fill_mode_name(FillMode mode);

/// training.learning_rate_scaling (Goyal et al. 2017).
enum class LearningRateScaling { None, Linear, Sqrt };
/// "none", "linear", "sqrt".
const char* scaling_name(LearningRateScaling scaling);

/// One entry of model.layers. The layer's own keys stay in `node` and are read
/// by the layer's factory through a ParamReader.
struct LayerSpec {
  std::string name;                 ///< Unique; defaults to "<type lowercase>_<index>".
  std::string type;                 ///< Keras class name, e.g. "Conv2D" (canonical_layer_type; nn's registry checks it).
  std::vector<std::string> inputs;  ///< Empty: the previous layer's output (none for the first layer).
  /// Keras's `trainable` (default true). false freezes the layer: its weights
  /// get no gradient, no optimizer update and no regularizer penalty, and a
  /// BatchNormalization runs in inference mode (Model, nn/layer.h freeze()).
  bool trainable = true;
  YAML::Node node;                  ///< The whole mapping.
  YAML::Mark mark;                  ///< Where the entry starts, for messages.
};

/// The class name of a Keras alias of a layer class (MaxPool2D ->
/// MaxPooling2D, AvgPool2D, GlobalAvgPool2D, GlobalMaxPool2D, Convolution2D,
/// Convolution2DTranspose: the names keras.layers exports for the same
/// classes); any other type unchanged.
std::string canonical_layer_type(const std::string& type);

/// For a Keras layer class that is no layer type here but has a way to write
/// it (Lambda for 1/255, InputLayer, Keras's get_config name of the Input),
/// that way in parentheses, " (for ...)"; else "".
std::string keras_layer_hint(const std::string& type);

struct ModelConfig {
  std::string name = "model";
  std::vector<LayerSpec> layers;    ///< In file order; the first is Input, the last is the output.
};

/// Random transforms of the training samples (data/augmentation.h), each
/// with probability 1/2 as Keras's ImageDataGenerator flips.
struct AugmentationConfig {
  bool horizontal_flip = false;     ///< Mirror left-right.
  bool vertical_flip = false;       ///< Mirror up-down.
  bool rotate_90 = false;           ///< Turn by 0, 90, 180 or 270 degrees (square inputs only).
  // Keras's ImageDataGenerator random affine transform (data/affine_augmentation.h):
  double rotation_range = 0;        ///< Degrees: a turn by U(-r, r) about the centre.
  double width_shift_range = 0;     ///< Shift by U(-r, r): r < 1 a fraction of the width, else pixels.
  double height_shift_range = 0;    ///< The same, vertically (of the height).
  double shear_range = 0;           ///< Degrees: a shear by U(-r, r).
  double zoom_low = 1, zoom_high = 1;  ///< Zoom factors zx, zy each from U(low, high); above 1 zooms out.
  FillMode fill_mode = FillMode::Nearest;  ///< Outside the image.
  double cval = 0;                  ///< The image's fill value of fill_mode constant (masks get 0).
  double brightness_low = 1, brightness_high = 1;  ///< Image times U(low, high), clipped to [0, 255].
  std::string where;                ///< "<file>:<line>:<col>: data.augmentation", for messages.
  /// Whether the affine transform is drawn (any of its ranges is not the identity).
  bool affine() const {
    return rotation_range > 0 || width_shift_range > 0 || height_shift_range > 0 || shear_range > 0 ||
           zoom_low != 1 || zoom_high != 1;
  }
  bool brightness() const { return brightness_low != 1 || brightness_high != 1; }
  bool any() const { return horizontal_flip || vertical_flip || rotate_90 || affine() || brightness(); }
};

/// data.crop: train on crops of the model's input size taken from the images
/// at their own resolution (times scale), and validate, predict and evaluate
/// whole images in tiles; absent, every image is resized to the input.
struct CropConfig {
  double scale = 1.0;  ///< Images and masks resized by this factor before cropping and tiling (> 0).
  /// The fraction of crops centred on a foreground pixel drawn at random
  /// (nnU-Net's oversample_foreground_percent, 1/3); the others lie anywhere.
  double foreground = 1.0 / 3.0;
  int per_image = 1;          ///< Crops of each training image per epoch.
  double tile_overlap = 0.5;  ///< Tiles of validation, predict and evaluate: the fraction of a side they share.
  std::string tile_blend = "gaussian";  ///< "gaussian" or "linear" (data/tiling.h).
  std::string where;          ///< "file:line: data.crop", for messages.
};

struct DataConfig {
  std::string images;               ///< Folder of images (PNG/JPEG/TIFF).
  std::string masks;                ///< Folder of masks, matched by name.
  std::string mask_suffix = "_mask";///< Mask of <stem>.<ext> is <stem><suffix>.<any ext>.
  double validation_split = 0.0;    ///< Keras: the last fraction of the (name-sorted) pairs, in [0, 1).
  /// Keras's validation_data: folders of validation pairs, matched as the
  /// training ones (both or neither; not with validation_split > 0).
  std::string validation_images, validation_masks;
  bool shuffle = true;              ///< Reshuffle the training pairs every epoch (seeded).
  bool skip_bad_files = false;      ///< Warn and skip unreadable files / missing masks instead of failing.
  int loader_threads = 0;           ///< 0: one per core.
  /// The most pixels (width x height, from the file's header) an image or
  /// mask may declare before it is decoded: Pillow's MAX_IMAGE_PIXELS by
  /// default; 0 (null in the config): no limit but OpenCV's own.
  int64_t max_image_pixels = 89478485;
  AugmentationConfig augmentation;  ///< Training batches only.
  std::optional<CropConfig> crop;   ///< Crops at native resolution instead of resizing.
  /// Whether a run validates: validation_split > 0 or validation folders.
  bool has_validation() const { return validation_split > 0 || !validation_images.empty(); }
};

/// keras.optimizers.schedules' classes (None: a constant learning rate).
enum class ScheduleKind {
  None,
  ExponentialDecay,
  InverseTimeDecay,
  PolynomialDecay,
  PiecewiseConstantDecay,
  CosineDecay,
  CosineDecayRestarts
};
/// kind's Keras class name ("none" for None).
const char* schedule_name(ScheduleKind kind);

/// A learning-rate schedule of keras.optimizers.schedules, as a function of
/// the step t (the optimizer's iterations: 0 for the first update); the
/// formulas are in lib/train/lr_schedule.h.
struct LearningRateSchedule {
  ScheduleKind type = ScheduleKind::None;
  double initial_learning_rate = 0;  ///< All but PiecewiseConstantDecay.
  double decay_steps = 1;            ///< > 0; all but PiecewiseConstantDecay (CosineDecayRestarts: first_decay_steps).
  double decay_rate = 0;             ///< ExponentialDecay, InverseTimeDecay.
  bool staircase = false;            ///< ExponentialDecay, InverseTimeDecay: floor(t / decay_steps).
  double end_learning_rate = 1e-4;   ///< PolynomialDecay.
  double power = 1;                  ///< PolynomialDecay.
  bool cycle = false;                ///< PolynomialDecay.
  std::vector<double> boundaries;    ///< PiecewiseConstantDecay: strictly increasing steps.
  std::vector<double> values;        ///< PiecewiseConstantDecay: one more than boundaries.
  double alpha = 0;                  ///< CosineDecay(Restarts): the final rate as a fraction of the peak.
  double t_mul = 2;                  ///< CosineDecayRestarts: each period this many times the last (>= 1).
  double m_mul = 1;                  ///< CosineDecayRestarts: each restart's peak this many times the last.
  bool warmup = false;               ///< CosineDecay: warmup_target given (Keras: not None).
  double warmup_target = 0;          ///< CosineDecay: the rate reached after warmup_steps.
  double warmup_steps = 0;           ///< CosineDecay.
};

/// The optimizers, by their Keras class names (optimizer_name).
enum class OptimizerKind { SGD, Adam, AdamW, RMSprop };
/// kind's Keras class name: "SGD", "Adam", "AdamW", "RMSprop".
const char* optimizer_name(OptimizerKind kind);

struct OptimizerConfig {
  /// RMSprop when the config names none, as Keras's Model.compile(optimizer="rmsprop").
  OptimizerKind type = OptimizerKind::RMSprop;
  double learning_rate = 0.001;     ///< Keras default per type: SGD 0.01, Adam 0.001, RMSprop 0.001.
  /// learning_rate given as a schedule (learning_rate then holds its
  /// initial_learning_rate, or PiecewiseConstantDecay's first value).
  LearningRateSchedule schedule;
  double momentum = 0.0;            ///< SGD, RMSprop.
  bool nesterov = false;            ///< SGD.
  double decay = 0.0;               ///< lr_t = learning_rate / (1 + decay * iterations) (Keras 2).
  double weight_decay = 0.0;        ///< Decoupled: w -= lr_t * weight_decay * w each step (Keras 3; AdamW 0.004).
  double beta_1 = 0.9, beta_2 = 0.999;  ///< Adam, AdamW.
  double epsilon = 1e-7;            ///< Adam, AdamW, RMSprop.
  double rho = 0.9;                 ///< RMSprop.
  bool amsgrad = false;             ///< Adam, AdamW: keep the maximum of v (Reddi et al. 2018).
  bool centered = false;            ///< RMSprop: divide by the gradient's variance estimate, not its second moment.
  /// Keras's gradient clipping, at most one of the three > 0 (0: none),
  /// applied to the global batch's mean gradient (regularizer terms
  /// included) before the update: clipnorm scales each weight's gradient to
  /// an L2 norm of at most clipnorm, global_clipnorm all of them together
  /// (tf.clip_by_global_norm), clipvalue clamps every element to
  /// [-clipvalue, clipvalue].
  double clipnorm = 0.0, global_clipnorm = 0.0, clipvalue = 0.0;
};

struct EarlyStoppingConfig {
  bool enabled = false;
  std::string monitor = "val_loss";
  double min_delta = 0.0;
  int patience = 0;
  MonitorMode mode = MonitorMode::Auto;
  bool restore_best_weights = false;
  std::optional<double> baseline;   ///< Keras's baseline: the value the monitor must beat to reset the wait.
  int start_from_epoch = 0;         ///< Keras's start_from_epoch: epochs not watched at the start (>= 0).
  std::string mode_where;           ///< "<file>:<line>:<col>: training.callbacks[i] (EarlyStopping)" of mode.
};

struct ModelCheckpointConfig {
  bool enabled = false;
  std::string filepath;             ///< May hold {epoch}, {epoch:03d}, {val_loss:.4f}, ...; relative to output_dir.
  std::string monitor = "val_loss";
  MonitorMode mode = MonitorMode::Auto;
  bool save_best_only = false;
  bool save_weights_only = false;   ///< The files hold the weights, config and logs only, as final.h5 (no --resume).
  std::string where;                ///< "<file>:<line>:<col>: training.callbacks[i] (ModelCheckpoint)", for messages.
  std::string mode_where;           ///< The same at its mode (or the entry when mode is absent).
};

/// keras.callbacks.TensorBoard's arguments and defaults (Keras 3), as far as
/// they apply: event files for `tensorboard --logdir` (lib/train/tensorboard.h).
struct TensorBoardConfig {
  bool enabled = false;
  std::string log_dir = "logs";     ///< Relative to output_dir; its train/ and validation/ folders hold the files.
  int update_freq = 0;              ///< 0: 'epoch' (epoch_* scalars only); N: also batch_* every N steps ('batch' = 1).
  int histogram_freq = 0;           ///< Weight histograms every N epochs (0: none).
  bool write_steps_per_second = false;  ///< Also epoch_steps_per_second (and batch_steps_per_second).
  bool write_graph = true;          ///< The model's layers as a graph in train/ (TensorBoard's Graphs tab).
  std::string where;                ///< "<file>:<line>:<col>: training.callbacks[i] (TensorBoard)" of log_dir.
};

/// tf.keras.callbacks.ReduceLROnPlateau's arguments and defaults.
struct ReduceLROnPlateauConfig {
  bool enabled = false;
  std::string monitor = "val_loss";
  double factor = 0.1;              ///< new_lr = lr * factor, in (0, 1).
  int patience = 10;                ///< Epochs without improvement before a reduction.
  MonitorMode mode = MonitorMode::Auto;
  double min_delta = 1e-4;          ///< Smallest change that counts as an improvement.
  int cooldown = 0;                 ///< Epochs after a reduction before counting again.
  double min_lr = 0.0;              ///< The learning rate never goes below it.
  std::string mode_where;           ///< "<file>:<line>:<col>: training.callbacks[i] (ReduceLROnPlateau)" of mode.
};

/// The loss functions training.loss names, by the name the config and the
/// logs give each (loss_name).
enum class LossKind {
  BinaryCrossentropy,             ///< binary_crossentropy
  Dice,                           ///< dice: the per-image soft Dice with smooth 1 of the Keras U-Net examples
  BceDice,                        ///< bce_dice
  BinaryFocalCrossentropy,        ///< binary_focal_crossentropy
  SparseCategoricalCrossentropy,  ///< sparse_categorical_crossentropy
  CategoricalCrossentropy,        ///< categorical_crossentropy
  CategoricalFocalCrossentropy,   ///< categorical_focal_crossentropy
  KerasDice,                      ///< Dice: Keras 3's class (no function name)
  Tversky                         ///< tversky
};

/// kind's name: the function name above (Dice for KerasDice).
const char* loss_name(LossKind kind);

/// training.loss: a loss name, or Keras's loss class and arguments as a mapping.
struct LossConfig {
  /// The loss function.
  LossKind kind = LossKind::BinaryCrossentropy;
  /// Keras's from_logits: the model's last layer outputs logits (no final
  /// sigmoid or softmax) and the loss applies the sigmoid (binary losses) or
  /// the softmax (categorical ones); false: the last layer ends in it.
  bool from_logits = false;
  /// sparse_categorical_crossentropy's ignore_class (Keras 3): the mask value
  /// (0..65535) whose pixels count in neither the loss nor the metrics; -1: none.
  int ignore_class = -1;
  /// Keras's label_smoothing in [0, 1] (binary_crossentropy,
  /// categorical_crossentropy and the focal losses).
  double label_smoothing = 0.0;
  /// The focal losses' focusing parameter gamma (>= 0, Keras's default 2)
  /// and alpha (in [0, 1], default 0.25: CategoricalFocalCrossentropy's
  /// factor; BinaryFocalCrossentropy's weight of class 1 when
  /// apply_class_balancing).
  double gamma = 2.0, alpha = 0.25;
  /// tversky's alpha and beta (>= 0, Keras's defaults 0.5 and 0.5): the
  /// weights of sum y (1 - p) and sum p (1 - y) in its denominator.
  double tversky_alpha = 0.5, tversky_beta = 0.5;
  /// Dice and tversky: axis [1, 2, 3] (each image its own ratio) rather than
  /// Keras's default None (one ratio over the global batch).
  bool per_image = false;
  /// Dice and tversky: the axis was [1, 2], which leaves out the channels:
  /// the same as [1, 2, 3] on one sigmoid channel, but one ratio per image
  /// and class in Keras over K softmax channels (refused there).
  bool axis_leaves_channels = false;
  /// CategoricalFocalCrossentropy's alpha as a list (Keras 3): one factor
  /// >= 0 per class, replacing alpha; empty: the one alpha. Its length is
  /// checked against the model's classes when the Trainer is built.
  std::vector<double> alphas;
  bool apply_class_balancing = false;  ///< BinaryFocalCrossentropy only.
  bool alpha_given = false;            ///< alpha was in the config (a warning when it weighs nothing).
  std::string where;  ///< "<file>:<line>:<col>: training.loss", for messages
};

/// The keras.losses class of kind (BinaryCrossentropy,
/// SparseCategoricalCrossentropy, CategoricalCrossentropy,
/// BinaryFocalCrossentropy, CategoricalFocalCrossentropy, Dice, Tversky), or
/// its loss_name for dice and bce_dice, which have none: the `type` of
/// training.loss's mapping form, for messages.
std::string keras_loss_class(LossKind kind);
/// Whether kind is categorical (softmax over K classes, class-index masks):
/// sparse_categorical_crossentropy, categorical_crossentropy,
/// categorical_focal_crossentropy. Keras 3's Dice and Tversky
/// (is_overlap) take either form.
bool is_categorical(LossKind kind);
/// Whether training.metrics' name is for binary masks only: precision,
/// recall, binary_iou, binary_accuracy, binary_io_u, auc (the others,
/// mean_iou, dice, accuracy and mean_io_u, take class-index masks too).
bool binary_only_metric(const std::string& name);
/// Whether kind is Keras 3's Dice or Tversky, which take either one sigmoid
/// channel and binary masks, or K >= 2 softmax channels and class-index
/// masks (Keras's one-hot targets).
bool is_overlap(LossKind kind);
/// Whether kind is binary_focal_crossentropy or categorical_focal_crossentropy.
bool is_focal(LossKind kind);

struct TrainingConfig {
  int epochs = 1;  ///< The last epoch (1-based) the run trains, counted from the start as Keras's fit() does.
  /// Keras's fit(initial_epoch): the epochs already trained, so the run
  /// trains epochs initial_epoch + 1 .. epochs (its logs, checkpoints and
  /// callbacks number them so); 0 <= initial_epoch < epochs. A --resume
  /// continues where its checkpoint stopped instead.
  int initial_epoch = 0;
  /// Keras's fit(validation_freq): validation runs after epoch e (1-based)
  /// when e % validation_freq == 0, or, when validation_epochs is not empty
  /// (the list form), when e is in it. Callbacks watching a val_* value
  /// skip the other epochs, as Keras's do.
  int validation_freq = 1;
  std::vector<int> validation_epochs;
  /// Whether epoch e (1-based) validates by validation_freq / validation_epochs.
  bool validates(int e) const {
    return validation_epochs.empty() ? e % validation_freq == 0
                                     : std::find(validation_epochs.begin(), validation_epochs.end(), e) !=
                                           validation_epochs.end();
  }
  int batch_size = 32;              ///< Global batch, split across towers.
  /// The alternative to batch_size: each tower's batch, the global batch
  /// being it times the towers of the run (all processes'); 0: batch_size
  /// gives the global batch (Keras's semantics). The Trainer resolves it
  /// into batch_size once the towers are known.
  int batch_size_per_device = 0;
  /// Goyal et al. 2017 ("Accurate, Large Minibatch SGD"): with
  /// batch_size_per_device, the learning rate (tuned for one device's batch)
  /// times k = the towers (linear) or sqrt(k) (sqrt); none: as given.
  LearningRateScaling learning_rate_scaling = LearningRateScaling::None;
  /// Their gradual warm-up: over the first learning_rate_warmup_epochs epochs
  /// (whole or fractional), the rate rises linearly, step by step, from the
  /// unscaled learning rate to the scaled one. 0: none.
  double learning_rate_warmup_epochs = 0;
  /// Batches per epoch (Keras's steps_per_epoch); 0: one pass over the
  /// training set. Epochs then take the next steps_per_epoch batches of an
  /// endless sequence of passes, each shuffled as an epoch is.
  int steps_per_epoch = 0;
  uint64_t seed = 0;
  LossConfig loss;
  std::vector<std::string> metrics;          ///< mean_iou | dice | accuracy
  std::string metrics_where;                 ///< "<file>:<line>:<col>: training.metrics", for messages
  /// class_weight: the weight of each mask class's pixels in the training
  /// loss (index = class; binary masks: 0 background, 1 foreground), 1 for
  /// the classes a mapping leaves out; empty: none. Keras's fit(class_weight)
  /// applied per pixel, as the TensorFlow segmentation tutorial's sample
  /// weights; validation losses are unweighted, as in Keras.
  std::vector<double> class_weight;
  std::string class_weight_where;            ///< "<file>:<line>:<col>: training.class_weight", for messages
  OptimizerConfig optimizer;
  EarlyStoppingConfig early_stopping;
  ModelCheckpointConfig model_checkpoint;
  ReduceLROnPlateauConfig reduce_lr;
  TensorBoardConfig tensorboard;
  /// Convolution arithmetic on GPUs (fp32 | tf32 | bf16, see core/device.h);
  /// tf32 by default, as TensorFlow (since 2.4) and PyTorch's cuDNN
  /// convolutions; CPU towers always compute in fp32.
  Precision precision = Precision::TF32;
  /// Seconds a collective (a gradient all-reduce among GPUs, or among the
  /// processes of an MPI run) may take before the run ends with an error
  /// naming it: a peer died or hangs (PyTorch's init_process_group timeout).
  double collective_timeout = 600;
  /// Record a GPU tower's training forward and backward as CUDA graphs once
  /// per batch size and replay them (train/step_graphs.h), in runs of one GPU
  /// tower whose layers are all Layer::replayable(); off by default, as
  /// PyTorch's torch.cuda.graphs are opt-in.
  bool cuda_graphs = false;
  std::string output_dir = "runs/model";
  /// A checkpoint of this model whose weights a new run starts from, as
  /// Keras's model.load_weights() before fit() (fine-tuning a trained model
  /// on new data); "": the layers' initializers. Any checkpoint of the same
  /// layers serves (last.h5, final.h5, a ModelCheckpoint file, weights-only
  /// or not); the optimizer, epochs and callbacks start afresh. A resumed
  /// run ignores it: its checkpoint has the weights.
  std::string initial_weights;
  /// Keras's load_weights(skip_mismatch=True): layers whose weights do not
  /// fit (missing there, or of another shape) keep their initializers.
  bool initial_weights_skip_mismatch = false;
  std::string initial_weights_where;  ///< "<file>:<line>:<col>: training.initial_weights" or "--initial-weights"
};

struct Config {
  std::string path;                 ///< The file it came from (for messages).
  std::string text;                 ///< Its full text (stored in checkpoints).
  ModelConfig model;
  DataConfig data;
  TrainingConfig training;
};

/// Reads and validates path. Throws UserError "<path>:<line>:<col>: ..." for
/// YAML syntax errors, unknown keys (with did-you-mean), wrong types/ranges,
/// unknown layer types (listing the known ones), missing/duplicate layer
/// names, inputs that name no earlier layer, metrics/monitors that do not exist.
Config load_config(const std::string& path);
/// Same, from text; path is used in messages only.
Config parse_config(const std::string& text, const std::string& path);

}  // namespace trainer
