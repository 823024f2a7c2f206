// The training section: loss, metrics, optimizer and callbacks, in Keras's
// vocabulary and with Keras's defaults.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include <spdlog/fmt/fmt.h>

#include "config/params.h"
#include "config/sections.h"
#include "core/error.h"

namespace trainer {

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names = {"mean_iou", "dice",       "accuracy",        "mean_io_u", "precision",
                                                 "recall",   "binary_iou", "binary_accuracy", "binary_io_u", "auc"};
  return names;
}

bool binary_only_metric(const std::string& name) {
  return name != "mean_iou" && name != "dice" && name != "accuracy" && name != "mean_io_u";
}

void require_type(ParamReader& head, const std::string& example) {
  if (!head.has("type") && head.has("name"))
    head.fail("'type' is required; the class goes in 'type' (e.g. 'type: " + example + "'), not in 'name'");
}

namespace {

const std::vector<std::string> kOptimizers = {"SGD", "Adam", "AdamW", "RMSprop"};  // OptimizerKind's order


// "sgd", "Sgd", "SGD" -> SGD (Keras accepts the lowercase string identifiers); nullopt for another name.
std::optional<OptimizerKind> canonical_optimizer(const std::string& name) {
  for (size_t i = 0; i < kOptimizers.size(); ++i)
    if (ascii_lower(kOptimizers[i]) == ascii_lower(name)) return OptimizerKind(i);
  return std::nullopt;
}


// A real > 0 that is still a normal float32 (the optimizers compute in float;
// a smaller epsilon would become 0 and divide 0 by 0).
double positive(ParamReader& p, const std::string& key, double def) {
  double x = p.get_double(key, def, 0.0);
  if (x <= 0) p.fail(key, fmt::format("must be greater than 0, got {:g}", x));
  if (x < 1e-30) p.fail(key, "must be at least 1e-30 (smaller values are 0 in float32)");
  return x;
}

// keras.optimizers.schedules' classes, in ScheduleKind's order after None.
const std::vector<std::string> kSchedules = {"ExponentialDecay",       "InverseTimeDecay", "PolynomialDecay",
                                             "PiecewiseConstantDecay", "CosineDecay",      "CosineDecayRestarts"};

/// The required arguments of schedule `type`, as YAML keys with example values.
std::string schedule_example(const std::string& type) {
  if (type == "PiecewiseConstantDecay") return "boundaries: [1000], values: [0.001, 0.0001]";
  if (type == "CosineDecayRestarts") return "initial_learning_rate: 0.001, first_decay_steps: 1000";
  if (type == "CosineDecay" || type == "PolynomialDecay") return "initial_learning_rate: 0.001, decay_steps: 1000";
  return "initial_learning_rate: 0.001, decay_steps: 1000, decay_rate: 0.9";
}

// learning_rate: {type: <keras.optimizers.schedules class>, <its arguments>}.
LearningRateSchedule read_schedule(const YAML::Node& node, const std::string& file) {
  const std::string what = "training.optimizer.learning_rate";
  ParamReader head(node, file, what);
  if (head.has("class_name"))
    head.fail("class_name", "is Keras's serialized form; write the schedule as {type: " +
                                (node["class_name"].IsScalar() ? node["class_name"].Scalar() : std::string("CosineDecay")) +
                                ", <the keys of its 'config'>}, e.g. {type: CosineDecay, initial_learning_rate: "
                                "0.001, decay_steps: 1000}");
  require_type(head, "CosineDecay");
  LearningRateSchedule s;
  const std::string type = head.get_string("type", std::nullopt);
  const auto known = std::find(kSchedules.begin(), kSchedules.end(), type);
  if (known == kSchedules.end())
    head.fail("type", "is '" + type + "'" + did_you_mean(type, kSchedules) +
                          "; use one of: " + join_names(kSchedules) + " (keras.optimizers.schedules)");
  s.type = ScheduleKind(1 + (known - kSchedules.begin()));
  ParamReader p(node, file, what + " (" + type + ")");
  p.skip("type");
  p.skip("name");  // Keras's op name: no meaning here
  if (s.type == ScheduleKind::PiecewiseConstantDecay) {
    const YAML::Node b = p.get_node("boundaries"), v = p.get_node("values");
    if (!b || !b.IsSequence() || !v || !v.IsSequence() || v.size() != b.size() + 1 || v.size() < 1)
      p.fail("values", "must be a list with one more entry than 'boundaries' (the rate up to each boundary step, "
                       "then after the last), e.g. boundaries: [1000, 2000], values: [0.001, 0.0005, 0.0001]");
    for (size_t i = 0; i < b.size(); ++i) {
      double x = 0;
      if (!b[i].IsScalar() || !YAML::convert<double>::decode(b[i], x) || !(x >= 0) ||
          (i > 0 && !(x > s.boundaries.back())))
        p.fail("boundaries", "must be steps >= 0 in strictly increasing order");
      s.boundaries.push_back(x);
    }
    for (size_t i = 0; i < v.size(); ++i) {
      double x = 0;
      if (!v[i].IsScalar() || !YAML::convert<double>::decode(v[i], x) || !(x >= 0) || !std::isfinite(x))
        p.fail("values", "must be learning rates >= 0");
      s.values.push_back(x);
    }
    p.finish();
    return s;
  }
  s.initial_learning_rate = p.get_double("initial_learning_rate", std::nullopt, 0.0);
  const std::string steps_key = s.type == ScheduleKind::CosineDecayRestarts ? "first_decay_steps" : "decay_steps";
  if (s.type == ScheduleKind::CosineDecayRestarts && p.has("decay_steps"))
    p.fail("decay_steps", "is CosineDecay's; CosineDecayRestarts calls the first period's steps first_decay_steps "
                          "(Keras's argument): rename the key");
  s.decay_steps = p.get_double(steps_key, std::nullopt);
  if (!(s.decay_steps > 0)) p.fail(steps_key, "must be greater than 0 (Keras's rule)");
  if (s.type == ScheduleKind::CosineDecayRestarts) {
    s.t_mul = p.get_double("t_mul", 2.0);
    if (!(s.t_mul >= 1.0))  // Keras's formula takes the log of a negative number once shrinking periods run out
      p.fail("t_mul", "must be at least 1 (each period is t_mul times as long as the one before)");
    s.m_mul = p.get_double("m_mul", 1.0, 0.0);
    s.alpha = p.get_double("alpha", 0.0, 0.0, 1.0);
  } else if (s.type == ScheduleKind::ExponentialDecay || s.type == ScheduleKind::InverseTimeDecay) {
    s.decay_rate = p.get_double("decay_rate", std::nullopt, 0.0);
    s.staircase = p.get_bool("staircase", false);
  } else if (s.type == ScheduleKind::PolynomialDecay) {
    s.end_learning_rate = p.get_double("end_learning_rate", 1e-4, 0.0);
    s.power = p.get_double("power", 1.0, 0.0);
    s.cycle = p.get_bool("cycle", false);
  } else {  // CosineDecay
    s.alpha = p.get_double("alpha", 0.0, 0.0, 1.0);
    s.warmup = p.given("warmup_target");
    if (s.warmup) s.warmup_target = p.get_double("warmup_target", std::nullopt, 0.0);
    s.warmup_steps = p.get_double("warmup_steps", 0.0, 0.0);
    if (s.warmup_steps > 0 && !s.warmup)  // Keras ignores them silently
      p.fail("warmup_steps", "needs warmup_target, the rate the warmup reaches (Keras ignores warmup_steps without "
                             "it); add e.g. 'warmup_target: 0.001'");
  }
  p.finish();
  return s;
}

/// class_weight: Keras's {class: weight} mapping, or a list of weights by
/// class; each weight finite and >= 0, classes 0..kMaxClassWeight - 1.
std::vector<double> read_class_weight(const YAML::Node& node, const std::string& where) {
  constexpr int kMaxClassWeight = 256;
  const std::string forms = "write a mapping of class indices to weights, e.g. {0: 1.0, 1: 5.0}, or a list by "
                            "class, e.g. [1.0, 5.0]";
  auto weight_of = [&](const YAML::Node& v, const std::string& place) {
    double w = 0;
    if (!v.IsScalar() || !YAML::convert<double>::decode(v, w) || !std::isfinite(w) || w < 0)
      throw UserError(where + ": " + place + " must be a number >= 0, got '" + YAML::Dump(v) + "'");
    return w;
  };
  std::vector<double> weights;
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) weights.push_back(weight_of(node[i], "entry " + std::to_string(i)));
  } else if (node.IsMap()) {
    std::set<int> seen;
    for (const auto& kv : node) {
      int c = -1;
      if (!kv.first.IsScalar() || !YAML::convert<int>::decode(kv.first, c) || c < 0 || c >= kMaxClassWeight)
        throw UserError(where + ": key '" + YAML::Dump(kv.first) + "' is not a class index 0.." +
                        std::to_string(kMaxClassWeight - 1) + "; " + forms);
      if (!seen.insert(c).second)  // 1 and 01: the later one would win unseen
        throw UserError(where + ": class " + std::to_string(c) + " is given twice (key '" + YAML::Dump(kv.first) +
                        "'); give each class once");
      if (size_t(c) >= weights.size()) weights.resize(size_t(c) + 1, 1.0);  // Keras: 1 for classes left out
      weights[size_t(c)] = weight_of(kv.second, "class " + std::to_string(c));
    }
  } else {
    throw UserError(where + ": '" + YAML::Dump(node) + "' is not a class weight table; " + forms);
  }
  if (weights.empty()) throw UserError(where + " is empty; " + forms + ", or remove it");
  if (weights.size() > size_t(kMaxClassWeight))
    throw UserError(where + ": has " + std::to_string(weights.size()) + " weights, more than the " +
                    std::to_string(kMaxClassWeight) + " classes a mask can hold");
  return weights;
}

