// MaxPool2DOp's CPU backend on NHWC tensors of either activation type (fp32
// or bf16; the bf16 forward only selects, so it is exact; the gradient of
// overlapping windows is summed and rounded to bf16): 2x2 windows with
// stride 2 and no padding on our own pass (max_pool_2x2.h, which reads the
// training forward's x and y again in backward), any other pooling on
// oneDNN's pooling_forward / pooling_backward (algorithm pooling_max), whose
// training forward keeps a workspace (the position of each maximum) for
// backward.
#include <optional>

#include "backend/cpu/dnnl_context.h"
#include "backend/cpu/max_pool_2x2.h"
#include "backend/device_ops.h"

namespace trainer::cpu {

namespace {

using md = dnnl::memory::desc;
using tag = dnnl::memory::format_tag;

struct PoolKey {
  Shape xs, ys;
  DType t;
  bool operator==(const PoolKey& o) const { return xs == o.xs && ys == o.ys && t == o.t; }
};

/// The primitives of one input shape; the inference and backward ones are
/// built on first use.
class PoolPrimitives {
 public:
  PoolPrimitives(const Pool2DParams& p, Shape xs, Shape ys, DType t) {
    const auto type = t == DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
    PadPair ph = conv_padding(xs.h, ys.h, p.ph, p.stride_h);
    PadPair pw = conv_padding(xs.w, ys.w, p.pw, p.stride_w);
    src_md_ = md({xs.n, xs.c, xs.h, xs.w}, type, tag::nhwc);
    dst_md_ = md({ys.n, ys.c, ys.h, ys.w}, type, tag::nhwc);
    strides_ = {p.stride_h, p.stride_w};
    kernel_ = {p.ph, p.pw};
    pad_l_ = {ph.before, pw.before};
    pad_r_ = {ph.after, pw.after};
    auto& eng = cpu_engine();
    src_ = dnnl::memory(src_md_, eng, DNNL_MEMORY_NONE);
    dst_ = dnnl::memory(dst_md_, eng, DNNL_MEMORY_NONE);
    try {
      train_pd_ = dnnl::pooling_forward::primitive_desc(desc(dnnl::prop_kind::forward_training),
                                                        user_scratchpad_attr(), eng);
      train_ = dnnl::pooling_forward(train_pd_);
      ws_ = dnnl::memory(train_pd_.workspace_desc(), eng);
      train_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_}, {DNNL_ARG_WORKSPACE, ws_},
                     {DNNL_ARG_SCRATCHPAD, dnnl::memory(train_pd_.scratchpad_desc(), eng)}};
    } catch (const dnnl::error& e) {
      throw_dnnl_setup_error("max-pooling setup", e);
    }
  }

