#include "backend/cpu/dnnl_context.h"

#include <string>

#include "core/buffer.h"
#include "core/error.h"

namespace trainer::cpu {

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& cpu_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

void execute(dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args,
             const char* what) {
  try {
    prim.execute(cpu_stream(), args);
    cpu_stream().wait();
  } catch (const dnnl::error& e) {
    throw InternalError(std::string("oneDNN ") + what + " failed: " + e.what());
  }
}

void throw_dnnl_setup_error(const char* what, const dnnl::error& e) {
  throw InternalError(std::string("oneDNN ") + what + " failed: " + e.what());
}

float* thread_scratch(size_t n) {
  thread_local Buffer<float> scratch;
  if (n > scratch.size()) scratch.resize(n);
  return scratch.data();
}

void* thread_primitive_scratch(size_t bytes) {
  thread_local Buffer<float> scratch;
  const size_t n = (bytes + sizeof(float) - 1) / sizeof(float);
  if (n > scratch.size()) scratch.resize(n);
  return scratch.data();
}

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

}  // namespace trainer::cpu