/// The optimizer's class (canonical_optimizer) from node: a name, or a mapping's 'type'.
OptimizerKind optimizer_type(const YAML::Node& node, const std::string& file, const std::string& what) {
  if (node.IsScalar()) {
    const std::optional<OptimizerKind> type = canonical_optimizer(node.Scalar());
    if (!type)
      throw UserError(yaml_location(file, node.Mark()) + ": " + what + ": '" + node.Scalar() + "' " +
                      (python_call_mapping(node.Scalar()).empty()
                           ? "is not an optimizer" + did_you_mean(node.Scalar(), kOptimizers) + "; use one of: " +
                                 join_names(kOptimizers)
                           : "is Python; write the mapping " + python_call_mapping(node.Scalar())));
    return *type;
  }
  ParamReader head(node, file, what);
  require_type(head, "Adam");
  const std::string given = head.get_string("type", std::nullopt);
  const std::optional<OptimizerKind> type = canonical_optimizer(given);
  if (!type)
    head.fail("type", "is '" + given + "'" + did_you_mean(given, kOptimizers) + "; use one of: " +
                          join_names(kOptimizers));
  return *type;
}

/// learning_rate: a number > 0, or a schedule mapping (its rate at step 0 goes in o.learning_rate).
void read_learning_rate(ParamReader& p, const YAML::Node& node, const std::string& file, OptimizerConfig& o) {
  const YAML::Node lr = node["learning_rate"];
  if (lr && lr.IsMap()) {  // a schedule; learning_rate holds its rate at step 0
    p.skip("learning_rate");
    o.schedule = read_schedule(lr, file);
    o.learning_rate = o.schedule.type == ScheduleKind::PiecewiseConstantDecay ? o.schedule.values[0]
                                                                  : o.schedule.initial_learning_rate;
  } else {
    std::string named;  // the longest schedule name in a Python call or a bare class name
    if (lr && lr.IsScalar())
      for (const std::string& name : kSchedules)
        if (lr.Scalar().find(name) != std::string::npos && name.size() > named.size()) named = name;
    if (!named.empty())
      p.fail("learning_rate", "'" + lr.Scalar() + "' is not a number; write the schedule as a mapping {type: " +
                                  named + ", <its Keras arguments as keys>}, e.g. learning_rate: {type: " + named +
                                  ", " + schedule_example(named) + "}");
    o.learning_rate = positive(p, "learning_rate", o.learning_rate);
  }
}

