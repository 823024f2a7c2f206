// Fuzzes the checkpoint reader: bytes -> a loaded checkpoint (load_checkpoint,
// then the finite-weights check a resume makes) or a UserError. Anything
// else (a crash, a hang, a leak, another exception) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/checkpoint.h"
#include "scratch_file.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  trainer::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = trainer::fuzz::scratch_file("checkpoint.h5", data, size);
  try {
    const trainer::Checkpoint ckpt = trainer::load_checkpoint(path);
    (void)trainer::first_non_finite(ckpt, true);
  } catch (const trainer::UserError&) {
  }
  return 0;
}
