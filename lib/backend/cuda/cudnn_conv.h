#pragma once
// cuDNN helpers of the convolution and pooling ops (backend/cuda): owning
// descriptors, the data and math types of each Precision, a small per-shape
// plan cache, and ConvCore, the one convolution that both Conv2D and
// Conv2DTranspose run through cuDNN's forward / backward-data /
// backward-filter calls (Conv2DTranspose with the roles swapped).
#include <cudnn.h>

#include <memory>
#include <vector>

#include "backend/cuda/cuda_context.h"
#include "backend/elementwise_math.h"
#include "backend/ops.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "core/shape.h"

namespace trainer::cuda {

struct TensorDescDeleter {
  void operator()(cudnnTensorStruct* d) const noexcept { cudnnDestroyTensorDescriptor(d); }
};
struct FilterDescDeleter {
  void operator()(cudnnFilterStruct* d) const noexcept { cudnnDestroyFilterDescriptor(d); }
};
struct ConvDescDeleter {
  void operator()(cudnnConvolutionStruct* d) const noexcept { cudnnDestroyConvolutionDescriptor(d); }
};
using TensorDesc = std::unique_ptr<cudnnTensorStruct, TensorDescDeleter>;
using FilterDesc = std::unique_ptr<cudnnFilterStruct, FilterDescDeleter>;
using ConvDesc = std::unique_ptr<cudnnConvolutionStruct, ConvDescDeleter>;

/// Descriptor of a packed NHWC tensor s = [N, H, W, C] of `type`.
TensorDesc nhwc_desc(CudaContext& ctx, cudnnDataType_t type, Shape s);

/// cuDNN data type of the convolutions' tensors: float for fp32 and tf32,
/// bfloat16 for bf16.
cudnnDataType_t conv_data_type(Precision p);
/// cuDNN data type of a tensor stored as t: CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16.
inline cudnnDataType_t cudnn_type(DType t) { return t == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }
/// The precision a convolution with Cb filters runs in, for the context's
/// precision p: p, except that bf16 with fewer than kMinBf16Filters filters
/// (backend/ops.h; Conv2D's output channels, Conv2DTranspose's input
/// channels: e.g. a one-channel mask output) runs in tf32 on fp32 tensors
/// (the model keeps such a layer's tensors fp32), where
/// cuDNN's bf16 kernels pad K to a tensor-core tile and the conversions cost
/// more than the convolution. Measured on an H200 (cuDNN 9.19, the U-Net at
/// batch 32): the 64 -> 1 mask layer took 1.9 ms of the step in bf16 and
/// 1.0 ms in tf32; the 3 -> 64 first layer (thin on the other side) was the
/// other way round, 2.4 ms in bf16 and 2.6 ms in tf32. A grouped
/// convolution (groups > 1: DepthwiseConv2D, Conv2D groups) runs in tf32 on
/// fp32 tensors too (its layer keeps them fp32): it does few multiplies per
/// byte, and cuDNN's fp32 grouped convolutions are its long-standing path
/// (not measured on a GPU).
Precision conv_precision(Precision p, int cb, int groups = 1);
/// cuDNN math type: fp32 -> CUDNN_FMA_MATH (no TF32 tensor cores), tf32 and
/// bf16 -> CUDNN_TENSOR_OP_MATH (tensor cores; fp32 accumulation either way).
cudnnMathType_t conv_math_type(Precision p);

/// Up to kMax values per (a, b) shape pair, the oldest dropped first (as the
/// CPU backend's primitive cache).
template <class Plan>
class PlanCache {
 public:
  static constexpr size_t kMax = 8;
  /// The plan for (a, b), or nullptr.
  Plan* find(const Shape& a, const Shape& b) {
    for (auto& e : items_)
      if (e.a == a && e.b == b) return e.plan.get();
    return nullptr;
  }
  /// Stores plan for (a, b) (absent) and returns it.
  Plan& insert(const Shape& a, const Shape& b, std::unique_ptr<Plan> plan) {
    if (items_.size() == kMax) items_.erase(items_.begin());
    items_.push_back(Entry{a, b, std::move(plan)});
    return *items_.back().plan;
  }