/// decay, weight_decay, use_ema, amsgrad and centered (false on any type).
void read_decays(ParamReader& p, OptimizerConfig& o) {
  const OptimizerKind type = o.type;
  o.decay = p.get_double("decay", o.decay, 0.0);
  if (o.decay > 0 && o.schedule.type != ScheduleKind::None)
    p.fail("decay", "is Keras 2's time-based decay, which a learning_rate schedule replaces; remove 'decay'");
  // Keras: weight_decay=None on every optimizer, 0.004 on AdamW. A rate times
  // the decay of 1 or more would flip or zero every weight each step.
  if (type == OptimizerKind::AdamW && p.has("weight_decay") && !p.given("weight_decay"))
    p.fail("weight_decay", "is null, but AdamW needs a number (Keras's default is 0.004); use Adam for no decay");
  p.skip("weight_decay");  // known (for the unknown-key message) when absent too
  if (p.given("weight_decay")) o.weight_decay = p.get_double("weight_decay", o.weight_decay, 0.0);
  // Keras 3's use_ema is not supported: its default (false) is accepted, true refused.
  if (p.has("use_ema") && p.get_bool("use_ema", false))
    p.fail("use_ema", "is a Keras optimizer argument that is not supported; remove it (docs/config.md, optimizer)");
  // amsgrad (Adam, AdamW) and centered (RMSprop): false is accepted on any type, as before they were read.
  const bool adam = type == OptimizerKind::Adam || type == OptimizerKind::AdamW;
  for (const auto& [key, owner] : {std::pair<const char*, bool>{"amsgrad", adam}, {"centered", type == OptimizerKind::RMSprop}})
    if (!owner && p.has(key) && p.get_bool(key, false))
      p.fail(key, std::string("is an argument of Keras's ") +
                      (std::string(key) == "amsgrad" ? "Adam and AdamW" : "RMSprop") + ", not of " +
                      optimizer_name(type) +
                      "; remove it or change the type");
}

