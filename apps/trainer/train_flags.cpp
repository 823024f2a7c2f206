#include "train_flags.h"

#include "core/error.h"

namespace trainer::cli {

void apply_overrides(Config& config, const TrainFlags& f) {
  YAML::Node root = YAML::Load(config.text);
  bool changed = false;
  // Removed first: assigning to a node written as an alias (*n) would change its anchor's other uses too.
  auto set = [&](const char* section, const char* key, const auto& value) {
    root[section].remove(key);
    root[section][key] = value;
    changed = true;
  };
  if (f.epochs && *f.epochs <= config.training.initial_epoch)
    throw UserError("--epochs " + std::to_string(*f.epochs) + " is not above training.initial_epoch (" +
                    std::to_string(config.training.initial_epoch) + ") of " + config.path + ": epochs is the last "
                    "epoch, counted from the start as in Keras's fit(); e.g. --epochs " +
                    std::to_string(config.training.initial_epoch + *f.epochs));
  if (f.epochs) set("training", "epochs", config.training.epochs = *f.epochs);
  if (f.batch_size && config.training.batch_size_per_device)
    throw UserError("--batch-size sets the global batch, but " + config.path +
                    " gives training.batch_size_per_device (each tower's batch): change that key, or remove it (and "
                    "learning_rate_scaling) to give the global batch");
  if (f.batch_size) set("training", "batch_size", config.training.batch_size = *f.batch_size);
  if (f.seed) set("training", "seed", config.training.seed = *f.seed);
  if (!f.output.empty()) set("training", "output_dir", config.training.output_dir = f.output);
  if (!f.images.empty()) set("data", "images", config.data.images = f.images);
  if (!f.masks.empty()) set("data", "masks", config.data.masks = f.masks);
  if (!f.initial_weights.empty()) {  // the file only: a config's skip_mismatch stays
    if (root["training"]["initial_weights"].IsMap()) {
      YAML::Node w = YAML::Clone(root["training"]["initial_weights"]);  // not through an alias either
      w["filepath"] = config.training.initial_weights = f.initial_weights;
      root["training"].remove("initial_weights");
      root["training"]["initial_weights"] = w;
      changed = true;
    } else {
      set("training", "initial_weights", config.training.initial_weights = f.initial_weights);
    }
    config.training.initial_weights_where = "--initial-weights";
  }
  if (!f.precision.empty()) {
    set("training", "precision", f.precision);
    config.training.precision = precision_named(f.precision);
  }
  if (changed) config.text = "# " + config.path + " with command-line overrides\n" + YAML::Dump(root) + "\n";
}

}  // namespace trainer::cli