 private:
  struct Entry {
    Shape a, b;
    std::unique_ptr<Plan> plan;
  };
  std::vector<Entry> items_;
};

/// The tensors of ConvCore's convolution: A, its input (the larger side), and
/// B, its output.
enum class ConvSide { A, B };

/// How an input of a ConvCore call that cuDNN cannot read as it is (it needs a
/// bf16 and/or explicitly padded copy) gets its copy.
enum class Staging {
  Transient,  ///< In the context's workspace, for this call only.
  Keep,       ///< In the op's kept buffer of that side, remembered by pointer and shapes.
  Reuse,      ///< The kept buffer when it was made from this pointer and these
              ///< shapes (the data must not have changed since), else as Keep.
  Prepared,   ///< The gradient made by prepare_gradient() for that side (the
              ///< kept copy, or dy itself where cuDNN reads it as it is; the
              ///< pointer passed is ignored); InternalError when there is none.
};

/// A tensor a ConvCore call reads: its data (ignored with Staging::Prepared),
/// cuDNN type, NHWC shape and staging.
struct ConvInput {
  const void* data = nullptr;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  Shape shape;
  Staging staging = Staging::Transient;
};

/// A tensor a ConvCore call writes (overwrites): its data, cuDNN type and NHWC shape.
struct ConvOutput {
  void* data = nullptr;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  Shape shape;
};

/// The cross-correlation b = conv(a, kernel) of TensorFlow/Keras with its two
/// gradients, on cuDNN:
///   a [N, Ha, Wa, Ca], b [N, Hb, Wb, Cb], kernel [kh, kw, Ca / groups, Cb] (Keras
///   layout, fp32), Hb = conv_output_length(Ha, span_h, stride_h, same), padding
///   conv_padding(Ha, Hb, span_h, stride_h) (likewise for W), the kernel's taps
///   dilation_h pixels apart (Conv2DParams::span_h).
/// Conv2D is this convolution with a = x, b = y; Conv2DTranspose is its
/// transpose (TensorFlow's conv2d_transpose is conv2d_backprop_input) with
/// a = y, b = x and the Keras kernel [kh, kw, Cout, Cin] read as [kh, kw, Ca, Cb].
///
/// Layouts: activations are NHWC (CUDNN_TENSOR_NHWC); the kernel is transposed
/// on every call to cuDNN's NHWC filter layout [Cb, kh, kw, Ca / groups] in the
/// workspace, and the filter gradient back to the Keras layout; groups > 1
/// is cuDNN's grouped convolution (cudnnSetConvolutionGroupCount; Conv2D only).
/// Padding: symmetric padding (before == after) is cuDNN's own zero padding.
/// cuDNN has no asymmetric padding, so when TensorFlow's 'same' puts an extra
/// pixel after (even kernels, or strides that do not divide the input), a is
/// copied into a zero-padded tensor [N, Ha + before + after, Wa + ..., Ca] and
/// the convolution runs unpadded on it; backward-data computes the gradient
/// of the padded tensor and crops it.
/// Precision (conv_precision of the context's, per shape): fp32 and tf32 run
/// cuDNN on fp32 tensors (math type per conv_math_type), bf16 on bf16 tensors
/// with fp32 accumulation (CUDNN_DATA_FLOAT compute type). The caller's
/// activations (a, b and their gradients) come with their storage type
/// (CUDNN_DATA_FLOAT or CUDNN_DATA_BFLOAT16, core/dtype.h's DType): one in
/// cuDNN's type is read or written in place; another is converted to a copy
/// on the way in, and cuDNN's result converted on the way out (in the
/// epilogue pass that adds the bias). The kernel is fp32 and converted on
/// every call; the kernel gradient is converted back to fp32.
/// Algorithms: per shape pair, chosen on first use of each of the three calls
/// by cuDNN's measured search (cudnnFind*AlgorithmEx, on scratch buffers, as
/// PyTorch's cudnn.benchmark does): the fastest algorithm that succeeds,
/// honours the math type (no tensor-op algorithm for fp32) and needs at most
/// kMaxAlgoWorkspace bytes, or a deterministic one within 10% of its time
/// (cuDNN's backward-data ALGO_0 and backward-filter ALGO_0/ALGO_3 use atomics
/// and are not deterministic); when the chosen algorithm rejects the real call
/// (BAD_PARAM or NOT_SUPPORTED), the next usable one is tried.
/// All calls are queued on the context's compute stream; failures throw
/// InternalError naming the cuDNN call, the device and the layer.
class ConvCore {
 public:
  /// Workspace limit of one algorithm (bytes).
  static constexpr size_t kMaxAlgoWorkspace = size_t(512) << 20;

  /// A convolution with geometry p on device d (a CUDA device).
  ConvCore(const Device& d, Conv2DParams p);
  ~ConvCore();
  ConvCore(const ConvCore&) = delete;
  ConvCore& operator=(const ConvCore&) = delete;