/// clipnorm, global_clipnorm, clipvalue: one of them at most (Keras 3's rule).
void read_clipping(ParamReader& p, OptimizerConfig& o) {
  // null when unset; 0 sets it but clips nothing.
  std::string clip_key;
  for (const char* key : {"clipnorm", "global_clipnorm", "clipvalue"}) {
    p.skip(key);
    if (!p.given(key)) continue;
    if (!clip_key.empty())
      p.fail(key, "is given with '" + clip_key + "'; only one of clipnorm, clipvalue and global_clipnorm can be set "
                  "(Keras's rule): keep one");
    clip_key = key;
    const double v = p.get_double(key, std::nullopt, 0.0);
    (clip_key == "clipnorm" ? o.clipnorm : clip_key == "global_clipnorm" ? o.global_clipnorm : o.clipvalue) = v;
  }
}

/// UserError at weight_decay when learning_rate * weight_decay reaches 1 at
/// the schedule's peak, or a growing schedule would take it there.
void check_weight_decay(ParamReader& p, const OptimizerConfig& o) {
  double peak = o.learning_rate;  // the largest rate a schedule reaches
  for (double v : o.schedule.values) peak = std::max(peak, v);
  if (o.schedule.warmup) peak = std::max(peak, o.schedule.warmup_target);
  if (o.schedule.type == ScheduleKind::PolynomialDecay) peak = std::max(peak, o.schedule.end_learning_rate);
  const bool growing = (o.schedule.type == ScheduleKind::ExponentialDecay && o.schedule.decay_rate > 1) ||
                       (o.schedule.type == ScheduleKind::CosineDecayRestarts && o.schedule.m_mul > 1);
  if (growing && o.weight_decay > 0)
    p.fail("weight_decay", "is given with " + std::string(o.schedule.type == ScheduleKind::ExponentialDecay
                                                              ? "an ExponentialDecay whose decay_rate > 1"
                                                              : "a CosineDecayRestarts whose m_mul > 1") +
                               ": the rate grows without bound, and once learning_rate * weight_decay reaches 1 "
                               "every step zeroes the weights; remove weight_decay or use a schedule that does not "
                               "grow");
  if (peak * o.weight_decay >= 1.0)
    p.fail("weight_decay", "times learning_rate must be below 1 (each step multiplies the weights by 1 - "
                           "learning_rate * weight_decay); Keras's AdamW default is 0.004");
}

