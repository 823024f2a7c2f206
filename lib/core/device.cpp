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

Precision precision_named(const std::string& name) {
  return name == "bf16" ? Precision::BF16 : name == "tf32" ? Precision::TF32 : Precision::FP32;
}

}  // namespace trainer
