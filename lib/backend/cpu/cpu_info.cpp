#include "backend/cpu_info.h"

#include <oneapi/dnnl/dnnl.hpp>

namespace trainer {

bool cpu_has_bf16() {
  const auto isa = unsigned(dnnl::get_effective_cpu_isa());
  const auto bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);  // ISA values are nested bit sets (amx includes it)
  return (isa & bf16) == bf16;
}

Precision cpu_precision(Precision wanted) {
  return wanted == Precision::BF16 && cpu_has_bf16() ? Precision::BF16 : Precision::FP32;
}

}  // namespace trainer