/// The arguments of o.type's own: SGD's momentum and nesterov, Adam's betas,
/// epsilon and amsgrad, RMSprop's rho, momentum, epsilon and centered.
void read_type_arguments(ParamReader& p, OptimizerConfig& o) {
  const OptimizerKind type = o.type;
  if (type == OptimizerKind::SGD) {
    o.momentum = p.get_double("momentum", o.momentum, 0.0, 1.0);
    o.nesterov = p.get_bool("nesterov", o.nesterov);
  } else if (type == OptimizerKind::Adam || type == OptimizerKind::AdamW) {
    for (auto [key, beta] : {std::pair<std::string, double*>{"beta_1", &o.beta_1}, {"beta_2", &o.beta_2}}) {
      *beta = p.get_double(key, *beta);
      if (!(*beta >= 0.0 && *beta < 1.0))
        p.fail(key, "must be in [0, 1) (Adam divides by 1 - " + key + "^t), got " + fmt::format("{}", *beta));
    }
    o.epsilon = positive(p, "epsilon", o.epsilon);
    o.amsgrad = p.get_bool("amsgrad", o.amsgrad);
  } else {
    o.rho = p.get_double("rho", o.rho, 0.0, 1.0);
    o.momentum = p.get_double("momentum", o.momentum, 0.0, 1.0);
    o.epsilon = positive(p, "epsilon", o.epsilon);
    o.centered = p.get_bool("centered", o.centered);
  }
}

// optimizer: a name, or a mapping {type, <that type's Keras arguments>}.
OptimizerConfig read_optimizer(const YAML::Node& node, const std::string& file) {
  OptimizerConfig o;
  const std::string what = "training.optimizer";
  const OptimizerKind type = optimizer_type(node, file, what);
  o.type = type;
  o.learning_rate = type == OptimizerKind::SGD ? 0.01 : 0.001;  // Keras defaults
  o.weight_decay = type == OptimizerKind::AdamW ? 0.004 : 0.0;
  if (node.IsScalar()) return o;
  ParamReader p(node, file, what + " (" + optimizer_name(type) + ")");
  p.skip("type");
  read_learning_rate(p, node, file, o);
  read_decays(p, o);
  read_clipping(p, o);
  check_weight_decay(p, o);
  read_type_arguments(p, o);
  p.finish();  // e.g. beta_1 given to SGD
  return o;
}

/// A Keras metric class written as a name, as Keras logs it: Precision -> precision, Recall -> recall,
/// BinaryIoU -> binary_io_u, BinaryAccuracy -> binary_accuracy, MeanIoU -> mean_io_u, AUC -> auc; other
/// names unchanged.
std::string keras_metric_name(const std::string& name) {
  static const std::pair<const char*, const char*> classes[] = {
      {"Precision", "precision"},   {"Recall", "recall"},       {"BinaryIoU", "binary_io_u"},
      {"BinaryAccuracy", "binary_accuracy"}, {"MeanIoU", "mean_io_u"}, {"AUC", "auc"}};
  for (const auto& [cls, logged] : classes)
    if (name == cls) return logged;
  return name;
}

/// The metrics a binary (categorical false) or categorical loss takes.
std::vector<std::string> metrics_for(bool categorical) {
  std::vector<std::string> out;
  for (const std::string& m : metric_names())
    if (!categorical || !binary_only_metric(m)) out.push_back(m);
  return out;
}

