#include "train/load_model.h"

#include "io/checkpoint.h"

namespace trainer {

LoadedModel load_model(const std::string& checkpoint_path, const DevicePlan& plan, int threads_per_tower) {
  Checkpoint ckpt = load_checkpoint(checkpoint_path);
  LoadedModel m;
  m.config = std::make_unique<Config>(parse_config(ckpt.config_yaml, checkpoint_path + " (its stored config)"));
  m.trainer = std::make_unique<Trainer>(*m.config, plan, threads_per_tower);
  m.trainer->load_weights(ckpt.weights, checkpoint_path);
  return m;
}

}  // namespace trainer
