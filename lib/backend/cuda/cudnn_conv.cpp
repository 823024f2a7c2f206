// cuDNN descriptors, precision mapping and ConvCore (see cudnn_conv.h).
#include "backend/cuda/cudnn_conv.h"

#include <algorithm>
#include <string>

#include "backend/cuda/conv_epilogue.h"
#include "backend/cuda/tensor_layout.h"

namespace trainer::cuda {

namespace {

const float kOne = 1.0f, kZero = 0.0f;  // alpha/beta of fp32 and bf16 cuDNN calls

/// Consecutive aligned regions of the context's workspace for one call.
class WorkspaceLayout {
 public:
  /// Offset of a new region of `bytes` (0 bytes: an empty region).
  size_t add(size_t bytes) {
    const size_t offset = total_;
    total_ += (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    return offset;
  }
  /// The workspace holding every region.
  char* base(CudaContext& ctx) const { return static_cast<char*>(ctx.workspace(total_)); }

 private:
  size_t total_ = 0;
};

FilterDesc filter_desc(CudaContext& ctx, cudnnDataType_t type, int k, int c, int kh, int kw) {
  cudnnFilterDescriptor_t d = nullptr;
  TRAINER_CUDA_CHECK(ctx, cudnnCreateFilterDescriptor(&d));
  FilterDesc desc(d);
  TRAINER_CUDA_CHECK(ctx, cudnnSetFilter4dDescriptor(d, type, CUDNN_TENSOR_NHWC, k, c, kh, kw));
  return desc;
}

ConvDesc conv_desc(CudaContext& ctx, Precision precision, int pad_h, int pad_w, const Conv2DParams& g) {
  cudnnConvolutionDescriptor_t d = nullptr;
  TRAINER_CUDA_CHECK(ctx, cudnnCreateConvolutionDescriptor(&d));
  ConvDesc desc(d);
  TRAINER_CUDA_CHECK(ctx, cudnnSetConvolution2dDescriptor(d, pad_h, pad_w, g.stride_h, g.stride_w, g.dilation_h,
                                                          g.dilation_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  TRAINER_CUDA_CHECK(ctx, cudnnSetConvolutionMathType(d, conv_math_type(precision)));
  if (g.groups > 1) TRAINER_CUDA_CHECK(ctx, cudnnSetConvolutionGroupCount(d, g.groups));
  return desc;
}

/// "[N, H, W, C]" of a cuDNN (n, c, h, w) quadruple.
std::string nchw_as_nhwc(int n, int c, int h, int w) { return Shape{n, h, w, c}.nhwc(); }

/// The usable algorithms among cuDNN's measured results perf[0, count)
/// (sorted by time), best first: those that succeeded, honour the precision
/// (no tensor-op math for fp32) and need at most kMaxAlgoWorkspace bytes,
/// in time order, except that a deterministic one within kDeterministicSlack
/// of the fastest goes first. InternalError when none is usable.
template <class Algo, class Perf>
std::vector<ConvCore::Choice<Algo>> rank_algorithms(CudaContext& ctx, Precision precision, const char* call,
                                                     const Perf* perf, int count) {
  constexpr float kDeterministicSlack = 1.1f;
  const bool tensor_ops = precision != Precision::FP32;
  std::vector<ConvCore::Choice<Algo>> out;
  float fastest = 0.f;
  bool deterministic_first = false;
  for (int i = 0; i < count; ++i) {
    const Perf& r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > ConvCore::kMaxAlgoWorkspace) continue;
    // ALLOW_CONVERSION lets cuDNN round the inputs to fp16, whose range is
    // not that of fp32 or bf16: never taken.
    if (r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || (!tensor_ops && r.mathType == CUDNN_TENSOR_OP_MATH))
      continue;
    // fp32 always runs with the descriptor's CUDNN_FMA_MATH (CUDNN_DEFAULT_MATH
    // would allow TF32 on Ampere and later); tf32 and bf16 with the math type
    // cuDNN timed the algorithm with.
    out.push_back({r.algo, tensor_ops ? r.mathType : CUDNN_FMA_MATH, r.memory});
    if (out.size() == 1) fastest = r.time;
    if (!deterministic_first && r.determinism == CUDNN_DETERMINISTIC && r.time <= fastest * kDeterministicSlack) {
      std::rotate(out.begin(), out.end() - 1, out.end());
      deterministic_first = true;
    }
  }
  if (out.empty())
    ctx.fail(call, "no convolution algorithm supports these shapes in " + std::string(precision_name(precision)) +
                       " within " + std::to_string(ConvCore::kMaxAlgoWorkspace >> 20) + " MiB of workspace");
  return out;
}

/// After a convolution call returned status with the first of candidates:
/// when the algorithm rejected the call (BAD_PARAM, NOT_SUPPORTED: seen in
/// bf16 on an H200 for an algorithm the search had run) and another remains,
/// drops it and returns (the caller retries with the next); else throws
/// InternalError naming the call.
template <class Algo>
void next_algorithm_or_fail(CudaContext& ctx, const char* call, cudnnStatus_t status,
                            std::vector<ConvCore::Choice<Algo>>& candidates) {
  const bool rejected = status == CUDNN_STATUS_BAD_PARAM || status == CUDNN_STATUS_NOT_SUPPORTED;
  if (!rejected || candidates.size() < 2)
    ctx.fail(call, status_string(status) + " (algorithm " + std::to_string(int(candidates.front().algo)) + ")");
  candidates.erase(candidates.begin());
}

/// Scratch tensors for cuDNN's algorithm search (its Find calls run every
/// algorithm on real buffers): A, B, the filter and a workspace of
/// kMaxAlgoWorkspace bytes (less when the device has less free), from the
/// context's allocator and returned to its cache afterwards.
struct SearchBuffers {
  CudaContext& ctx;
  Buffer<unsigned char> a, b, w, ws;
  SearchBuffers(CudaContext& c, const Device& d, size_t a_bytes, size_t b_bytes, size_t w_bytes)
      : ctx(c), a(d, a_bytes), b(d, b_bytes), w(d, w_bytes), ws(d) {
    size_t free_bytes = 0, total = 0;
    TRAINER_CUDA_CHECK(ctx, cudaMemGetInfo(&free_bytes, &total));
    ws.resize(std::min(ConvCore::kMaxAlgoWorkspace, free_bytes / 2));
    a.zero(), b.zero(), w.zero();
  }
};

}  // namespace

TensorDesc nhwc_desc(CudaContext& ctx, cudnnDataType_t type, Shape s) {
  cudnnTensorDescriptor_t d = nullptr;
  TRAINER_CUDA_CHECK(ctx, cudnnCreateTensorDescriptor(&d));
  TensorDesc desc(d);
  TRAINER_CUDA_CHECK(ctx, cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, type, s.n, s.c, s.h, s.w));
  return desc;
}

cudnnDataType_t conv_data_type(Precision p) { return p == Precision::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }

cudnnMathType_t conv_math_type(Precision p) { return p == Precision::FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH; }

Precision conv_precision(Precision p, int cb, int groups) {
  return p == Precision::BF16 && !bf16_convolution(cb, groups) ? Precision::TF32 : p;
}

/// Descriptors, padding and algorithms of one (as, bs) pair.
struct ConvCore::Plan {
  Shape as, bs;    ///< User shapes of a and b.
  Shape ap;        ///< a as cuDNN sees it: as, or as padded explicitly.
  PadPair ph, pw;  ///< TensorFlow's padding of a.
  bool explicit_pad = false;
  Precision precision = Precision::FP32;  ///< conv_precision of the context's.
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  size_t a_bytes = 0, b_bytes = 0, w_bytes = 0;  ///< Sizes in `type` of ap, bs and the filter.
  TensorDesc a, b;                               ///< ap and bs in `type`.
  FilterDesc w;                                  ///< [Cb, kh, kw, Ca] in `type`.
  ConvDesc conv;
  std::vector<Choice<cudnnConvolutionFwdAlgo_t>> fwd;  ///< Usable algorithms, best first (empty: not searched yet).
  std::vector<Choice<cudnnConvolutionBwdDataAlgo_t>> bwd_data;
  std::vector<Choice<cudnnConvolutionBwdFilterAlgo_t>> bwd_filter;
};

ConvCore::ConvCore(const Device& d, Conv2DParams p)
    : ctx_(context(d)), device_(d), p_(p), kept_{Buffer<unsigned char>(d), Buffer<unsigned char>(d)}, gradient_(d) {}
ConvCore::~ConvCore() = default;

ConvCore::Plan& ConvCore::plan(Shape as, Shape bs) {
  if (Plan* found = plans_.find(as, bs)) return *found;
  auto p = std::make_unique<Plan>();
  p->as = as;
  p->bs = bs;
  p->ph = conv_padding(as.h, bs.h, p_.span_h(), p_.stride_h);
  p->pw = conv_padding(as.w, bs.w, p_.span_w(), p_.stride_w);
  p->explicit_pad = p->ph.before != p->ph.after || p->pw.before != p->pw.after;
  p->ap =
      p->explicit_pad ? Shape{as.n, as.h + p->ph.before + p->ph.after, as.w + p->pw.before + p->pw.after, as.c} : as;
  p->precision = conv_precision(ctx_.precision(), bs.c, p_.groups);
  p->type = conv_data_type(p->precision);
  const size_t elem = element_size(ctx_, p->type);
  p->a_bytes = p->ap.numel() * elem;
  p->b_bytes = bs.numel() * elem;
  p->w_bytes = size_t(p_.kh) * p_.kw * (as.c / p_.groups) * bs.c * elem;
  p->a = nhwc_desc(ctx_, p->type, p->ap);
  p->b = nhwc_desc(ctx_, p->type, bs);
  p->w = filter_desc(ctx_, p->type, bs.c, as.c / p_.groups, p_.kh, p_.kw);  // C per group
  p->conv = p->explicit_pad ? conv_desc(ctx_, p->precision, 0, 0, p_)
                            : conv_desc(ctx_, p->precision, p->ph.before, p->pw.before, p_);
  int n = 0, c = 0, h = 0, w = 0;
  TRAINER_CUDA_CHECK(ctx_,
                     cudnnGetConvolution2dForwardOutputDim(p->conv.get(), p->a.get(), p->w.get(), &n, &c, &h, &w));
  if (Shape{n, h, w, c} != bs)
    ctx_.fail("cudnnGetConvolution2dForwardOutputDim",
              "the convolution of " + p->ap.nhwc() + " gives " + nchw_as_nhwc(n, c, h, w) + ", expected " + bs.nhwc());
  return plans_.insert(as, bs, std::move(p));
}

template <class Algo, class Perf, int kCount, class Find>
std::vector<ConvCore::Choice<Algo>>& ConvCore::searched(Plan& p, std::vector<Choice<Algo>>& cache, const char* call,
                                                        Find find) {
  if (cache.empty()) {
    // The precision's math type: run_best() leaves the descriptor at the type
    // of the last call's algorithm, which must not narrow this call's search.
    TRAINER_CUDA_CHECK(ctx_, cudnnSetConvolutionMathType(p.conv.get(), conv_math_type(p.precision)));
    SearchBuffers buf(ctx_, device_, p.a_bytes, p.b_bytes, p.w_bytes);
    Perf perf[kCount];
    int count = 0;
    const cudnnStatus_t st = find(buf, perf, &count);
    if (st != CUDNN_STATUS_SUCCESS) ctx_.fail(call, status_string(st));
    cache = rank_algorithms<Algo>(ctx_, p.precision, call, perf, count);
  }
  return cache;
}

template <class Algo, class Attempt>
void ConvCore::run_best(Plan& p, std::vector<Choice<Algo>>& candidates, const char* call, Attempt attempt) {
  for (;;) {
    const Choice<Algo> algo = candidates.front();
    // The math type cuDNN timed the algorithm with (as PyTorch sets it per call).
    TRAINER_CUDA_CHECK(ctx_, cudnnSetConvolutionMathType(p.conv.get(), algo.math));
    const cudnnStatus_t st = attempt(algo);
    if (st == CUDNN_STATUS_SUCCESS) return;
    next_algorithm_or_fail(ctx_, call, st, candidates);
  }
}

// The memory plan (nn/layers/conv_common.h, conv_gpu_memory) follows these
// staging rules and the workspace regions of each call: change both together.
bool ConvCore::staged(const Plan& p, ConvSide side, cudnnDataType_t type) const {
  return p.type != type || (side == ConvSide::A && p.explicit_pad);
}

size_t ConvCore::staged_bytes(const Plan& p, ConvSide side, cudnnDataType_t type) const {
  if (!staged(p, side, type)) return 0;
  return side == ConvSide::A ? p.a_bytes : p.b_bytes;
}

const void* ConvCore::stage_input(const Plan& p, ConvSide side, const void* src, cudnnDataType_t src_type,
                                  Staging staging, void* transient) {
  if (staging == Staging::Prepared) {
    const KeptTag& tag = kept_tag_[int(side)];
    if (!tag.valid || !tag.prepared || tag.as != p.as || tag.bs != p.bs)
      ctx_.fail("ConvCore", "no gradient prepared for shapes " + p.as.nhwc() + " and " + p.bs.nhwc());
    return tag.src ? static_cast<const void*>(tag.src) : kept_[int(side)].data();
  }
  if (!staged(p, side, src_type)) return src;
  void* dst = transient;
  if (staging != Staging::Transient) {
    KeptTag& tag = kept_tag_[int(side)];
    Buffer<unsigned char>& kept = kept_[int(side)];
    const bool same = tag.valid && !tag.prepared && tag.src == src && tag.src_type == src_type && tag.as == p.as &&
                      tag.bs == p.bs;
    if (staging == Staging::Reuse && same) return kept.data();
    tag.valid = false;
    kept.resize(staged_bytes(p, side, src_type));
    dst = kept.data();
  }
  if (side == ConvSide::A && p.explicit_pad)
    reframe_nhwc(ctx_, src, src_type, p.as, dst, p.type, p.ap, p.ph.before, p.pw.before, 0.0f);
  else
    convert(ctx_, src, src_type, dst, p.type, side == ConvSide::A ? p.as.numel() : p.bs.numel());
  if (staging != Staging::Transient) kept_tag_[int(side)] = KeptTag{true, false, src, src_type, p.as, p.bs};
  return dst;
}

void ConvCore::prepare_gradient(ConvSide side, Shape as, Shape bs, Activation act, const void* y, const void* dy,
                                cudnnDataType_t y_type, float* dbias) {
  const Plan& p = plan(as, bs);
  const Shape s = side == ConvSide::A ? as : bs;
  const long long rows = (long long)s.n * s.h * s.w;
  kept_tag_[int(side)].valid = false;  // until the new gradient is queued
  if (!staged(p, side, y_type) && act.linear()) {  // cuDNN reads dy as it is
    if (dbias) bias_gradient(ctx_, dy, y_type, rows, s.c, dbias);
    kept_tag_[int(side)] = KeptTag{true, true, dy, y_type, as, bs};
    return;
  }
  if (side == ConvSide::A && p.explicit_pad) {
    gradient_.resize(s.numel());
    activation_gradient(ctx_, act, y, dy, y_type, rows, s.c, gradient_.data(), CUDNN_DATA_FLOAT, dbias);
    stage_input(p, side, gradient_.data(), CUDNN_DATA_FLOAT, Staging::Keep, nullptr);
  } else {
    Buffer<unsigned char>& kept = kept_[int(side)];
    kept.resize(s.numel() * element_size(ctx_, p.type));
    activation_gradient(ctx_, act, y, dy, y_type, rows, s.c, kept.data(), p.type, dbias);
  }
  kept_tag_[int(side)] = KeptTag{true, true, nullptr, p.type, as, bs};
}

void ConvCore::release_prepared(ConvSide side) {
  if (!kept_tag_[int(side)].prepared) return;
  kept_tag_[int(side)].valid = false;
  kept_[int(side)] = Buffer<unsigned char>(device_);
  gradient_ = Buffer<float>(device_);
}

void ConvCore::unstage_output(const Plan& p, ConvSide side, const void* src, void* dst, cudnnDataType_t dst_type,
                              const float* bias, Activation act) {
  const Shape s = side == ConvSide::A ? p.as : p.bs;
  const long long rows = (long long)s.n * s.h * s.w;
  if (side == ConvSide::A && p.explicit_pad) {
    reframe_nhwc(ctx_, src, p.type, p.ap, dst, dst_type, p.as, -p.ph.before, -p.pw.before, 0.0f);
    if (!bias && act.linear()) return;
    conv_epilogue(ctx_, dst, dst_type, bias, act, dst, dst_type, rows, s.c);
    return;
  }
  // src is dst where cuDNN wrote the caller's tensor in place (same type).
  if (src == dst && (!bias && act.linear())) return;
  conv_epilogue(ctx_, src, p.type, bias, act, dst, dst_type, rows, s.c);
}

void ConvCore::forward(ConvInput in, ConvWeights w, Activation act, ConvOutput out) {
  const void* a = in.data;
  void* b = out.data;
  const cudnnDataType_t a_type = in.type, b_type = out.type;
  const Shape as = in.shape, bs = out.shape;
  Plan& p = plan(as, bs);
  auto& candidates = searched<cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
      p, p.fwd, "cudnnFindConvolutionForwardAlgorithmEx", [&](SearchBuffers& buf, auto* perf, int* count) {
        return cudnnFindConvolutionForwardAlgorithmEx(ctx_.cudnn(), p.a.get(), buf.a.data(), p.w.get(), buf.w.data(),
                                                      p.conv.get(), p.b.get(), buf.b.data(),
                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, count, perf, buf.ws.data(),
                                                      buf.ws.size());
      });
  run_best(p, candidates, "cudnnConvolutionForward", [&](const auto& algo) {
    WorkspaceLayout layout;
    const size_t ws_at = layout.add(algo.workspace);
    const size_t w_at = layout.add(p.w_bytes);
    const size_t a_at = layout.add(in.staging == Staging::Transient ? staged_bytes(p, ConvSide::A, a_type) : 0);
    const size_t b_at = layout.add(staged_bytes(p, ConvSide::B, b_type));
    char* ws = layout.base(ctx_);
    const void* a_in = stage_input(p, ConvSide::A, a, a_type, in.staging, ws + a_at);
    keras_to_cudnn_filter(ctx_, w.kernel, p_.kh * p_.kw, as.c / p_.groups, bs.c, ws + w_at, p.type);
    void* b_out = staged(p, ConvSide::B, b_type) ? static_cast<void*>(ws + b_at) : b;
    const cudnnStatus_t st =
        cudnnConvolutionForward(ctx_.cudnn(), &kOne, p.a.get(), a_in, p.w.get(), ws + w_at, p.conv.get(), algo.algo,
                                ws + ws_at, algo.workspace, &kZero, p.b.get(), b_out);
    if (st == CUDNN_STATUS_SUCCESS) unstage_output(p, ConvSide::B, b_out, b, b_type, w.bias, act);
    return st;
  });
}

void ConvCore::backward_data(ConvInput in, ConvWeights w, Activation act, ConvOutput out) {
  const void* db = in.data;
  void* da = out.data;
  const cudnnDataType_t db_type = in.type, da_type = out.type;
  const Shape bs = in.shape, as = out.shape;
  Plan& p = plan(as, bs);
  auto& candidates =
      searched<cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          p, p.bwd_data, "cudnnFindConvolutionBackwardDataAlgorithmEx", [&](SearchBuffers& buf, auto* perf, int* count) {
            return cudnnFindConvolutionBackwardDataAlgorithmEx(
                ctx_.cudnn(), p.w.get(), buf.w.data(), p.b.get(), buf.b.data(), p.conv.get(), p.a.get(), buf.a.data(),
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, count, perf, buf.ws.data(), buf.ws.size());
          });
  run_best(p, candidates, "cudnnConvolutionBackwardData", [&](const auto& algo) {
    WorkspaceLayout layout;
    const size_t ws_at = layout.add(algo.workspace);
    const size_t w_at = layout.add(p.w_bytes);
    const size_t b_at = layout.add(in.staging == Staging::Transient ? staged_bytes(p, ConvSide::B, db_type) : 0);
    const size_t a_at = layout.add(staged_bytes(p, ConvSide::A, da_type));
    char* ws = layout.base(ctx_);
    const void* b_in = stage_input(p, ConvSide::B, db, db_type, in.staging, ws + b_at);
    keras_to_cudnn_filter(ctx_, w.kernel, p_.kh * p_.kw, as.c / p_.groups, bs.c, ws + w_at, p.type);
    void* a_out = staged(p, ConvSide::A, da_type) ? static_cast<void*>(ws + a_at) : da;
    const cudnnStatus_t st =
        cudnnConvolutionBackwardData(ctx_.cudnn(), &kOne, p.w.get(), ws + w_at, p.b.get(), b_in, p.conv.get(),
                                     algo.algo, ws + ws_at, algo.workspace, &kZero, p.a.get(), a_out);
    if (st == CUDNN_STATUS_SUCCESS) unstage_output(p, ConvSide::A, a_out, da, da_type, w.bias, act);
    return st;
  });
}