/// A training.metrics entry written as a mapping with arguments ({type: MeanIoU, num_classes: 2}): the
/// error saying which form trainer takes.
[[noreturn]] void metric_as_mapping(const std::string& at, const std::string& type, bool categorical) {
  const std::string lower = ascii_lower(type);
  const std::string name = keras_metric_name(type);
  std::string fix;
  if (lower.rfind("meaniou", 0) == 0 || lower.rfind("binaryiou", 0) == 0)
    fix = categorical ? "MeanIoU: the number of classes comes from the model"
                      : "BinaryIoU: the mean IoU of both classes at threshold 0.5";
  else if (name == "auc")
    fix = "AUC: Keras's AUC() with its defaults, 200 thresholds and curve ROC; other arguments are not offered";
  else if (std::find(metric_names().begin(), metric_names().end(), name) != metric_names().end())
    fix = type + ": at threshold 0.5, Keras's default";
  else
    fix = "e.g. MeanIoU with a categorical loss, BinaryIoU with a binary one";
  throw UserError(at + "'" + type + "' is written with arguments; trainer's metrics take none: write its name (" +
                  fix + ")");
}

/// Checks that m (after keras_metric_name) is a metric; the list in the error is the metrics of a binary
/// or categorical loss.
void check_metric(const std::string& at, const std::string& m, bool categorical) {
  const std::vector<std::string> known = metrics_for(categorical);
  // A binary metric with a categorical model, or MeanIoU with a binary one: validate_for_training
  // says so once the model's output is known.
  if (std::find(metric_names().begin(), metric_names().end(), m) != metric_names().end()) return;
  const bool keras_accuracy = m == "sparse_categorical_accuracy" || m == "categorical_accuracy";
  // Python's tf.keras.metrics.MeanIoU(num_classes=3): the class name, for the hints.
  std::string bare = m.substr(0, m.find('('));
  if (const size_t dot = bare.rfind('.'); dot != std::string::npos) bare = bare.substr(dot + 1);
  const std::string lower = ascii_lower(bare);
  const bool iou = lower.rfind("meaniou", 0) == 0 || lower.rfind("binaryiou", 0) == 0;
  throw UserError(at + "'" + m + "' is not a metric" +
                  (keras_accuracy ? " (Keras's '" + m + "' is 'accuracy' here)" : did_you_mean(bare, known)) +
                  (iou ? " (write Keras's class name alone, MeanIoU with a categorical loss or BinaryIoU with a "
                         "binary one: the number of classes comes from the model; docs/config.md)"
                       : "") +
                  "; use any of: " + join_names(known));
}

/// training.metrics; `categorical`: the loss is a categorical one, whose
/// metrics leave out the binary ones (named in the error's list only for
/// binary losses).
std::vector<std::string> read_metrics(const YAML::Node& node, const std::string& file, bool categorical) {
  std::vector<YAML::Node> items;
  if (node.IsScalar()) items.push_back(node);
  else if (node.IsSequence())
    for (const auto& e : node) items.push_back(e);
  else
    throw UserError(yaml_location(file, node.Mark()) +
                    ": training.metrics: must be a list of names, e.g. [mean_iou]");
  std::vector<std::string> out;
  for (const auto& e : items) {
    std::string at = yaml_location(file, e.Mark()) + ": training.metrics: ";
    const bool typed = e.IsMap() && e["type"] && e["type"].IsScalar();
    if (typed && e.size() > 1) metric_as_mapping(at, e["type"].Scalar(), categorical);
    if (!e.IsScalar() && !typed) throw UserError(at + "each entry must be a metric name");
    const std::string m = keras_metric_name(typed ? e["type"].Scalar() : e.Scalar());  // {type: AUC} is AUC
    check_metric(at, m, categorical);
    if (std::find(out.begin(), out.end(), m) != out.end())
      throw UserError(at + "'" + m + "' is listed twice");
    out.push_back(m);
  }
  return out;
}

