#pragma once
// Caller tensors beside their copies in a oneDNN primitive's own layout:
// MemoryPair (one reorder each way, the copy owned or in this thread's
// primitive scratch for one call) and KeptInput (a copy kept between calls,
// so that passes reading the same tensor reorder it once). Internal to
// backend/cpu.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "backend/cpu/dnnl_context.h"
#include "core/error.h"

namespace trainer::cpu {

/// A tensor (weights, or an activation where the library wants its own
/// layout) as the caller holds it and as a primitive wants it; `lib` is `user`
/// itself when the formats agree, else a buffer in the library's layout with
/// a cached reorder between the two: owned by the pair, or (per_call) bound
/// to a caller's buffer before each use (bind_per_call).
struct MemoryPair {
  dnnl::memory user, lib;
  std::optional<dnnl::reorder> to_lib, to_user;
  bool per_call = false;
  /// user_md: the caller's layout; lib_md: the primitive's; into_lib: the
  /// reorder runs user -> lib (an input), else lib -> user (an output);
  /// lib_per_call: lib gets no buffer of its own (bind_per_call binds one).
  MemoryPair(const dnnl::memory::desc& user_md, const dnnl::memory::desc& lib_md, bool into_lib,
             bool lib_per_call = false) {
    user = dnnl::memory(user_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (user_md == lib_md) {
      lib = user;
      return;
    }
    per_call = lib_per_call;
    lib = per_call ? dnnl::memory(lib_md, cpu_engine(), DNNL_MEMORY_NONE) : dnnl::memory(lib_md, cpu_engine());
    if (into_lib) to_lib = dnnl::reorder(user, lib);
    else to_user = dnnl::reorder(lib, user);
  }
  /// Bytes of the library's buffer that bind_per_call wants (0 when it needs none).
  size_t per_call_bytes() const { return per_call ? lib.get_desc().get_size() : 0; }
  /// Copies the user's data into the library's layout (nothing when they agree).
  void reorder_in() {
    if (to_lib) execute(*to_lib, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, lib}}, "reorder");
  }
  /// Copies the library's result into the user's layout (nothing when they agree).
  void reorder_out() {
    if (to_user) execute(*to_user, {{DNNL_ARG_FROM, lib}, {DNNL_ARG_TO, user}}, "reorder");
  }
};

/// Points a pass's scratchpad and its pairs' per-call library buffers
/// (MemoryPair::per_call; a null pair is skipped) into this thread's
/// primitive scratch, each 64-byte aligned; they stay valid until the next
/// bind_per_call (thread_primitive_scratch call) on this thread.
inline void bind_per_call(dnnl::memory& scratchpad, std::initializer_list<MemoryPair*> pairs) {
  constexpr size_t kAlign = 64;
  const auto round = [](size_t b) { return (b + kAlign - 1) / kAlign * kAlign; };
  size_t total = round(scratchpad.get_desc().get_size());
  for (MemoryPair* p : pairs)
    if (p) total += round(p->per_call_bytes());
  char* at = static_cast<char*>(thread_primitive_scratch(total));
  scratchpad.set_data_handle(at);
  at += round(scratchpad.get_desc().get_size());
  for (MemoryPair* p : pairs)
    if (p && p->per_call) p->lib.set_data_handle(at), at += round(p->per_call_bytes());
}

/// An input tensor of the caller in a primitive's layout, kept between
/// calls: get(user, stamp) reorders user's data into the kept copy unless the
/// copy already holds that pointer's data under the same stamp. A primitive
/// passes the stamp of the call whose data is meant (a forward's input,
/// reused by backward-weights; a backward's dz, shared by its two passes), so
/// a later call with the same pointer but new data refreshes it. Without a
/// layout change it is the caller's memory itself (no copy).
class KeptInput {
 public:
  KeptInput(const dnnl::memory::desc& user_md, const dnnl::memory::desc& lib_md) : pair_(user_md, lib_md, true) {}
  /// The memory to pass to the primitive, holding user's data (see above).
  const dnnl::memory& get(const void* user, uint64_t stamp) {
    if (user != from_ || stamp != stamp_ || !pair_.to_lib) {
      pair_.user.set_data_handle(const_cast<void*>(user));
      pair_.reorder_in();
      from_ = user, stamp_ = stamp;
    }
    return pair_.lib;
  }
  /// Fills the kept copy through fill(its float data, in the library's
  /// layout) and records it as user's data under stamp, so that get(user,
  /// stamp) returns it without a reorder: for a tensor made straight in the
  /// library's layout. InternalError where the layouts agree (no copy exists).
  template <class Fill>
  void put(const void* user, uint64_t stamp, Fill fill) {
    if (!pair_.to_lib) throw InternalError("KeptInput::put where the caller's layout is the library's");
    fill(static_cast<float*>(pair_.lib.get_data_handle()));
    from_ = user, stamp_ = stamp;
  }
  /// The memory the primitive reads (for its argument map; get() fills it).
  const dnnl::memory& lib() const { return pair_.lib; }
  /// The primitive's layout of the tensor.
  dnnl::memory::desc lib_desc() const { return pair_.lib.get_desc(); }

 private:
  MemoryPair pair_;
  const void* from_ = nullptr;
  uint64_t stamp_ = 0;
};

}  // namespace trainer::cpu
