// Fuzzes the config reader: YAML text -> a config validated for training
// (parse_config, the model's layers and shapes, validate_for_training) or a
// UserError. Anything else (a crash, a hang, a leak, another exception)
// is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "core/error.h"
#include "nn/model.h"
#include "scratch_file.h"
#include "train/trainer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  trainer::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const trainer::Config config = trainer::parse_config(text, "fuzz.yaml");
    trainer::Model model(config.model, config.path);
    trainer::validate_for_training(config, model);
  } catch (const trainer::UserError&) {
  }
  return 0;
}
