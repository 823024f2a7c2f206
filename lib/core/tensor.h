#pragma once
// Tensor: an owning float32 buffer with an NHWC Shape, on one device (see
// core/buffer.h). resize() keeps the allocation when the new size fits, so a
// training step that reuses its tensors allocates nothing after the first step.
// Copy construction gives a tensor on the source's device; assignment keeps
// the destination's device (so `host_tensor = gpu_tensor` downloads).
#include "core/buffer.h"
#include "core/shape.h"

namespace trainer {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape s, Device d = {}) : buf_(d) { resize(s); }
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor& o) : shape_(o.shape_), buf_(o.buf_) {}
  Tensor& operator=(const Tensor& o) {
    if (this != &o) copy_from(o);
    return *this;
  }

  const Device& device() const { return buf_.device(); }
  /// Moves the (emptied) tensor to device d; contents and shape are discarded.
  void set_device(const Device& d) {
    buf_.set_device(d);
    shape_ = Shape{};
  }
  /// Sets the shape; contents are unspecified when the buffer grows.
  void resize(Shape s) {
    buf_.resize(s.numel());
    shape_ = s;
  }
  /// Resizes to o's shape and copies o's contents (o may be on another device).
  void copy_from(const Tensor& o) {
    shape_ = o.shape_;
    buf_.copy_from(o.buf_);
  }
  void zero() { buf_.zero(); }
  const Shape& shape() const { return shape_; }
  size_t numel() const { return shape_.numel(); }
  /// Device pointer (host pointer for the CPU).
  float* data() { return buf_.data(); }
  const float* data() const { return buf_.data(); }
  /// Pointer to sample i (row-major NHWC).
  float* sample(int i) { return data() + size_t(i) * shape_.sample_numel(); }
  const float* sample(int i) const { return data() + size_t(i) * shape_.sample_numel(); }
  /// The underlying buffer (host copies: buffer().to_host()).
  const Buffer<float>& buffer() const { return buf_; }
  Buffer<float>& buffer() { return buf_; }

 private:
  Shape shape_;
  Buffer<float> buf_;
};

}  // namespace trainer
