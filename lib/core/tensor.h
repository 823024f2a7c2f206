#pragma once
// Tensor: an owning, 64-byte aligned float32 buffer with an NHWC Shape.
// resize() keeps the allocation when the new size fits, so a training step that
// reuses its tensors allocates nothing after the first step.
#include <cstring>
#include <memory>

#include "core/shape.h"

namespace trainer {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape s) { resize(s); }
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor& o) { *this = o; }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) {
      resize(o.shape_);
      if (o.numel()) std::memcpy(data(), o.data(), o.numel() * sizeof(float));
    }
    return *this;
  }

  /// Sets the shape; contents are unspecified when the buffer grows.
  void resize(Shape s) {
    if (s.numel() > capacity_) {
      capacity_ = s.numel();
      buf_.reset(static_cast<float*>(::operator new[](capacity_ * sizeof(float), std::align_val_t(64))));
    }
    shape_ = s;
  }
  void zero() {
    if (numel()) std::memset(data(), 0, numel() * sizeof(float));
  }
  const Shape& shape() const { return shape_; }
  size_t numel() const { return shape_.numel(); }
  float* data() { return buf_.get(); }
  const float* data() const { return buf_.get(); }
  /// Pointer to sample i (row-major NHWC).
  float* sample(int i) { return data() + size_t(i) * shape_.sample_numel(); }
  const float* sample(int i) const { return data() + size_t(i) * shape_.sample_numel(); }

 private:
  struct Free {
    void operator()(float* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  Shape shape_;
  size_t capacity_ = 0;
  std::unique_ptr<float[], Free> buf_;
};

}  // namespace trainer
