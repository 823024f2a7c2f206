#include "train/resume_check.h"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "core/error.h"
#include "nn/model.h"
#include "train/lr_schedule.h"
#include "train/optimizer.h"

namespace trainer {

namespace {

template <typename T>
void compare(std::vector<std::string>& out, const std::string& key, const T& now, const T& then) {
  if (now == then) return;
  std::ostringstream s;
  s << std::boolalpha << key << " is " << now << " (the checkpoint's run used " << then << ")";
  out.push_back(s.str());
}

/// x in its shortest form that reads back exactly (0.3, not 0.29999999999999999).
std::string number_text(double x) { return fmt::format("{}", x); }

/// A value as text: a number in its shortest exact form (0.10 reads 0.1),
/// anything else in YAML flow style.
std::string value_text(const YAML::Node& v) {
  double x = 0;
  if (v.IsScalar() && YAML::convert<double>::decode(v, x)) return number_text(x);
  YAML::Emitter e;
  e << YAML::Flow << v;
  return e.c_str();
}

/// A layer's settings as "{key: value, ...}" in key order, so that another
/// order of the same keys reads the same; initializers are left out (they
/// do not matter to a run that loads its weights), and so is trainable
/// (check_resume_trainable compares it where it matters; true is its default).
std::string layer_text(const YAML::Node& node) {
  std::map<std::string, std::string> keys;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (key == "trainable") continue;
    if (key.size() > 12 && key.compare(key.size() - 12, 12, "_initializer") == 0) continue;
    keys[key] = value_text(kv.second);
  }
  std::string text;
  for (const auto& [k, v] : keys) text += (text.empty() ? "" : ", ") + k + ": " + v;
  return "{" + text + "}";
}

/// A list of numbers as "[1, 0.5]" ("none" when empty).
std::string numbers_text(const std::vector<double>& w) {
  if (w.empty()) return "none";
  std::string s;
  for (size_t c = 0; c < w.size(); ++c) s += (c ? ", " : "[") + number_text(w[c]);
  return s + "]";
}

/// UserError naming source when the optimizer's state cannot carry over
/// from b (the checkpoint's) to a: another type, or another set of slots.
void check_optimizer_state(const OptimizerConfig& a, const OptimizerConfig& b, const std::string& source) {
  if (a.type != b.type)
    throw UserError(source + " was trained with the " + optimizer_name(b.type) + " optimizer, the config says " +
                    optimizer_name(a.type) + "; its state cannot carry over: set training.optimizer.type to " +
                    optimizer_name(b.type) + " to resume");
  // Settings that decide which state slots exist: (key, the config's value, the checkpoint's, whether each
  // keeps the slot, the slot). SGD and RMSprop keep "momentum" only when momentum is not 0.
  const std::tuple<const char*, std::string, std::string, bool, bool, const char*> slots[] = {
      {"amsgrad", a.amsgrad ? "true" : "false", b.amsgrad ? "true" : "false", a.amsgrad, b.amsgrad,
       "the maximum of v, kept only with amsgrad true"},
      {"centered", a.centered ? "true" : "false", b.centered ? "true" : "false", a.centered, b.centered,
       "the mean gradient, kept only with centered true"},
      {"momentum", number_text(a.momentum), number_text(b.momentum), keeps_momentum_slot(a), keeps_momentum_slot(b),
       "the velocity, kept only with momentum > 0"}};
  for (const auto& [key, now_text, then_text, now_on, then_on, slot] : slots)
    if (now_on != then_on)
      throw UserError(source + " was trained with " + key + " " + then_text + ", the config says " + now_text +
                      "; the optimizer's state differs (" + slot + ") and cannot carry over: set training.optimizer." +
                      key + " to " + then_text + " to resume");
}

void optimizer_differences(std::vector<std::string>& out, const OptimizerConfig& a, const OptimizerConfig& b) {
  auto schedule = [](const OptimizerConfig& o) {
    return o.schedule.type == ScheduleKind::None ? std::string("none") : schedule_text(o.schedule);
  };
  compare(out, "training.optimizer.learning_rate schedule", schedule(a), schedule(b));
  if (a.schedule.type == ScheduleKind::None && b.schedule.type == ScheduleKind::None)
    compare(out, "training.optimizer.learning_rate", a.learning_rate, b.learning_rate);
  compare(out, "training.optimizer.momentum", a.momentum, b.momentum);
  compare(out, "training.optimizer.nesterov", a.nesterov, b.nesterov);
  compare(out, "training.optimizer.decay", a.decay, b.decay);
  compare(out, "training.optimizer.weight_decay", a.weight_decay, b.weight_decay);
  compare(out, "training.optimizer.beta_1", a.beta_1, b.beta_1);
  compare(out, "training.optimizer.beta_2", a.beta_2, b.beta_2);
  compare(out, "training.optimizer.epsilon", a.epsilon, b.epsilon);
  compare(out, "training.optimizer.rho", a.rho, b.rho);
  compare(out, "training.optimizer.clipnorm", a.clipnorm, b.clipnorm);
  compare(out, "training.optimizer.global_clipnorm", a.global_clipnorm, b.global_clipnorm);
  compare(out, "training.optimizer.clipvalue", a.clipvalue, b.clipvalue);
}

void loss_differences(std::vector<std::string>& out, const LossConfig& l, const LossConfig& m) {
  compare(out, "training.loss", std::string(loss_name(l.kind)), std::string(loss_name(m.kind)));
  compare(out, "training.loss.from_logits", l.from_logits, m.from_logits);
  const auto ignored = [](int c) { return c < 0 ? std::string("null") : std::to_string(c); };
  compare(out, "training.loss.ignore_class", ignored(l.ignore_class), ignored(m.ignore_class));
  compare(out, "training.loss.label_smoothing", l.label_smoothing, m.label_smoothing);
  if (l.kind == m.kind && is_focal(l.kind)) {
    compare(out, "training.loss.gamma", l.gamma, m.gamma);
    compare(out, "training.loss.apply_class_balancing", l.apply_class_balancing, m.apply_class_balancing);
    // BinaryFocalCrossentropy's alpha weighs only with apply_class_balancing; CategoricalFocalCrossentropy's
    // is one number or a list per class.
    auto alpha = [](const LossConfig& c) { return c.alphas.empty() ? number_text(c.alpha) : numbers_text(c.alphas); };
    if (l.kind == LossKind::CategoricalFocalCrossentropy || l.apply_class_balancing || m.apply_class_balancing)
      compare(out, "training.loss.alpha", alpha(l), alpha(m));
  }
  if (l.kind == m.kind && is_overlap(l.kind)) {
    auto axis = [](bool per_image) { return std::string(per_image ? "[1, 2, 3]" : "null"); };
    compare(out, "training.loss.axis", axis(l.per_image), axis(m.per_image));
  }
  if (l.kind == m.kind && l.kind == LossKind::Tversky) {
    compare(out, "training.loss.alpha", number_text(l.tversky_alpha), number_text(m.tversky_alpha));
    compare(out, "training.loss.beta", number_text(l.tversky_beta), number_text(m.tversky_beta));
  }
}

/// The batches, seed and data folders, splits and order.
void data_differences(std::vector<std::string>& out, const Config& now, const Config& then) {
  compare(out, "training.class_weight", numbers_text(now.training.class_weight),
          numbers_text(then.training.class_weight));
  compare(out, "training.batch_size", now.training.batch_size, then.training.batch_size);
  auto steps = [](int s) { return s > 0 ? std::to_string(s) : std::string("null (one pass per epoch)"); };
  compare(out, "training.steps_per_epoch", steps(now.training.steps_per_epoch), steps(then.training.steps_per_epoch));
  compare(out, "training.seed", now.training.seed, then.training.seed);
  compare(out, "data.validation_split", now.data.validation_split, then.data.validation_split);
  auto folder = [](const std::string& f) { return f.empty() ? std::string("none") : f; };
  compare(out, "data.validation_images", folder(now.data.validation_images), folder(then.data.validation_images));
  compare(out, "data.validation_masks", folder(now.data.validation_masks), folder(then.data.validation_masks));
  compare(out, "data.shuffle", now.data.shuffle, then.data.shuffle);
  compare(out, "data.images", now.data.images, then.data.images);
  compare(out, "data.masks", now.data.masks, then.data.masks);
}

/// Callbacks whose state carries over: another setting changes what that state means.
void callback_differences(std::vector<std::string>& out, const TrainingConfig& now, const TrainingConfig& then) {
  const EarlyStoppingConfig &e = now.early_stopping, &f = then.early_stopping;
  auto given = [](bool on) { return std::string(on ? "on" : "off"); };
  compare(out, "EarlyStopping", given(e.enabled), given(f.enabled));
  if (e.enabled && f.enabled) {
    compare(out, "EarlyStopping monitor", e.monitor, f.monitor);
    compare(out, "EarlyStopping patience", e.patience, f.patience);
    compare(out, "EarlyStopping min_delta", e.min_delta, f.min_delta);
    auto baseline = [](const std::optional<double>& b) { return b ? number_text(*b) : std::string("none"); };
    compare(out, "EarlyStopping baseline", baseline(e.baseline), baseline(f.baseline));
    compare(out, "EarlyStopping start_from_epoch", e.start_from_epoch, f.start_from_epoch);
  }
  const ReduceLROnPlateauConfig &r = now.reduce_lr, &q = then.reduce_lr;
  compare(out, "ReduceLROnPlateau", given(r.enabled), given(q.enabled));
  if (r.enabled && q.enabled) {
    compare(out, "ReduceLROnPlateau monitor", r.monitor, q.monitor);
    compare(out, "ReduceLROnPlateau factor", r.factor, q.factor);
    compare(out, "ReduceLROnPlateau patience", r.patience, q.patience);
    compare(out, "ReduceLROnPlateau min_delta", r.min_delta, q.min_delta);
    compare(out, "ReduceLROnPlateau cooldown", r.cooldown, q.cooldown);
    compare(out, "ReduceLROnPlateau min_lr", r.min_lr, q.min_lr);
  }
}

void augmentation_differences(std::vector<std::string>& out, const AugmentationConfig& x,
                              const AugmentationConfig& y) {
  compare(out, "data.augmentation.horizontal_flip", x.horizontal_flip, y.horizontal_flip);
  compare(out, "data.augmentation.vertical_flip", x.vertical_flip, y.vertical_flip);
  compare(out, "data.augmentation.rotate_90", x.rotate_90, y.rotate_90);
  compare(out, "data.augmentation.rotation_range", x.rotation_range, y.rotation_range);
  compare(out, "data.augmentation.width_shift_range", x.width_shift_range, y.width_shift_range);
  compare(out, "data.augmentation.height_shift_range", x.height_shift_range, y.height_shift_range);
  compare(out, "data.augmentation.shear_range", x.shear_range, y.shear_range);
  compare(out, "data.augmentation.zoom_range low", x.zoom_low, y.zoom_low);
  compare(out, "data.augmentation.zoom_range high", x.zoom_high, y.zoom_high);
  compare(out, "data.augmentation.fill_mode", std::string(fill_mode_name(x.fill_mode)),
          std::string(fill_mode_name(y.fill_mode)));
  compare(out, "data.augmentation.cval", x.cval, y.cval);
  compare(out, "data.augmentation.brightness_range low", x.brightness_low, y.brightness_low);
  compare(out, "data.augmentation.brightness_range high", x.brightness_high, y.brightness_high);
}

/// data.crop: whether the run trains on crops, and how they are drawn and validated.
void crop_differences(std::vector<std::string>& out, const std::optional<CropConfig>& x,
                      const std::optional<CropConfig>& y) {
  auto mode = [](const std::optional<CropConfig>& c) {
    return std::string(c ? "crops at native resolution" : "none (images resized to the Input)");
  };
  compare(out, "data.crop", mode(x), mode(y));
  if (!x || !y) return;
  compare(out, "data.crop.scale", x->scale, y->scale);
  compare(out, "data.crop.foreground", x->foreground, y->foreground);
  compare(out, "data.crop.per_image", x->per_image, y->per_image);
  compare(out, "data.crop.tile_overlap", x->tile_overlap, y->tile_overlap);
  compare(out, "data.crop.tile_blend", x->tile_blend, y->tile_blend);
}

/// The Input shape, and each layer's settings (layers matched by name).
void layer_differences(std::vector<std::string>& out, const Config& now, const Config& then) {
  // A fully convolutional model's weights fit any input size, so another
  // Input shape loads; the run is another one all the same.
  if (!now.model.layers.empty() && !then.model.layers.empty()) {
    auto shape = [](const Config& c) {
      YAML::Emitter e;
      e << YAML::Flow << c.model.layers.front().node["shape"];
      return std::string(e.c_str());
    };
    compare(out, "the Input shape", shape(now), shape(then));
  }
  // Settings without weights of their own (dilation_rate, an activation, a
  // regularizer, a dropout rate) load all the same; they change the run.
  // Layers are matched by name (the Input's shape is compared above).
  std::map<std::string, const LayerSpec*> before;
  for (const LayerSpec& m : then.model.layers) before[m.name] = &m;
  for (size_t i = 1; i < now.model.layers.size(); ++i) {
    const LayerSpec& l = now.model.layers[i];
    const auto m = before.find(l.name);
    if (m != before.end()) compare(out, "layer '" + l.name + "'", layer_text(l.node), layer_text(m->second->node));
  }
}

}  // namespace