/// epochs, initial_epoch and validation_freq: Keras's fit() arguments of the same names.
void read_epochs(ParamReader& p, TrainingConfig& t, bool has_validation) {
  t.epochs = p.get_int("epochs", t.epochs, 1);
  t.initial_epoch = p.get_int("initial_epoch", 0, 0);
  if (t.initial_epoch >= t.epochs)
    p.fail("initial_epoch", "is " + std::to_string(t.initial_epoch) + ", which leaves no epoch to train: epochs (" +
                                std::to_string(t.epochs) + ") is the last epoch, counted from the start as in Keras's "
                                "fit(); e.g. epochs: " + std::to_string(t.initial_epoch + t.epochs) +
                                " trains " + std::to_string(t.epochs) + " more");
  if (!p.given("validation_freq")) {
    p.skip("validation_freq");  // known when absent too (unknown-key suggestions)
    return;
  }
  const YAML::Node v = p.get_node("validation_freq");
  const std::string form = "must be a whole number of epochs (2: after every second epoch) or a list of epochs "
                           "(1-based, e.g. [1, 5, 10])";
  if (v.IsSequence()) {
    for (const auto& e : v) {
      int epoch = 0;
      if (!e.IsScalar() || !YAML::convert<int>::decode(e, epoch) || epoch < 1)
        p.fail("validation_freq", form + ", got the entry '" + YAML::Dump(e) + "'");
      t.validation_epochs.push_back(epoch);
    }
    if (t.validation_epochs.empty()) p.fail("validation_freq", form + ", got an empty list");
    if (std::none_of(t.validation_epochs.begin(), t.validation_epochs.end(),
                     [&](int e) { return e > t.initial_epoch && e <= t.epochs; }))
      p.fail("validation_freq", "names no epoch this run trains (" + std::to_string(t.initial_epoch + 1) + " to " +
                                    std::to_string(t.epochs) + "), so it would never validate; list some of them");
  } else {
    t.validation_freq = p.get_int("validation_freq", 1, 1);
  }
  if (!has_validation && (t.validation_freq != 1 || !t.validation_epochs.empty()))
    p.fail("validation_freq", "says when to validate, but there is no validation data; set data.validation_split "
                              "(e.g. 0.1) or data.validation_images and data.validation_masks, or remove it");
}

}  // namespace

