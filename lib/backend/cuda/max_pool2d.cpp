// cuda::make_max_pool2d: MaxPooling2D, forward on cuDNN (cudnnPoolingForward,
// CUDNN_POOLING_MAX), the gradient by our kernel (max_pool_backward.h); fp32
// NHWC in every precision: pooling only selects values.
//
// Padding: 'valid', and 'same' where the windows fit exactly (e.g. 2x2 stride
// 2 on even sizes), need none. Otherwise TensorFlow pads (with the extra pixel
// after when the total is odd) with pixels that never win. cuDNN's padding is
// symmetric only, so x is copied into a tensor padded with -inf by
// TensorFlow's amounts on each side (symmetric ones too, so nothing depends on
// how cuDNN treats its own padding in max pooling) and pooled without padding
// (every window holds a real pixel, since the padding before is less than the
// window); backward crops the padded gradient.
//
// Backward: our kernel (max_pool_backward.h; cuDNN's NHWC pooling backward
// was several times slower) finds each window's maximum again from the
// forward's input and output, so backward() reads x (or the op's padded copy
// of it) and y of the last training forward() by pointer: they must still
// hold that call's data, as the layers guarantee (backward gets the forward's
// x and y). Ties go to the window's first maximum (row-major), as on the CPU.
#include <cmath>

#include "backend/cuda/cudnn_conv.h"
#include "backend/cuda/max_pool_backward.h"
#include "backend/cuda/tensor_layout.h"
#include "backend/device_ops.h"

namespace trainer::cuda {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

struct PoolDescDeleter {
  void operator()(cudnnPoolingStruct* d) const noexcept { cudnnDestroyPoolingDescriptor(d); }
};
using PoolDesc = std::unique_ptr<cudnnPoolingStruct, PoolDescDeleter>;

/// Descriptors and padding of one (xs, ys) pair.
struct PoolPlan {
  PadPair ph, pw;  ///< TensorFlow's padding of x.
  bool padded = false;
  Shape xp;         ///< x as cuDNN sees it: xs, or xs padded.
  TensorDesc x, y;  ///< fp32 NHWC xp and ys.
};

class CudnnMaxPool2D final : public PoolBackend {
 public:
  CudnnMaxPool2D(const Device& d, Pool2DParams p) : ctx_(context(d)), p_(p), padded_x_(d) {
    cudnnPoolingDescriptor_t desc = nullptr;
    TRAINER_CUDA_CHECK(ctx_, cudnnCreatePoolingDescriptor(&desc));
    pool_.reset(desc);
    TRAINER_CUDA_CHECK(ctx_, cudnnSetPooling2dDescriptor(desc, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN,
                                                         p.ph, p.pw, 0, 0, p.stride_h, p.stride_w));
  }

  void forward(const float* x, Shape xs, float* y, Shape ys, bool training) override {
    if (training) last_ = Last{};
    if (xs.numel() == 0 || ys.numel() == 0) {
      if (training) last_ = Last{true, nullptr, nullptr, xs, ys};
      return;
    }
    PoolPlan& p = plan(xs, ys);
    const float* src = x;
    if (p.padded) {
      // Training keeps its padded copy for backward; inference pads into the workspace.
      float* dst = nullptr;
      if (training) {
        padded_x_.resize(p.xp.numel());
        dst = padded_x_.data();
      } else {
        dst = static_cast<float*>(ctx_.workspace(p.xp.numel() * sizeof(float)));
      }
      reframe_nhwc(ctx_, x, CUDNN_DATA_FLOAT, xs, dst, CUDNN_DATA_FLOAT, p.xp, p.ph.before, p.pw.before, -INFINITY);
      src = dst;
    }
    TRAINER_CUDA_CHECK(ctx_,
                       cudnnPoolingForward(ctx_.cudnn(), pool_.get(), &kOne, p.x.get(), src, &kZero, p.y.get(), y));
    if (training) last_ = Last{true, src, y, xs, ys};
  }

  void backward(const float* dy, Shape ys, float* dx, Shape xs) override {
    if (!last_.valid || last_.xs != xs || last_.ys != ys)
      ctx_.fail("MaxPool2D backward", "no training forward() with input " + xs.nhwc() + " and output " + ys.nhwc() +
                                            " precedes this backward()");
    if (xs.numel() == 0 || ys.numel() == 0) return;
    PoolPlan& p = plan(xs, ys);
    float* out = p.padded ? static_cast<float*>(ctx_.workspace(p.xp.numel() * sizeof(float))) : dx;
    max_pool_backward(ctx_, last_.x, p.xp, last_.y, dy, ys, p_.ph, p_.pw, p_.stride_h, p_.stride_w, out);
    if (p.padded)
      reframe_nhwc(ctx_, out, CUDNN_DATA_FLOAT, p.xp, dx, CUDNN_DATA_FLOAT, xs, -p.ph.before, -p.pw.before, 0.0f);
  }

 private:
  /// The last training forward(): what cuDNN read (x or the padded copy) and wrote.
  struct Last {
    bool valid = false;
    const float* x = nullptr;
    const float* y = nullptr;
    Shape xs, ys;
  };

  PoolPlan& plan(Shape xs, Shape ys) {
    if (PoolPlan* found = plans_.find(xs, ys)) return *found;
    auto p = std::make_unique<PoolPlan>();
    p->ph = conv_padding(xs.h, ys.h, p_.ph, p_.stride_h);
    p->pw = conv_padding(xs.w, ys.w, p_.pw, p_.stride_w);
    p->padded = p->ph.before + p->ph.after + p->pw.before + p->pw.after > 0;
    p->xp = Shape{xs.n, xs.h + p->ph.before + p->ph.after, xs.w + p->pw.before + p->pw.after, xs.c};
    p->x = nhwc_desc(ctx_, CUDNN_DATA_FLOAT, p->xp);
    p->y = nhwc_desc(ctx_, CUDNN_DATA_FLOAT, ys);
    int n = 0, c = 0, h = 0, w = 0;
    TRAINER_CUDA_CHECK(ctx_, cudnnGetPooling2dForwardOutputDim(pool_.get(), p->x.get(), &n, &c, &h, &w));
    if (Shape{n, h, w, c} != ys)
      ctx_.fail("cudnnGetPooling2dForwardOutputDim",
                "pooling " + p->xp.nhwc() + " gives " + Shape{n, h, w, c}.nhwc() + ", expected " + ys.nhwc());
    return plans_.insert(xs, ys, std::move(p));
  }

  CudaContext& ctx_;
  Pool2DParams p_;
  PoolDesc pool_;
  PlanCache<PoolPlan> plans_;
  Buffer<float> padded_x_;  ///< The padded x of the last training forward (padded shapes only).
  Last last_;
};

}  // namespace

std::unique_ptr<PoolBackend> make_max_pool2d(const Device& d, Pool2DParams p) {
  return std::make_unique<CudnnMaxPool2D>(d, p);
}

}  // namespace trainer::cuda