  /// out (b) <- act(conv(in (a), w.kernel) + w.bias) (w.bias [Cb] or nullptr),
  /// the bias and activation applied in the pass that writes b (conv_epilogue.h).
  void forward(ConvInput in, ConvWeights w, Activation act, ConvOutput out);
  /// out (da [N, Ha, Wa, Ca]) <- act(dL/da + w.bias) from in (db = dL/db
  /// [N, Hb, Wb, Cb]) (w.bias [Ca] or nullptr: Conv2DTranspose's forward).
  void backward_data(ConvInput in, ConvWeights w, Activation act, ConvOutput out);
  /// dkernel [kh, kw, Ca, Cb] <- dL/dkernel from in (a) and grad (db)
  /// (overwrites it).
  void backward_filter(ConvInput in, ConvInput grad, float* dkernel);
  /// Makes side's gradient for this step's backward calls, which then take
  /// it with Staging::Prepared: g = dy * act'(y) (y, the forward's output on
  /// that side, and dy, both of y_type in that side's shape; Linear: y
  /// unused), written once in the form cuDNN reads (its type, padded where
  /// needed) into the side's kept buffer, with dbias [C of that side] <- the
  /// sum of g over N, H and W (nullptr: skipped). One pass over y and dy
  /// where no explicit padding is needed (activation_gradient), else g in
  /// fp32, then padded; no copy where cuDNN reads dy as it is (Linear, in
  /// cuDNN's type, unpadded), which must then stay unchanged until the
  /// backward calls are queued.
  void prepare_gradient(ConvSide side, Shape as, Shape bs, Activation act, const void* y, const void* dy,
                        cudnnDataType_t y_type, float* dbias);
  /// Forgets the kept copy of side's tensor, so that the next Reuse stages it
  /// afresh (a new step's gradient may arrive in the same buffer).
  void forget(ConvSide side) { kept_tag_[int(side)].valid = false; }
  /// Returns side's prepared gradient storage to the tower's caching
  /// allocator once the backward calls reading it are queued (stream order
  /// keeps it intact until they ran), so that the layers' gradients share a
  /// few cached blocks instead of each holding one for the whole run.
  void release_prepared(ConvSide side);

  /// One usable algorithm of a call, the math type cuDNN timed it with and
  /// the workspace it needs (bytes).
  template <class Algo>
  struct Choice {
    Algo algo;
    cudnnMathType_t math;
    size_t workspace;
  };

 private:
  struct Plan;
  Plan& plan(Shape as, Shape bs);
  /// cache, the usable algorithms of one call for p's shapes, best first:
  /// filled on first use by find(buffers, perf, &count) (a cudnnFind*Ex call
  /// on scratch buffers of p's sizes, returning its status; `call` names it).
  template <class Algo, class Perf, int kCount, class Find>
  std::vector<Choice<Algo>>& searched(Plan& p, std::vector<Choice<Algo>>& cache, const char* call, Find find);
  /// Runs attempt(choice) (stage, call cuDNN, finish on success; returns the
  /// call's status) with the best remaining candidate, the descriptor set to
  /// the math type cuDNN timed it with; a candidate that rejects the call
  /// gives way to the next (InternalError naming `call` when none is left).
  template <class Algo, class Attempt>
  void run_best(Plan& p, std::vector<Choice<Algo>>& candidates, const char* call, Attempt attempt);
  /// True when cuDNN cannot use a tensor of side stored as `type` in place
  /// (another type than cuDNN's, and/or padded explicitly).
  bool staged(const Plan& p, ConvSide side, cudnnDataType_t type) const;
  /// Bytes of cuDNN's copy of such a tensor (0 when not staged).
  size_t staged_bytes(const Plan& p, ConvSide side, cudnnDataType_t type) const;
  /// src (of src_type, side's user shape) as cuDNN reads it: src itself, or
  /// a copy made per `staging` (Prepared: prepare_gradient's result; src
  /// ignored): Transient into `transient` (staged_bytes long, in the
  /// workspace), Keep/Reuse into kept_[side] (`transient` unused; growing it
  /// allocates but never moves the context's workspace).
  const void* stage_input(const Plan& p, ConvSide side, const void* src, cudnnDataType_t src_type, Staging staging,
                          void* transient);
  /// dst (of dst_type, side's user shape) <- act(cuDNN's result src for that
  /// side + bias), cropped and/or converted.
  void unstage_output(const Plan& p, ConvSide side, const void* src, void* dst, cudnnDataType_t dst_type,
                      const float* bias, Activation act);

  CudaContext& ctx_;
  Device device_;
  Conv2DParams p_;
  PlanCache<Plan> plans_;
  /// The copies made with Staging::Keep / Reuse and the gradients of
  /// prepare_gradient, one per side (A, B).
  Buffer<unsigned char> kept_[2];
  struct KeptTag {
    bool valid = false;
    bool prepared = false;  ///< Made by prepare_gradient (src: dy when cuDNN reads it as it is, else nullptr).
    const void* src = nullptr;
    cudnnDataType_t src_type = CUDNN_DATA_FLOAT;
    Shape as, bs;
  } kept_tag_[2];
  /// prepare_gradient's fp32 gradient on a side that is padded explicitly.
  Buffer<float> gradient_;
};

}  // namespace trainer::cuda