std::vector<std::string> resume_differences(const Config& now, const Config& then, const std::string& source) {
  check_optimizer_state(now.training.optimizer, then.training.optimizer, source);
  std::vector<std::string> out;
  optimizer_differences(out, now.training.optimizer, then.training.optimizer);
  loss_differences(out, now.training.loss, then.training.loss);
  data_differences(out, now, then);
  callback_differences(out, now.training, then.training);
  augmentation_differences(out, now.data.augmentation, then.data.augmentation);
  crop_differences(out, now.data.crop, then.data.crop);
  layer_differences(out, now, then);
  return out;
}

std::vector<std::string> check_resume_trainable(const Config& then, const Model& model, const std::string& source) {
  std::map<std::string, bool> trainable_then;
  for (const LayerSpec& m : then.model.layers) trainable_then[m.name] = m.trainable;
  std::string changed;  // "layer 'a' trainable: false, layer 'b' trainable: true", as then
  std::vector<std::string> out;
  for (int i = 0; i < model.num_layers(); ++i) {
    const Layer& l = model.layer(i);
    const std::vector<ParamSpec> specs = l.param_specs();  // the layer's own: trainable unless state
    const auto t = trainable_then.find(l.name());
    if (specs.empty() || t == trainable_then.end() || t->second == !l.frozen()) continue;
    const std::string was = t->second ? "true" : "false";
    if (std::any_of(specs.begin(), specs.end(), [](const ParamSpec& p) { return p.trainable; }))
      changed += (changed.empty() ? "layer '" : ", layer '") + l.name() + "' trainable: " + was;
    else  // moving statistics only (BatchNormalization without gamma and beta): the same state, another run
      out.push_back("layer '" + l.name() + "' trainable is " + (t->second ? "false" : "true") +
                    " (the checkpoint's run used " + was + ")");
  }
  if (!changed.empty())
    throw UserError(source + " was trained with " + changed + ", which the config changes; the optimizer's state "
                    "covers the trainable weights only and cannot carry over: set them back to resume, or start a "
                    "new run from the checkpoint's weights with --initial-weights " + source + " and another "
                    "--output (Keras's load_weights before fit)");
  return out;
}

}  // namespace trainer
