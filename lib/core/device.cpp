#include "core/device.h"

namespace trainer {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::TF32:
      return "tf32";
    case Precision::BF16:
      return "bf16";
    case Precision::FP32:
      break;
  }
  return "fp32";
}

}  // namespace trainer
