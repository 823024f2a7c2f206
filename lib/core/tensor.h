#pragma once
// Tensor: an owning buffer with an NHWC Shape, an element type (DType,
// fp32 unless set otherwise) and a Layout (NHWC unless set), on one device (see core/buffer.h). resize()
// keeps the allocation when the new size fits, so a training step that reuses
// its tensors allocates nothing after the first step. Copy construction gives
// a tensor on the source's device; assignment keeps the destination's device
// (so `host_tensor = gpu_tensor` downloads) and takes the source's type.
// data() is the fp32 view and throws InternalError for a bf16 tensor; code
// that handles both types uses raw() with dtype().
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor_view.h"

namespace trainer {

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape s, Device d = {}) : buf_(d) { resize(s); }
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor& o)
      : shape_(o.shape_), dtype_(o.dtype_), layout_(o.layout_), released_(o.released_), buf_(o.buf_) {}
  Tensor& operator=(const Tensor& o) {
    if (this != &o) copy_from(o);
    return *this;
  }

  const Device& device() const { return buf_.device(); }
  /// Moves the (emptied) tensor to device d; contents and shape are discarded.
  void set_device(const Device& d) {
    buf_.set_device(d);
    shape_ = Shape{};
    released_ = false;
  }
  /// Sets the shape (the type stays); contents are unspecified when the buffer grows.
  void resize(Shape s) {
    released_ = false;
    buf_.resize(words(s.numel(), dtype_));
    shape_ = s;
  }
  /// Sets the element type, keeping the shape; contents become unspecified.
  void set_dtype(DType t) {
    dtype_ = t;
    resize(shape_);
  }
  /// How the elements lie in memory (NHWC unless set; see Layout): set
  /// once, as the type, by whoever plans the tensor (Model), kept across
  /// resizes and storage changes.
  Layout layout() const { return layout_; }
  void set_layout(Layout l) { layout_ = l; }
  /// Resizes to o's shape, type and layout and copies o's contents (o may be on another device).
  void copy_from(const Tensor& o) {
    shape_ = o.shape_;
    dtype_ = o.dtype_;
    layout_ = o.layout_;
    released_ = o.released_;
    buf_.copy_from(o.buf_);
  }
  void zero() { buf_.zero(); }
  /// Moves the storage out: the tensor is left empty (shape [], no
  /// allocation), keeping its type and device.
  Buffer<float> take_storage() {
    Buffer<float> out = release_storage();
    shape_ = Shape{};
    released_ = false;
    return out;
  }
  /// Moves the storage out but keeps the shape, type and layout, so that
  /// the shape can still be read (a layer's backward reads the shapes of
  /// inputs whose values it no longer needs: Model gives their storage to
  /// other tensors). Until the next resize(), adopt_storage() or copy,
  /// data() and raw() raise InternalError.
  Buffer<float> release_storage() {
    Buffer<float> out(std::move(buf_));
    buf_ = Buffer<float>(out.device());
    released_ = true;
    return out;
  }
  /// Whether the storage was released (release_storage) and not replaced since.
  bool released() const { return released_; }
  /// Takes b (on this tensor's device) as storage, replacing (freeing) the
  /// current one; the tensor is left empty (shape []) with b's capacity, so
  /// a resize that fits allocates nothing. InternalError for another device.
  void adopt_storage(Buffer<float>&& b) {
    if (!(b.device() == device())) throw InternalError("Tensor::adopt_storage: storage of another device");
    buf_ = std::move(b);
    buf_.resize(0);
    shape_ = Shape{};
    released_ = false;
  }
  /// Elements of type t the storage holds without allocating.
  size_t capacity(DType t) const { return buf_.capacity() * 4 / dtype_size(t); }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  size_t numel() const { return shape_.numel(); }
  /// Bytes of the elements, numel() * dtype_size(dtype()).
  size_t bytes() const { return numel() * dtype_size(dtype_); }
  /// Device pointer (host pointer for the CPU) to fp32 elements; InternalError for a bf16 tensor.
  float* data() {
    require_f32(dtype_, "Tensor::data()");
    return static_cast<float*>(raw());
  }
  const float* data() const {
    require_f32(dtype_, "Tensor::data()");
    return static_cast<const float*>(raw());
  }
  /// Device pointer to the elements, of either type. InternalError after
  /// release_storage().
  void* raw() {
    require_storage();
    return buf_.data();
  }
  const void* raw() const {
    require_storage();
    return buf_.data();
  }
  /// The elements, type and shape, for the backend ops.
  TensorView view() { return {raw(), dtype_, shape_, layout_}; }
  ConstTensorView view() const { return {raw(), dtype_, shape_, layout_}; }
  /// Pointer to sample i (row-major NHWC) of an fp32 tensor.
  float* sample(int i) { return data() + size_t(i) * shape_.sample_numel(); }
  const float* sample(int i) const { return data() + size_t(i) * shape_.sample_numel(); }
  /// Pointer to sample i's elements, of any type.
  void* raw_sample(int i) { return static_cast<char*>(raw()) + size_t(i) * sample_bytes(); }
  const void* raw_sample(int i) const { return static_cast<const char*>(raw()) + size_t(i) * sample_bytes(); }
  /// Bytes of one sample's elements.
  size_t sample_bytes() const { return shape_.sample_numel() * dtype_size(dtype_); }
  /// The underlying buffer of 4-byte words (host copies of an fp32 tensor:
  /// buffer().to_host(); a bf16 tensor packs two elements per word, the
  /// lower-addressed one first).
  const Buffer<float>& buffer() const { return buf_; }
  Buffer<float>& buffer() { return buf_; }

 private:
  /// 4-byte words holding n elements of type t.
  static size_t words(size_t n, DType t) { return (n * dtype_size(t) + 3) / 4; }
  void require_storage() const {
    if (released_)
      throw InternalError("a " + shape_.nhwc() + " tensor is read after its storage was released "
                          "(a layer's backward_reads() says it does not read it)");
  }
  Shape shape_;
  DType dtype_ = DType::F32;
  Layout layout_ = Layout::NHWC;
  bool released_ = false;  ///< release_storage() was called and the storage not replaced since.
  Buffer<float> buf_;
};

}  // namespace trainer