TrainingConfig read_training_section(const YAML::Node& node, const std::string& file,
                                     bool has_validation) {
  ParamReader p(node, file, "training");
  TrainingConfig t;
  // Keras's fit() arguments that belong to the data section here (before the
  // callbacks, whose val_* monitors would otherwise report missing validation data).
  for (const char* key : {"validation_split", "shuffle"})
    if (p.has(key))
      p.fail(key, "is a data setting here (Keras's fit() argument); move it to the data section: data." +
                      std::string(key));
  // The devices are chosen per launch, not per model (Keras's multi_gpu_model(gpus=...) took them in code).
  for (const char* flag : {"gpus", "threads"})
    if (p.has(flag))
      p.fail(flag, std::string("is the command-line flag --") + flag + " here (e.g. trainer --config unet.yaml --" +
                       flag + (flag[0] == 'g' ? " all" : " 8") + "), not a config key; remove it");
  read_epochs(p, t, has_validation);
  if (p.given("batch_size_per_device")) {
    if (p.given("batch_size"))
      p.fail("batch_size_per_device", "and batch_size both set the batch: give batch_size (the global batch, "
                                      "split over the towers) or batch_size_per_device (each tower's), not both");
    t.batch_size_per_device = p.get_int("batch_size_per_device", std::nullopt, 1);
  }
  p.skip("batch_size_per_device");  // known when absent too (unknown-key suggestions)
  t.batch_size = p.get_int("batch_size", t.batch_size, 1);
  if (p.given("steps_per_epoch")) t.steps_per_epoch = p.get_int("steps_per_epoch", std::nullopt, 1);
  p.skip("steps_per_epoch");  // known when absent too (unknown-key suggestions)
  if (YAML::Node seed = p.get_node("seed")) {
    if (!seed.IsScalar() || seed.Scalar().empty() || seed.Scalar()[0] == '-' ||
        !YAML::convert<uint64_t>::decode(seed, t.seed))
      p.fail("seed", "must be a non-negative integer, got '" + YAML::Dump(seed) + "'" +
                         (YAML::Dump(seed) == "None" ? " (Python's None is YAML's null, which leaves the default 0)"
                                                     : ""));
  }
  t.loss = read_loss(p);
  p.skip("class_weight");  // known when absent too (unknown-key suggestions)
  if (p.given("class_weight")) {
    t.class_weight_where = p.where("class_weight") + ": training.class_weight";
    t.class_weight = read_class_weight(p.get_node("class_weight"), t.class_weight_where);
  }
  if (p.given("metrics")) {  // null: Keras's None, no metrics
    const YAML::Node metrics = p.get_node("metrics");
    t.metrics = read_metrics(metrics, file, is_categorical(t.loss.kind));
    t.metrics_where = yaml_location(file, metrics.Mark()) + ": training.metrics";
  }
  if (YAML::Node opt = p.get_node("optimizer")) t.optimizer = read_optimizer(opt, file);
  if (p.given("callbacks")) read_callbacks(p.get_node("callbacks"), file, t, has_validation);  // null: none
  t.learning_rate_scaling = LearningRateScaling(
      choice_index(p.get_string("learning_rate_scaling", std::string("none"), scaling_names()), scaling_names()));
  if (t.learning_rate_scaling != LearningRateScaling::None && t.batch_size_per_device == 0)
    p.fail("learning_rate_scaling", "scales a learning rate tuned for one device's batch to the global batch: give "
                                    "that batch as training.batch_size_per_device (the global batch is then it "
                                    "times the towers), or leave learning_rate_scaling out");
  if (t.learning_rate_scaling != LearningRateScaling::None && t.optimizer.schedule.type != ScheduleKind::None)
    p.fail("learning_rate_scaling", "does not scale a learning_rate schedule (" + std::string(schedule_name(t.optimizer.schedule.type)) +
                                    "): scale the schedule's rates in the config, or leave learning_rate_scaling out");
  t.learning_rate_warmup_epochs = p.get_double("learning_rate_warmup_epochs", 0, 0, 1e6);
  if (t.learning_rate_warmup_epochs > 0 && t.learning_rate_scaling == LearningRateScaling::None)
    p.fail("learning_rate_warmup_epochs", "ramps the learning rate up to the scaled one: set learning_rate_scaling "
                                          "(linear or sqrt), or for a warm-up of its own use a CosineDecay schedule "
                                          "with warmup_target and warmup_steps");
  const std::string precision = p.get_string("precision", "tf32", {"fp32", "tf32", "bf16"});
  t.precision = precision_named(precision);
  t.collective_timeout = p.get_double("collective_timeout", t.collective_timeout, 1, 1e7);
  t.cuda_graphs = p.get_bool("cuda_graphs", false);
  t.output_dir = p.get_path("output_dir", t.output_dir);
  if (t.output_dir.empty()) p.fail("output_dir", "must not be empty; e.g. 'runs/unet'");
  if (p.given("initial_weights")) {  // a path, or Keras's load_weights arguments {filepath, skip_mismatch}
    t.initial_weights_where = p.where("initial_weights") + ": training.initial_weights";
    const YAML::Node v = p.get_node("initial_weights");
    if (v.IsMap()) {
      ParamReader w(v, file, "training.initial_weights");
      t.initial_weights = w.get_path("filepath", std::nullopt);
      t.initial_weights_skip_mismatch = w.get_bool("skip_mismatch", false);
      w.skip("by_name");  // Keras 2's h5 switch for skip_mismatch: weights are always matched by layer name here
      if (t.initial_weights.empty()) w.fail("filepath", "must not be empty: a checkpoint, e.g. 'runs/pre/final.h5'");
      w.finish();
    } else {
      t.initial_weights = p.get_path("initial_weights", std::nullopt);
      if (t.initial_weights.empty())
        p.fail("initial_weights", "must not be empty: a checkpoint of this model, e.g. 'runs/pretrained/final.h5', "
                                  "a mapping {filepath: ..., skip_mismatch: true}, or null for the initializers");
    }
  }
  p.skip("initial_weights");  // known when absent too (unknown-key suggestions)
  p.finish();
  return t;
}

const char* optimizer_name(OptimizerKind kind) { return kOptimizers[size_t(kind)].c_str(); }

const char* schedule_name(ScheduleKind kind) {
  return kind == ScheduleKind::None ? "none" : kSchedules[size_t(kind) - 1].c_str();
}

}  // namespace trainer
