#include "keras/keras_compile.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "config/config.h"
#include "core/ascii.h"
#include "core/error.h"
#include "keras/keras_layers.h"

namespace trainer {

namespace {

using json = KerasJson;

/// Keras's optimizer arguments that a config need not state (their defaults and Keras-only options left off).
bool optimizer_default(const std::string& key, const json& v) {
  static const std::vector<std::pair<const char*, json>> defaults = {
      {"use_ema", false}, {"ema_momentum", 0.99}, {"is_legacy_optimizer", false}, {"jit_compile", true},
      {"jit_compile", false}, {"decay", 0.0}, {"beta_1", 0.9}, {"beta_2", 0.999}, {"epsilon", 1e-7},
      {"amsgrad", false}, {"momentum", 0.0}, {"nesterov", false}, {"rho", 0.9}, {"centered", false},
  };
  if (key == "name" || v.is_null()) return true;
  for (const auto& [k, d] : defaults)
    if (key == k && (v == d || (v.is_number() && d.is_number() && v.get<double>() == d.get<double>()))) return true;
  return false;
}

/// An argument of a nested object (a schedule): all but its name and None.
bool keep_argument(const std::string& key, const json& v) { return key != "name" && !v.is_null(); }

/// A Keras object {"class_name": C, "config": {...}} as {type: C, <arguments kept by keep>}; an
/// argument that is such an object itself (a learning-rate schedule) likewise, its name left out.
template <typename Keep>
YAML::Node object_node(const json& v, Keep keep) {
  YAML::Node m(YAML::NodeType::Map);
  m["type"] = json_text(v, "class_name");
  const json config = json_at(v, "config", json::object());
  if (!config.is_object()) return m;
  for (const auto& [key, value] : config.items()) {
    if (!keep(key, value)) continue;
    const bool object = value.is_object() && !json_text(value, "class_name").empty();
    m[key] = object ? object_node(value, keep_argument) : yaml_value(value);
  }
  return m;
}

/// A function of the user's own: Keras 3 {"class_name": "function", "config": "name"}; "" otherwise.
std::string user_function(const json& v) {
  return json_text(v, "class_name") == "function" && v.contains("config") && v["config"].is_string()
             ? v["config"].get<std::string>()
             : std::string();
}

void translate_optimizer(const json& o, CompileTranslation& t) {
  if (o.is_string()) {
    t.lines.push_back("optimizer: " + yaml_flow(YAML::Node(o.get<std::string>())));
    return;
  }
  YAML::Node m = object_node(o, [](const std::string& k, const json& v) { return !optimizer_default(k, v); });
  // tf.keras 2.11+ registers its optimizers as "Custom>Adam".
  const std::string type = m["type"].as<std::string>();
  if (type.rfind("Custom>", 0) == 0) m["type"] = type.substr(7);
  t.lines.push_back("optimizer: " + yaml_flow(m));
}

void translate_loss(json loss, CompileTranslation& t) {
  if (loss.is_array() && loss.size() == 1) loss = loss[0];  // compile(loss=[...]) of a one-output model
  if (loss.is_object() && json_text(loss, "class_name").empty() && loss.size() == 1)
    loss = loss.begin().value();  // Keras 2: {output_name: loss}
  const std::string own = user_function(loss);
  if (!own.empty() || (loss.is_object() && json_text(loss, "class_name").empty())) {
    t.problems.push_back("loss '" + (own.empty() ? loss.dump() : own) + "' is a function of your own; trainer's "
                         "losses are Keras's and a few more (docs/config.md: e.g. bce_dice for binary crossentropy "
                         "plus dice): import with --no-compile and set training.loss in the config written");
    return;
  }
  if (loss.is_string()) {
    t.lines.push_back("loss: " + yaml_flow(YAML::Node(loss.get<std::string>())));
    return;
  }
  if (!loss.is_object()) {
    t.problems.push_back("loss " + loss.dump() + " is not one loss; trainer models have one output and one loss");
    return;
  }
  // tf.keras 2's loss objects name their function ("fn"), which the class says already.
  const auto keep = [](const std::string& k, const json& v) {
    return k != "name" && k != "fn" && !v.is_null() && !(k == "reduction" && v == "sum_over_batch_size") &&
           !(k == "from_logits" && v == false) && !(k == "label_smoothing" && v == 0.0) && !(k == "axis" && v == -1);
  };
  t.lines.push_back("loss: " + yaml_flow(object_node(loss, keep)));
}

/// What the translated loss says about the model's output, for the metrics that depend on it.
struct LossKind {
  bool categorical = false;  ///< A softmax over classes (a categorical crossentropy).
  bool from_logits = false;  ///< The output is logits (the loss's from_logits).
};

/// The LossKind of t's translated "loss: ..." line (a binary sigmoid output without one).
LossKind loss_kind(const CompileTranslation& t) {
  LossKind k;
  for (const std::string& line : t.lines)
    if (line.rfind("loss:", 0) == 0) {
      const std::string lower = ascii_lower(line);
      k.categorical = lower.find("categorical") != std::string::npos;
      k.from_logits = lower.find("from_logits: true") != std::string::npos;
    }
  return k;
}

/// Keras's MeanIoU(num_classes=K, ...) config c as trainer's name, by the loss: mean_io_u (the argmax of the
/// softmax) with a categorical one, binary_iou with a binary one (2 classes; Keras casts a sigmoid's
/// probabilities to class ids there); "" with a problem for more classes on a binary loss.
std::string mean_iou_name(const json& c, const LossKind& loss, CompileTranslation& t) {
  const json classes = json_at(c, "num_classes", 0);
  if (loss.categorical) {
    if (json_at(c, "sparse_y_pred", true) != false)
      t.notes.push_back("metric MeanIoU(num_classes=" + classes.dump() + ") takes class ids (sparse_y_pred=True), "
                        "which Keras casts the softmax's probabilities to; trainer's MeanIoU takes their argmax, as "
                        "MeanIoU(sparse_y_pred=False) does");
    return "mean_io_u";
  }
  if (classes == 2) {
    t.notes.push_back("metric MeanIoU(num_classes=2) is taken as binary_iou, the mean IoU of background and "
                      "foreground at threshold 0.5 (Keras casts a sigmoid's probabilities to class ids, which makes "
                      "nearly every pixel background there; docs/config.md)");
    return "binary_iou";
  }
  t.problems.push_back("metric MeanIoU(num_classes=" + classes.dump() + ") with a binary loss: a sigmoid output has "
                       "2 classes; import with --no-compile and list binary_iou (or mean_iou) under training.metrics");
  return "";
}

/// Whether a Keras AUC config is the default AUC(), the one trainer computes (from_logits as the loss has it:
/// trainer's AUC is of the sigmoid of the logits).
bool keras_default_auc(const json& c, const LossKind& loss) {
  return json_at(c, "num_thresholds", 200) == 200 && json_at(c, "curve", "ROC") == "ROC" &&
         json_at(c, "summation_method", "interpolation") == "interpolation" &&
         json_at(c, "multi_label", false) == false && json_at(c, "from_logits", false) == loss.from_logits &&
         json_at(c, "thresholds").is_null() && json_at(c, "label_weights").is_null() &&
         json_at(c, "num_labels").is_null();
}

/// A Keras metric as one of trainer's names; "" with a problem when there is none.
std::string metric_name(const json& m, const LossKind& loss, CompileTranslation& t) {
  const std::string own = user_function(m);
  std::string name = m.is_string() ? m.get<std::string>() : own;
  // tf.keras 2: {"class_name": "MeanMetricWrapper", "config": {"name": "accuracy", "fn": "binary_accuracy"}},
  // logged under its name.
  if (json_text(m, "class_name") == "MeanMetricWrapper") {
    const json c = json_at(m, "config", json::object());
    name = json_text(c, "name") == "accuracy" ? "accuracy" : json_text(c, "fn");
  }
  if (name == "accuracy" || name == "acc") return "accuracy";
  if (name == "binary_accuracy" || name == "precision" || name == "recall" || name == "binary_iou" ||
      name == "dice")
    return name;
  if (name == "mean_iou") {
    t.notes.push_back("metric 'mean_iou' (a function of your own) is taken as trainer's mean_iou: the nuclei's IoU "
                      "averaged over the thresholds 0.5 to 0.95; the DSB 2018 kernels' version averages in the "
                      "background's IoU too and reads higher (docs/from_keras.md; binary_iou is the nearer)");
    return "mean_iou";
  }
  const std::string cls = json_text(m, "class_name");
  const json c = json_at(m, "config", json::object());
  const bool half = json_at(c, "thresholds").is_null() || json_at(c, "thresholds") == 0.5;
  if ((cls == "Precision" || cls == "Recall") && half && json_at(c, "top_k", json()).is_null() &&
      json_at(c, "class_id", json()).is_null())
    return cls == "Precision" ? "precision" : "recall";
  if (cls == "BinaryAccuracy" && json_at(c, "threshold", 0.5) == 0.5) return "binary_accuracy";
  if (cls == "BinaryIoU" && json_at(c, "threshold", 0.5) == 0.5 && json_at(c, "target_class_ids", json{0, 1}) == json{0, 1})
    return "binary_io_u";
  if (cls == "MeanIoU") return mean_iou_name(c, loss, t);
  if (cls == "AUC") {
    if (keras_default_auc(c, loss)) return "auc";
    t.problems.push_back("metric AUC " + c.dump() + " differs from Keras's default AUC(), the one trainer computes "
                         "(200 thresholds, curve ROC, summation_method interpolation); import with --no-compile and "
                         "list auc under training.metrics");
    return "";
  }
  if (name == "auc" || name == "AUC") return "auc";
  t.problems.push_back("metric " + (name.empty() ? (cls.empty() ? m.dump() : cls) : "'" + name + "'") +
                       " is not one trainer computes; import with --no-compile and list those it has (mean_iou, "
                       "dice, accuracy, precision, recall, binary_iou, ...) under training.metrics");
  return "";
}

void translate_metrics(json metrics, CompileTranslation& t) {
  const LossKind loss = loss_kind(t);
  if (metrics.is_object()) {  // Keras 2: {output_name: [...]}; one output
    json all = json::array();
    for (const auto& [k, v] : metrics.items()) all.push_back(v);
    metrics = all;
  }
  if (!metrics.is_array()) metrics = json::array({metrics});
  std::vector<std::string> names;
  for (const json& m : metrics) {
    if (m.is_array()) {  // one list per output
      for (const json& inner : m)
        if (const std::string n = metric_name(inner, loss, t); !n.empty()) names.push_back(n);
    } else if (const std::string n = metric_name(m, loss, t); !n.empty()) {
      names.push_back(n);
    }
  }
  if (names.empty()) return;
  // MeanIoU(num_classes=2) taken as binary_iou beside BinaryIoU (logged binary_io_u): the same value twice.
  const auto listed = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
  if (listed("binary_iou") && listed("binary_io_u")) {
    names.erase(std::remove(names.begin(), names.end(), "binary_iou"), names.end());
    t.notes.push_back("binary_iou (from MeanIoU) is left out: BinaryIoU, logged binary_io_u, is the same value");
  }
  YAML::Node list(YAML::NodeType::Sequence);
  for (const std::string& n : names) {
    bool seen = false;
    for (const auto& item : list) seen |= item.as<std::string>() == n;
    if (!seen) list.push_back(n);
  }
  t.lines.push_back("metrics: " + yaml_flow(list));
}

/// compile's arguments that trainer has no counterpart for, as problems when they change anything.
void check_unsupported(const json& compile, CompileTranslation& t) {
  const json weights = json_at(compile, "loss_weights");
  const bool one = weights.is_null() || weights == 1 || weights == json{1} ||
                   (weights.is_array() && weights.size() == 1 && weights[0] == 1.0);
  if (!one)
    t.problems.push_back("compile's loss_weights " + weights.dump() + " scale the loss (and so the steps), which "
                         "trainer does not do; drop them, or scale the learning rate instead");
  const json weighted = json_at(compile, "weighted_metrics");
  if (!weighted.is_null() && !(weighted.is_array() && weighted.empty()))
    t.problems.push_back("compile's weighted_metrics " + weighted.dump() + " need sample weights, which trainer does "
                         "not take; list those metrics under training.metrics");
}

}  // namespace

CompileTranslation translate_compile(const json& compile) {
  CompileTranslation t;
  if (!compile.is_object()) return t;
  check_unsupported(compile, t);
  if (compile.contains("loss") && !compile["loss"].is_null()) translate_loss(compile["loss"], t);
  const json optimizer = compile.contains("optimizer") ? compile["optimizer"] : json_at(compile, "optimizer_config", json());
  if (!optimizer.is_null()) translate_optimizer(optimizer, t);
  if (compile.contains("metrics") && !compile["metrics"].is_null()) translate_metrics(compile["metrics"], t);
  const std::vector<std::string> found = check_training_lines(t.lines);
  t.problems.insert(t.problems.end(), found.begin(), found.end());
  return t;
}

std::vector<std::string> check_training_lines(const std::vector<std::string>& lines) {
  std::vector<std::string> problems;
  for (const std::string& line : lines) {
    const std::string text =
        "model:\n  layers:\n    - {type: Input, shape: [8, 8, 1]}\n    - {type: Conv2D, filters: 1, kernel_size: 1, "
        "activation: sigmoid}\ndata: {images: i, masks: m}\ntraining:\n  " + line + "\n";
    try {
      (void)parse_config(text, "imported");
    } catch (const UserError& e) {
      const std::string m = e.what();
      const size_t at = m.find("training");  // the place in the snippet checked says nothing
      problems.push_back(at == std::string::npos ? m : m.substr(at));
    }
  }
  return problems;
}

}  // namespace trainer