  void forward(const void* x, void* y, bool training) {
    src_.set_data_handle(const_cast<void*>(x));
    dst_.set_data_handle(y);
    if (training) return execute(train_, train_args_, "max-pooling forward");
    if (!infer_) {
      try {
        auto& eng = cpu_engine();
        dnnl::pooling_forward::primitive_desc pd(desc(dnnl::prop_kind::forward_inference),
                                                 user_scratchpad_attr(), eng);
        infer_ = dnnl::pooling_forward(pd);
        infer_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DST, dst_},
                       {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), eng)}};
      } catch (const dnnl::error& e) {
        throw_dnnl_setup_error("max-pooling inference setup", e);
      }
    }
    execute(*infer_, infer_args_, "max-pooling forward");
  }

  void backward(const void* dy, void* dx) {
    if (!bwd_) {
      try {
        auto& eng = cpu_engine();
        dnnl::pooling_backward::desc d(dnnl::algorithm::pooling_max, src_md_, dst_md_, strides_,
                                       kernel_, pad_l_, pad_r_);
        dnnl::pooling_backward::primitive_desc pd(d, user_scratchpad_attr(), eng, train_pd_);
        bwd_ = dnnl::pooling_backward(pd);
        diff_src_ = dnnl::memory(src_md_, eng, DNNL_MEMORY_NONE);
        diff_dst_ = dnnl::memory(dst_md_, eng, DNNL_MEMORY_NONE);
        bwd_args_ = {{DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, diff_src_},
                     {DNNL_ARG_WORKSPACE, ws_},
                     {DNNL_ARG_SCRATCHPAD, dnnl::memory(pd.scratchpad_desc(), eng)}};
      } catch (const dnnl::error& e) {
        throw_dnnl_setup_error("max-pooling backward setup", e);
      }
    }
    diff_dst_.set_data_handle(const_cast<void*>(dy));
    diff_src_.set_data_handle(dx);
    execute(*bwd_, bwd_args_, "max-pooling backward");
  }

 private:
  dnnl::pooling_forward::desc desc(dnnl::prop_kind prop) const {
    return dnnl::pooling_forward::desc(prop, dnnl::algorithm::pooling_max, src_md_, dst_md_,
                                       strides_, kernel_, pad_l_, pad_r_);
  }

  md src_md_, dst_md_;
  dnnl::memory::dims strides_, kernel_, pad_l_, pad_r_;
  dnnl::memory src_, dst_, ws_, diff_src_, diff_dst_;
  dnnl::pooling_forward::primitive_desc train_pd_;
  dnnl::pooling_forward train_;
  std::optional<dnnl::pooling_forward> infer_;
  std::optional<dnnl::pooling_backward> bwd_;
  std::unordered_map<int, dnnl::memory> train_args_, infer_args_, bwd_args_;
};

/// The backend: max_pool_2x2 where it applies, else PoolPrimitives cached per
/// (input shape, output shape, type); x and y (dy and dx) of one type.
/// InternalError when they differ, or on a 2x2 backward without a training
/// forward.
class MaxPool2DCpu final : public PoolBackend {
 public:
  explicit MaxPool2DCpu(Pool2DParams p) : p_(p) {}
  void forward(ConstTensorView x, TensorView y, bool training) override {
    const Pool2x2Tensors s{same_type(x, y), x.shape, y.shape};
    if (!max_pool_2x2_applies(p_, x.shape, y.shape)) return get(x.shape, y.shape, s.t).forward(x.data, y.data, training);
    max_pool_2x2_forward(s, x.data, y.data);
    if (training) trained_ = s, trained_x_ = x.data, trained_y_ = y.data;
  }
  void backward(ConstTensorView dy, TensorView dx) override {
    const Pool2x2Tensors s{same_type(dx, dy), dx.shape, dy.shape};
    if (!max_pool_2x2_applies(p_, dx.shape, dy.shape)) return get(dx.shape, dy.shape, s.t).backward(dy.data, dx.data);
    if (!trained_x_ || s.t != trained_.t || !(s.xs == trained_.xs) || !(s.ys == trained_.ys))
      throw InternalError("MaxPooling2D backward on the CPU without a training forward of its shapes and type");
    max_pool_2x2_backward(s, trained_x_, trained_y_, dy.data, dx.data);
  }

 private:
  static DType same_type(ConstTensorView a, ConstTensorView b) {
    if (a.dtype != b.dtype) throw InternalError("MaxPooling2D on the CPU takes an input and output of one type");
    return a.dtype;
  }
  PoolPrimitives& get(Shape xs, Shape ys, DType t) {
    return cache_.get(PoolKey{xs, ys, t}, [&] { return std::make_unique<PoolPrimitives>(p_, xs, ys, t); });
  }
  Pool2DParams p_;
  PrimitiveCache<PoolKey, PoolPrimitives> cache_;
  /// The last training forward on max_pool_2x2: its shapes and type, and x
  /// and y (ops.h: unchanged until backward).
  Pool2x2Tensors trained_;
  const void* trained_x_ = nullptr;
  const void* trained_y_ = nullptr;
};

}  // namespace

std::unique_ptr<PoolBackend> make_max_pool2d(const Device&, Pool2DParams p) {
  return std::make_unique<MaxPool2DCpu>(p);
}

}  // namespace trainer::cpu
