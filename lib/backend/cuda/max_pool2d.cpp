// cuda::make_max_pool2d: MaxPooling2D by our kernels (max_pool_kernels.h) on
// NHWC tensors of the layer's type (fp32, or bf16 on a bf16 tower: pooling
// only selects values, so the type changes the memory traffic only).
//
// Padding: 'valid', and 'same' where the windows fit exactly (e.g. 2x2 stride
// 2 on even sizes), need none. Otherwise TensorFlow pads (with the extra pixel
// after when the total is odd) with pixels that never win: x is copied into a
// tensor padded with -inf by TensorFlow's amounts on each side and pooled
// without padding (every window holds a real pixel, since the padding before
// is less than the window); backward crops the padded gradient.
//
// Backward finds each window's maximum again from the forward's input and
// output, so backward() reads x (or the op's padded copy of it) and y of the
// last training forward() by pointer: they must still hold that call's data,
// as the layers guarantee (backward gets the forward's x and y). Ties go to
// the window's first maximum (row-major), as on the CPU.
#include <cmath>
#include <string>

#include "backend/cuda/cudnn_conv.h"
#include "backend/cuda/max_pool_kernels.h"
#include "backend/cuda/tensor_layout.h"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

/// The padding of one (xs, ys) pair.
struct PoolPlan {
  PadPair ph, pw;  ///< TensorFlow's padding of x.
  bool padded = false;
  Shape xp;        ///< x as the kernels see it: xs, or xs padded.
};

class MaxPool2DKernels final : public PoolBackend {
 public:
  MaxPool2DKernels(const Device& d, Pool2DParams p) : ctx_(context(d)), p_(p), padded_x_(d) {}

  void forward(ConstTensorView xv, TensorView yv, bool training) override {
    const DType t = xv.dtype;
    const void* x = xv.data;
    void* y = yv.data;
    const Shape xs = xv.shape, ys = yv.shape;
    if (training) last_ = Last{};
    if (xs.numel() == 0 || ys.numel() == 0) {
      if (training) last_ = Last{true, nullptr, nullptr, xs, ys, t};
      return;
    }
    const cudnnDataType_t type = cudnn_type(t);
    PoolPlan& p = plan(xs, ys);
    const void* src = x;
    if (p.padded) {
      // Training keeps its padded copy for backward; inference pads into the workspace.
      const size_t bytes = p.xp.numel() * dtype_size(t);
      void* dst = nullptr;
      if (training) {
        padded_x_.resize(bytes);
        dst = padded_x_.data();
      } else {
        dst = ctx_.workspace(bytes);
      }
      reframe_nhwc(ctx_, x, type, xs, dst, type, p.xp, p.ph.before, p.pw.before, -INFINITY);
      src = dst;
    }
    max_pool_forward(ctx_, t, src, p.xp, y, ys, p_.ph, p_.pw, p_.stride_h, p_.stride_w);
    if (training) last_ = Last{true, src, y, xs, ys, t};
  }

  void backward(ConstTensorView dyv, TensorView dxv) override {
    const DType t = dyv.dtype;
    const void* dy = dyv.data;
    void* dx = dxv.data;
    const Shape xs = dxv.shape, ys = dyv.shape;
    if (!last_.valid || last_.xs != xs || last_.ys != ys || last_.type != t)
      ctx_.fail("MaxPool2D backward", "no training forward() with " + std::string(dtype_name(t)) + " input " +
                                          xs.nhwc() + " and output " + ys.nhwc() + " precedes this backward()");
    if (xs.numel() == 0 || ys.numel() == 0) return;
    const cudnnDataType_t type = cudnn_type(t);
    PoolPlan& p = plan(xs, ys);
    void* out = p.padded ? ctx_.workspace(p.xp.numel() * dtype_size(t)) : dx;
    max_pool_backward(ctx_, t, last_.x, p.xp, last_.y, dy, ys, p_.ph, p_.pw, p_.stride_h, p_.stride_w, out);
    if (p.padded) reframe_nhwc(ctx_, out, type, p.xp, dx, type, xs, -p.ph.before, -p.pw.before, 0.0f);
  }

 private:
  /// The last training forward(): what its kernel read (x or the padded copy) and wrote, and their type.
  struct Last {
    bool valid = false;
    const void* x = nullptr;
    const void* y = nullptr;
    Shape xs, ys;
    DType type = DType::F32;
  };

  PoolPlan& plan(Shape xs, Shape ys) {
    if (PoolPlan* found = plans_.find(xs, ys)) return *found;
    auto p = std::make_unique<PoolPlan>();
    p->ph = conv_padding(xs.h, ys.h, p_.ph, p_.stride_h);
    p->pw = conv_padding(xs.w, ys.w, p_.pw, p_.stride_w);
    p->padded = p->ph.before + p->ph.after + p->pw.before + p->pw.after > 0;
    p->xp = Shape{xs.n, xs.h + p->ph.before + p->ph.after, xs.w + p->pw.before + p->pw.after, xs.c};
    if ((p->xp.h - p_.ph) / p_.stride_h + 1 != ys.h || (p->xp.w - p_.pw) / p_.stride_w + 1 != ys.w)
      ctx_.fail("MaxPool2D", "pooling " + p->xp.nhwc() + " does not give " + ys.nhwc());
    return plans_.insert(xs, ys, std::move(p));
  }

  CudaContext& ctx_;
  Pool2DParams p_;
  PlanCache<PoolPlan> plans_;
  Buffer<unsigned char> padded_x_;  ///< The padded x of the last training forward (padded shapes only).
  Last last_;
};

}  // namespace

std::unique_ptr<PoolBackend> make_max_pool2d(const Device& d, Pool2DParams p) {
  return std::make_unique<MaxPool2DKernels>(d, p);
}

}  // namespace trainer::cuda
