// training.loss: a loss name (Keras's string identifiers, or its class names),
// or a mapping with Keras's loss class and arguments:
//   loss: {type: SparseCategoricalCrossentropy, from_logits: true, ignore_class: 255}
#include <algorithm>
#include <cmath>
#include <set>

#include "config/params.h"
#include "config/sections.h"
#include "core/error.h"

namespace trainer {

namespace {

/// Every loss kind with its name (loss_name) and its keras.losses class ("": none).
struct LossEntry {
  LossKind kind;
  const char* name;
  const char* keras_class;
};
const LossEntry kLosses[] = {
    {LossKind::BinaryCrossentropy, "binary_crossentropy", "BinaryCrossentropy"},
    {LossKind::Dice, "dice", ""},  // Keras 3's Dice is KerasDice: 'dice' is the Keras U-Net examples' soft Dice
    {LossKind::BceDice, "bce_dice", ""},
    {LossKind::BinaryFocalCrossentropy, "binary_focal_crossentropy", "BinaryFocalCrossentropy"},
    {LossKind::SparseCategoricalCrossentropy, "sparse_categorical_crossentropy", "SparseCategoricalCrossentropy"},
    {LossKind::CategoricalCrossentropy, "categorical_crossentropy", "CategoricalCrossentropy"},
    {LossKind::CategoricalFocalCrossentropy, "categorical_focal_crossentropy", "CategoricalFocalCrossentropy"},
    {LossKind::KerasDice, "Dice", "Dice"},
    {LossKind::Tversky, "tversky", "Tversky"}};

/// The losses with Keras's label_smoothing argument.
bool smooths_labels(LossKind kind) {
  return kind == LossKind::BinaryCrossentropy || kind == LossKind::CategoricalCrossentropy || is_focal(kind);
}

/// The loss `type` names (a function name or a Keras class), or nullopt.
std::optional<LossKind> loss_function(const std::string& type) {
  for (const LossEntry& e : kLosses)
    if (type == e.name || (*e.keras_class && type == e.keras_class)) return e.kind;
  return std::nullopt;
}

/// Every name training.loss takes: the functions, then the classes.
std::vector<std::string> known_losses() {
  std::vector<std::string> known;
  for (const LossEntry& e : kLosses)
    if (e.kind != LossKind::KerasDice) known.push_back(e.name);  // named by its class below
  for (const LossEntry& e : kLosses)
    if (*e.keras_class) known.push_back(e.keras_class);
  return known;
}

/// Why `type` is not a loss here, with the fix.
std::string unknown_loss(const std::string& type) {
  const std::vector<std::string> known = known_losses();
  if (const std::string mapping = python_call_mapping(type); !mapping.empty())
    return "is '" + type + "', which is Python; write the mapping " + mapping + " (docs/config.md, loss)";
  return "is '" + type + "'" + did_you_mean(type, known) + "; use one of: " + join_names(known);
}


/// Dice's and tversky's axis into l.per_image: true for the axes of one
/// image ([1, 2, 3], in any order, negative ones counted from the end; [1, 2]
/// is the same on one channel, and sets l.axis_leaves_channels), false for
/// None (absent or null) or every axis ([0, 1, 2, 3]): one ratio over the
/// whole batch.
void read_overlap_axis(ParamReader& p, LossConfig& l) {
  if (!p.given("axis")) return;
  const YAML::Node v = p.get_node("axis");
  const std::string takes = keras_loss_class(l.kind) +
                            " takes None (the default: one ratio over every pixel of the batch, as Keras's) or "
                            "[1, 2, 3] (one ratio per image, then the mean over the images)";
  if (v.IsScalar() && v.Scalar() == "None")
    p.fail("axis", "is None, Python's word; YAML's is null: write 'axis: null' or leave the key out (" + takes + ")");
  std::set<int> axes;
  bool ok = v.IsSequence() && v.size() > 0;
  for (size_t i = 0; ok && i < v.size(); ++i) {
    int a = 0;
    ok = v[i].IsScalar() && YAML::convert<int>::decode(v[i], a) && a >= -4 && a <= 3;
    ok = ok && axes.insert(a < 0 ? a + 4 : a).second;  // a repeated axis, as Keras's backends refuse
  }
  l.axis_leaves_channels = ok && axes == std::set<int>{1, 2};
  l.per_image = ok && (axes == std::set<int>{1, 2, 3} || l.axis_leaves_channels);
  if (l.per_image || (ok && axes == std::set<int>{0, 1, 2, 3})) return;
  p.fail("axis", "is " + YAML::Dump(v) + "; " + takes + ", each axis once");
}

// For Keras's list of losses, one per model output: the fix for a model of one output.
std::string list_of_losses_hint(const YAML::Node& node) {
  if (!node.IsSequence()) return "";
  std::set<std::string> names;
  for (const auto& e : node)
    if (e.IsScalar()) names.insert(e.Scalar());
  return std::string("; a list gives one loss per output, and the model has one: write one loss") +
         (names.count("binary_crossentropy") && names.count("dice") ? " (bce_dice adds binary_crossentropy and dice)"
                                                                    : "");
}

/// The loss class of a mapping (its 'type'; Keras's class_name and name forms refused with the fix).
std::string loss_class(ParamReader& p, const YAML::Node& node) {
  if (p.has("class_name"))
    p.fail("class_name", "is Keras's serialized form; write the loss as {type: " +
                             (node["class_name"].IsScalar() ? node["class_name"].Scalar()
                                                            : std::string("BinaryCrossentropy")) +
                             ", <the keys of its 'config'>}, e.g. {type: BinaryCrossentropy, from_logits: true}");
  if (!p.has("type") && p.has("name"))
    p.fail("'type' is required; the loss class goes in 'type' (e.g. 'type: BinaryCrossentropy'), not in 'name'");
  return p.get_string("type", std::nullopt);
}

/// Marks every key of l.kind's class known (for the unknown-key message), read or not.
void declare_keys(ParamReader& p, const LossConfig& l) {
  for (const char* key : {"name", "from_logits", "reduction", "axis"}) p.skip(key);
  if (smooths_labels(l.kind)) p.skip("label_smoothing");
  if (is_focal(l.kind))
    for (const char* key : {"gamma", "alpha"}) p.skip(key);
  if (l.kind == LossKind::BinaryFocalCrossentropy) p.skip("apply_class_balancing");
  if (l.kind == LossKind::SparseCategoricalCrossentropy) p.skip("ignore_class");
  if (l.kind == LossKind::SparseCategoricalCrossentropy && p.has("label_smoothing"))
    p.fail("label_smoothing", "is not an argument of Keras's SparseCategoricalCrossentropy; for smoothed labels use "
                              "type: CategoricalCrossentropy, which here takes the same class-index masks");
}

/// reduction (Keras's default only) and axis (the channels; an overlap loss's own, read_overlap_axis).
void read_reduction_and_axis(ParamReader& p, LossConfig& l) {
  if (p.given("reduction")) {  // Keras 3's default (and its alias mean), or tf.keras 2's
    const std::string r = p.get_string("reduction", std::nullopt);
    if (r != "sum_over_batch_size" && r != "mean" && r != "auto")
      p.fail("reduction", "is '" + r + "'; only Keras's default, sum_over_batch_size (the mean over the batch's "
                          "pixels), is supported: remove the key");
  }
  if (is_overlap(l.kind))
    read_overlap_axis(p, l);
  else if (p.given("axis") && (!p.get_node("axis").IsScalar() || p.get_int("axis", std::nullopt) != -1))
    p.fail("axis", std::string("must be -1, the channels (the only axis a loss runs over here)") +
                       (l.kind == LossKind::Dice ? "; for Keras 3's Dice, which takes axis None or [1, 2, 3], write "
                                               "type: Dice (this lower-case dice is the per-image soft Dice)"
                                             : ""));
}

/// tversky's alpha and beta, not both 0.
void read_tversky(ParamReader& p, LossConfig& l) {
  if (l.kind != LossKind::Tversky) return;
  l.tversky_alpha = p.get_double("alpha", 0.5, 0.0);
  l.tversky_beta = p.get_double("beta", 0.5, 0.0);
  if (l.tversky_alpha == 0.0 && l.tversky_beta == 0.0)
    p.fail("alpha", "and 'beta' are both 0, which makes the loss 1 - I / (I + 1e-7): about 0 whatever the "
                    "prediction, so nothing would train; give either a weight > 0 (0.5 and 0.5 is Dice's ratio)");
}

/// A focal loss's gamma, alpha (one number, or CategoricalFocalCrossentropy's list per class) and
/// BinaryFocalCrossentropy's apply_class_balancing.
void read_focal(ParamReader& p, LossConfig& l) {
  if (!is_focal(l.kind)) return;
  l.gamma = p.get_double("gamma", 2.0, 0.0);
  l.alpha_given = p.given("alpha");
  if (l.alpha_given && p.get_node("alpha").IsSequence()) {
    if (l.kind != LossKind::CategoricalFocalCrossentropy)
      p.fail("alpha", "is a list, which only CategoricalFocalCrossentropy takes (one factor per class); "
                      "BinaryFocalCrossentropy's alpha is one number in [0, 1], the foreground's weight with "
                      "apply_class_balancing");
    const YAML::Node list = p.get_node("alpha");
    for (const auto& v : list) {
      double a = 0;
      if (!v.IsScalar() || !YAML::convert<double>::decode(v, a) || !std::isfinite(a) || a < 0)
        p.fail("alpha", "must be a list of numbers >= 0, one per class, got " + YAML::Dump(list));
      l.alphas.push_back(a);
    }
    if (l.alphas.empty()) p.fail("alpha", "is an empty list; give one number >= 0 per class, or one number");
  } else {
    l.alpha = p.get_double("alpha", 0.25, 0.0, 1.0);
  }
  if (l.kind == LossKind::BinaryFocalCrossentropy)
    l.apply_class_balancing = p.get_bool("apply_class_balancing", false);
}

/// SparseCategoricalCrossentropy's ignore_class: a mask value in [0, 65535]; refused on other losses.
void read_ignore_class(ParamReader& p, LossConfig& l) {
  if (l.kind == LossKind::SparseCategoricalCrossentropy && p.given("ignore_class")) {
    const YAML::Node v = p.get_node("ignore_class");
    int c = 0;
    if (!v.IsScalar() || !YAML::convert<int>::decode(v, c))
      p.fail("ignore_class", "must be a class index (an integer), got '" + YAML::Dump(v) + "'");
    if (c < 0)
      p.fail("ignore_class", "is " + std::to_string(c) + ", which a mask image cannot hold (masks are 8- or 16-bit "
                             "gray images); store the pixels to ignore as 255 and set ignore_class: 255");
    if (c > 65535)
      p.fail("ignore_class", "is " + std::to_string(c) + ", above 65535, the largest value of a 16-bit mask");
    l.ignore_class = c;
  } else if (l.kind != LossKind::SparseCategoricalCrossentropy && p.has("ignore_class")) {
    p.fail("ignore_class", "is SparseCategoricalCrossentropy's (Keras 3): use type: SparseCategoricalCrossentropy "
                           "for class-index masks with pixels to ignore");
  }
}

}  // namespace

const char* loss_name(LossKind kind) {
  for (const LossEntry& e : kLosses)
    if (e.kind == kind) return e.name;
  return "?";
}

std::string keras_loss_class(LossKind kind) {
  for (const LossEntry& e : kLosses)
    if (e.kind == kind) return *e.keras_class ? e.keras_class : e.name;
  return loss_name(kind);
}

bool is_categorical(LossKind kind) {
  return kind == LossKind::SparseCategoricalCrossentropy || kind == LossKind::CategoricalCrossentropy ||
         kind == LossKind::CategoricalFocalCrossentropy;
}

bool is_overlap(LossKind kind) { return kind == LossKind::KerasDice || kind == LossKind::Tversky; }

bool is_focal(LossKind kind) {
  return kind == LossKind::BinaryFocalCrossentropy || kind == LossKind::CategoricalFocalCrossentropy;
}

LossConfig read_loss(ParamReader& training) {
  LossConfig l;
  l.where = training.where("loss") + ": training.loss";
  if (!training.given("loss")) {
    if (training.has_optional("loss")) training.fail("loss", "has no value; use one of: " + join_names(known_losses()));
    return l;
  }
  const YAML::Node node = training.get_node("loss");
  if (node.IsScalar()) {
    const std::optional<LossKind> kind = loss_function(node.Scalar());
    if (!kind) training.fail("loss", unknown_loss(node.Scalar()));
    l.kind = *kind;
    return l;
  }
  if (!node.IsMap())
    training.fail("loss", "must be a loss name (e.g. binary_crossentropy) or a mapping such as "
                          "{type: SparseCategoricalCrossentropy, from_logits: true}" +
                              list_of_losses_hint(node));
  const std::string& file = training.file();
  ParamReader p(node, file, "training.loss");
  const std::string type = loss_class(p, node);
  const std::optional<LossKind> kind = loss_function(type);
  if (!kind) p.fail("type", unknown_loss(type));
  l.kind = *kind;
  declare_keys(p, l);
  // name: the loss object's name; the log calls it loss, as Keras's does.
  l.from_logits = p.get_bool("from_logits", false);
  read_reduction_and_axis(p, l);
  read_tversky(p, l);
  if (smooths_labels(l.kind)) l.label_smoothing = p.get_double("label_smoothing", 0.0, 0.0, 1.0);
  read_focal(p, l);
  read_ignore_class(p, l);
  p.finish();
  return l;
}

}  // namespace trainer
