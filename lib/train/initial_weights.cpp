#include "train/initial_weights.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <map>

#include "core/error.h"

namespace trainer {

namespace fs = std::filesystem;

namespace {

// A new run writes last.h5, final.h5 and its ModelCheckpoint files into its output folder (with --overwrite
// over those of the run there): initial weights from that folder may be the pretrained model it destroys (a new
// user's fine-tuning run lost its final.h5 so).
void refuse_in_output_folder(const TrainingConfig& tc) {
  std::error_code ec;
  const fs::path file = fs::weakly_canonical(tc.initial_weights, ec);
  if (ec) return;
  const fs::path out = fs::weakly_canonical(tc.output_dir, ec);
  if (ec) return;
  const fs::path rel = file.lexically_relative(out);
  if (rel.empty() || rel == "." || *rel.begin() == "..") return;  // the folder itself: load_checkpoint lists it
  throw UserError(tc.initial_weights_where + ": '" + tc.initial_weights + "' lies in the output folder '" +
                  tc.output_dir + "', where this run writes its checkpoints (last.h5, final.h5, ModelCheckpoint's) "
                  "over those there: choose another --output, or copy the checkpoint out of it first");
}

}  // namespace

std::vector<std::string> load_matching_weights(Trainer& trainer, const std::vector<WeightRecord>& weights,
                                               const std::string& source) {
  const Model& model = trainer.model();
  std::map<std::string, const WeightRecord*> there;
  std::map<std::string, size_t> count_there;  // layer name -> its weights there
  for (const WeightRecord& r : weights) {
    there[r.layer + "/" + r.name] = &r;
    ++count_there[r.layer];
  }
  std::map<int, std::vector<const WeightSlot*>> by_layer;  // layer index -> its weights, in model order
  for (const WeightSlot& w : model.weights()) by_layer[w.layer].push_back(&w);
  std::vector<float> params = trainer.params(0), state = trainer.state(0);
  std::vector<std::string> kept;
  for (const auto& [layer, slots] : by_layer) {
    std::string why;
    const std::string& name = model.layer(layer).name();
    // A layer with other weights there (a bias, BatchNormalization's center or scale) is another layer.
    if (const size_t n = count_there.count(name) ? count_there.at(name) : 0; n > 0 && n != slots.size())
      why = "it has " + std::to_string(n) + " weight(s) there, " + std::to_string(slots.size()) + " in the model";
    for (const WeightSlot* w : slots) {
      if (!why.empty()) break;
      const std::string weight = name + "/" + w->spec.name;
      const auto it = there.find(weight);
      if (it == there.end()) why = "no '" + weight + "' there";
      else if (it->second->shape != w->spec.shape || it->second->values.size() != w->spec.numel())
        why = "'" + weight + "' is " + shape_text(it->second->shape) + " there, " + shape_text(w->spec.shape) +
              " in the model";
    }
    if (!why.empty()) {
      if (model.layer(layer).frozen()) why += "; frozen by trainable: false, it keeps them for the whole run";
      kept.push_back(name + " (" + why + ")");
      continue;
    }
    for (const WeightSlot* w : slots) {
      const WeightRecord& r = *there.at(name + "/" + w->spec.name);
      std::copy(r.values.begin(), r.values.end(), (w->spec.trainable ? params.data() : state.data()) + w->offset);
    }
  }
  if (!by_layer.empty() && kept.size() == by_layer.size())
    throw UserError(source + ": none of the model's layers with weights fits the checkpoint's (" + kept.front() +
                    "); it was written for another model");
  trainer.set_weights(params, state);
  return kept;
}

void load_initial_weights(const TrainingConfig& tc, Trainer& trainer) {
  refuse_in_output_folder(tc);
  Checkpoint ckpt;
  try {
    ckpt = load_checkpoint(tc.initial_weights);
  } catch (const UserError& e) {
    throw UserError(tc.initial_weights_where + ": " + e.what());
  }
  const std::string source = tc.initial_weights_where + " " + tc.initial_weights;
  if (!tc.initial_weights_skip_mismatch) {
    try {
      trainer.load_weights(ckpt.weights, source);
    } catch (const UserError& e) {
      throw UserError(std::string(e.what()) + "; to start the layers that do not fit (a new output layer) from "
                      "their initializers, write initial_weights: {filepath: " + tc.initial_weights +
                      ", skip_mismatch: true}");
    }
  } else {
    for (const std::string& layer : load_matching_weights(trainer, ckpt.weights, source))
      spdlog::warn("{}: skip_mismatch: layer {} keeps its initial weights", tc.initial_weights_where, layer);
  }
  spdlog::info("initial weights from {} (saved after epoch {} of its run); the optimizer, epochs and callbacks "
               "start afresh",
               tc.initial_weights, ckpt.epoch);
}

}  // namespace trainer