void ConvCore::backward_filter(ConvInput in, ConvInput grad, float* dkernel) {
  const void *a = in.data, *db = grad.data;
  const cudnnDataType_t a_type = in.type, db_type = grad.type;
  const Shape as = in.shape, bs = grad.shape;
  const Staging a_staging = in.staging, db_staging = grad.staging;
  Plan& p = plan(as, bs);
  auto& candidates = searched<cudnnConvolutionBwdFilterAlgo_t, cudnnConvolutionBwdFilterAlgoPerf_t,
                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
      p, p.bwd_filter, "cudnnFindConvolutionBackwardFilterAlgorithmEx", [&](SearchBuffers& buf, auto* perf, int* count) {
        return cudnnFindConvolutionBackwardFilterAlgorithmEx(
            ctx_.cudnn(), p.a.get(), buf.a.data(), p.b.get(), buf.b.data(), p.conv.get(), p.w.get(), buf.w.data(),
            CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, count, perf, buf.ws.data(), buf.ws.size());
      });
  run_best(p, candidates, "cudnnConvolutionBackwardFilter", [&](const auto& algo) {
    WorkspaceLayout layout;
    const size_t ws_at = layout.add(algo.workspace);
    const size_t w_at = layout.add(p.w_bytes);
    const size_t a_at = layout.add(a_staging == Staging::Transient ? staged_bytes(p, ConvSide::A, a_type) : 0);
    const size_t b_at = layout.add(db_staging == Staging::Transient ? staged_bytes(p, ConvSide::B, db_type) : 0);
    char* ws = layout.base(ctx_);
    const void* a_in = stage_input(p, ConvSide::A, a, a_type, a_staging, ws + a_at);
    const void* b_in = stage_input(p, ConvSide::B, db, db_type, db_staging, ws + b_at);
    const cudnnStatus_t st =
        cudnnConvolutionBackwardFilter(ctx_.cudnn(), &kOne, p.a.get(), a_in, p.b.get(), b_in, p.conv.get(),
                                       algo.algo, ws + ws_at, algo.workspace, &kZero, p.w.get(), ws + w_at);
    if (st == CUDNN_STATUS_SUCCESS) cudnn_filter_to_keras(ctx_, ws + w_at, p.type, p_.kh * p_.kw, as.c / p_.groups, bs.c, dkernel);
    return st;
  });
}

}  // namespace trainer::cuda
