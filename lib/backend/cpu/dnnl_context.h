#pragma once
// The oneDNN engine and streams every CPU op uses (internal to backend/cpu).
#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace trainer::cpu {

/// The process-wide CPU engine (dnnl::engine(cpu, 0)).
dnnl::engine& cpu_engine();
/// This thread's stream on cpu_engine() (one per thread, so towers running in
/// different threads never share a stream).
dnnl::stream& cpu_stream();

/// Executes prim on this thread's stream and waits for it. Turns dnnl::error
/// into InternalError naming what.
void execute(dnnl::primitive& prim, const std::unordered_map<int, dnnl::memory>& args,
             const char* what);

/// Throws InternalError "oneDNN <what> failed: <e>" (for primitive setup).
[[noreturn]] void throw_dnnl_setup_error(const char* what, const dnnl::error& e);

/// This thread's scratch of at least n floats, valid until the next call on
/// this thread: for what an op needs during one call only (a convolution's
/// dz in backward), so that the ops of a tower (all run by its one thread, in
/// turn) share one buffer of the largest size instead of holding one each.
float* thread_scratch(size_t n);

/// This thread's buffer of at least `bytes` bytes for what a oneDNN primitive
/// needs during one execution only (its scratchpad, activations reordered
/// into the library's layout), shared by the primitives of a tower as
/// thread_scratch is but separate from it, so that an op may hold parts of
/// thread_scratch across the call. Valid until the next call on this thread.
void* thread_primitive_scratch(size_t bytes);

/// thread_scratch cut into K parts of bytes[k] bytes each (a part of 0 bytes
/// gets nullptr), every part 64-byte aligned; valid until the next
/// thread_scratch call on this thread.
template <size_t K>
std::array<void*, K> thread_scratch_parts(const std::array<size_t, K>& bytes) {
  constexpr size_t kAlign = 64;
  std::array<size_t, K> at{};
  size_t total = 0;
  for (size_t k = 0; k < K; ++k) {
    at[k] = total;
    total += (bytes[k] + kAlign - 1) / kAlign * kAlign;
  }
  char* base = reinterpret_cast<char*>(thread_scratch(total / sizeof(float)));
  std::array<void*, K> parts{};
  for (size_t k = 0; k < K; ++k) parts[k] = bytes[k] ? base + at[k] : nullptr;
  return parts;
}

/// Primitive attributes with a user-managed scratchpad (the op owns its buffer).
dnnl::primitive_attr user_scratchpad_attr();

/// A few objects keyed by problem (e.g. input shape), built on first use;
/// the oldest is dropped beyond kMax (a run sees only a handful of batch
/// shapes: training, last partial batch, validation).
template <class Key, class Value>
class PrimitiveCache {
 public:
  static constexpr size_t kMax = 8;
  /// The value for key, or nullptr.
  Value* find(const Key& key) {
    for (auto& kv : items_)
      if (kv.first == key) return kv.second.get();
    return nullptr;
  }
  /// The value for key, built by make() (returning std::unique_ptr<Value>) when absent.
  template <class Make>
  Value& get(const Key& key, Make make) {
    if (Value* v = find(key)) return *v;
    if (items_.size() == kMax) items_.erase(items_.begin());
    items_.emplace_back(key, make());
    return *items_.back().second;
  }

 private:
  std::vector<std::pair<Key, std::unique_ptr<Value>>> items_;
};

}  // namespace trainer::cpu
