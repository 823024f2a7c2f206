#pragma once
// Buffer<T>: an owning array of T on one device (host memory, 64-byte aligned,
// for the CPU; the tower's caching allocator for a GPU). resize() keeps the
// allocation when the new size fits, so a step that reuses its buffers
// allocates nothing after the first step. Copies between devices go through
// the GPU side's DeviceContext.
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "core/device.h"

namespace trainer {

/// Raw memory on a device: CPU through aligned operator new (std::bad_alloc
/// when the host has none), CUDA through d.ctx (DeviceOutOfMemory, a UserError
/// naming the sizes and the layer).
inline void* device_allocate(const Device& d, size_t bytes) {
  if (d.is_cuda()) return d.ctx->allocate(bytes);
  return ::operator new[](bytes, std::align_val_t(64));
}
inline void device_deallocate(const Device& d, void* p, size_t bytes) noexcept {
  if (!p) return;
  if (d.is_cuda()) d.ctx->deallocate(p, bytes);
  else ::operator delete[](p, std::align_val_t(64));
}
/// Copies bytes from src on device `from` to dst on device `to` (either or both
/// may be the CPU); returns once a host destination holds the data.
inline void device_copy(const Device& to, void* dst, const Device& from, const void* src, size_t bytes) {
  if (!bytes) return;
  if (to.is_cuda()) to.ctx->copy(dst, src, bytes);
  else if (from.is_cuda()) from.ctx->copy(dst, src, bytes);
  else std::memcpy(dst, src, bytes);
}
inline void device_zero(const Device& d, void* p, size_t bytes) {
  if (!bytes) return;
  if (d.is_cuda()) d.ctx->zero(p, bytes);
  else std::memset(p, 0, bytes);
}

template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(Device d, size_t n = 0) : dev_(d) { resize(n); }
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept { swap(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      swap(o);
    }
    return *this;
  }
  /// Copies live on the source's device.
  Buffer(const Buffer& o) : dev_(o.dev_) { copy_from(o); }
  Buffer& operator=(const Buffer& o) {
    if (this != &o) copy_from(o);
    return *this;
  }

  const Device& device() const { return dev_; }
  /// Moves the (emptied) buffer to device d; contents are discarded.
  void set_device(const Device& d) {
    release();
    dev_ = d;
  }
  /// Sets the size; contents are unspecified when the buffer grows (which
  /// allocates: DeviceOutOfMemory on a GPU that has no room).
  void resize(size_t n) {
    if (n > cap_) {
      release();
      p_ = static_cast<T*>(device_allocate(dev_, n * sizeof(T)));
      cap_ = n;
    }
    n_ = n;
  }
  void zero() { device_zero(dev_, p_, n_ * sizeof(T)); }
  size_t size() const { return n_; }
  /// Elements the allocation holds: a resize up to it allocates nothing.
  size_t capacity() const { return cap_; }
  bool empty() const { return n_ == 0; }
  /// Device pointer (host pointer for the CPU).
  T* data() { return p_; }
  const T* data() const { return p_; }

  /// Resizes to o.size() and copies o's contents (o may be on another device).
  void copy_from(const Buffer& o) {
    resize(o.n_);
    device_copy(dev_, p_, o.dev_, o.p_, n_ * sizeof(T));
  }
  /// Resizes to n and copies n values from host memory.
  void copy_from_host(const T* src, size_t n) {
    resize(n);
    device_copy(dev_, p_, Device{}, src, n * sizeof(T));
  }
  void copy_from_host(const std::vector<T>& v) { copy_from_host(v.data(), v.size()); }
  /// Copies the contents to host memory (dst holds size() values).
  void copy_to_host(T* dst) const { device_copy(Device{}, dst, dev_, p_, n_ * sizeof(T)); }
  std::vector<T> to_host() const {
    std::vector<T> v(n_);
    copy_to_host(v.data());
    return v;
  }

 private:
  void release() noexcept {
    device_deallocate(dev_, p_, cap_ * sizeof(T));
    p_ = nullptr;
    n_ = cap_ = 0;
  }
  void swap(Buffer& o) noexcept {
    std::swap(dev_, o.dev_);
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
  }
  Device dev_;
  T* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

}  // namespace trainer
