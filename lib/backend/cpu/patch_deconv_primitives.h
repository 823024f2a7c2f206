#pragma once
// A transposed convolution whose kernel equals its strides (the U-Net's
// Conv2DTranspose with kernel_size 2 and strides 2) as oneDNN inner
// products: every input pixel writes its own kh x kw patch of the output and
// no two patches overlap, so with M = N * H * W pixels and K = kh * kw * Cout
//   T [M, K] = x [M, Cin] . kernel^T + bias (tiled),  y = depth-to-space(T),
// and backward, with dT = space-to-depth(dz),
//   dx [M, Cin] = dT . kernel,  dkernel [K, Cin] = dT^T . x,  dbias = sum of dT.
// The Keras kernel [kh, kw, Cout, Cin] is that [K, Cin] matrix as it lies in
// memory, so the kernel and its gradient need no transposition. oneDNN 2.6's
// deconvolution runs its fp32 forward and its bf16 backward-weights at a
// fifth to a third of the inner products' speed (docs/cpu.md). T lives in this
// thread's primitive scratch for the call; dT is kept from one backward pass
// to the other. Internal to backend/cpu.
#include <oneapi/dnnl/dnnl.hpp>

#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/cpu/conv_primitives.h"

namespace trainer::cpu {

/// Whether a transposed convolution of p is one PatchDeconvPrimitives runs:
/// kernel equal to the strides, undilated, ungrouped.
inline bool patch_deconv(const Conv2DParams& p) {
  return p.kh == p.stride_h && p.kw == p.stride_w && p.dilation_h == 1 && p.dilation_w == 1 && p.groups == 1;
}

/// Forward, backward-data and backward-weights of one patch transposed
/// convolution (patch_deconv) for one ConvProblem (its padding is zero and
/// ignored), with the interface of ConvPrimitives: NHWC activations of the
/// problem's types, the Keras kernel and bias in fp32, dkernel and dbias
/// fp32.
class PatchDeconvPrimitives {
  using md = dnnl::memory::desc;
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;

 public:
  /// Builds the forward primitive; backward ones are built on first use.
  /// Throws InternalError when oneDNN rejects the problem, its output is
  /// not [N, Cout, H kh, W kw] (not a patch transposed convolution) or its
  /// activations are not NHWC.
  explicit PatchDeconvPrimitives(const ConvProblem& pb);
  PatchDeconvPrimitives(const PatchDeconvPrimitives&) = delete;
  PatchDeconvPrimitives& operator=(const PatchDeconvPrimitives&) = delete;

  /// Whether oneDNN runs all three inner products of pb with optimized
  /// kernels (not its reference ones).
  static bool fast_kernels(const ConvProblem& pb);

  /// The problem these primitives run (types as built).
  const ConvProblem& problem() const { return pb_; }

  /// y [N, H * kh, W * kw, Cout] (dst_type) <- patches of x [N, H, W, Cin]
  /// (compute type) times the kernel, plus the bias (then max(0, y) with pb.relu).
  void forward(const void* x, const float* w, const float* b, void* y, uint64_t forward_stamp);
  /// dx (diff_src_type) <- dL/dx from dz (dL/d(pre-activation output),
  /// compute type); backward_weights with the same dz and call shares dT.
  void backward_data(const void* dz, const float* w, void* dx, uint64_t call);
  /// dw [kh, kw, Cout, Cin] and db [Cout] (when the problem has a bias) <- dL/dw from x and dz
  /// (forward_stamp: unused here, the interface of ConvPrimitives).
  void backward_weights(const void* x, const void* dz, float* dw, float* db, uint64_t forward_stamp, uint64_t call);
  /// Always false: the interface of ConvPrimitives, whose Winograd passes
  /// take dz in a blocked layout; these read it in NHWC, so there is no
  /// reorder to fold the ReLU gradient into.
  bool keep_relu_gradient(const float*, const float*, uint64_t, bool, bool) { return false; }

 private:
  /// Sizes of the problem: M pixels in, Cin, K = kh * kw * Cout, Cout, and
  /// the 6-D views {N, H, kh, W, kw, Cout} of T [M, K] and of y [N, H kh, W kw, Cout].
  struct Geometry {
    dnnl::memory::dim m, cin, k, cout;
    dims view, t_strides, y_strides;
  };
  static Geometry geometry(const ConvProblem& pb);
  static dnnl::inner_product_forward::primitive_desc make_fwd_pd(const ConvProblem& pb);
  static dnnl::inner_product_backward_data::primitive_desc make_bwd_data_pd(
      const ConvProblem& pb, const dnnl::inner_product_forward::primitive_desc& hint);
  static dnnl::inner_product_backward_weights::primitive_desc make_bwd_weights_pd(
      const ConvProblem& pb, const dnnl::inner_product_forward::primitive_desc& hint);
  void build_backward_data();
  void build_backward_weights();

  ConvProblem pb_;
  Geometry g_;
  dnnl::inner_product_forward::primitive_desc fwd_pd_;
  dnnl::inner_product_forward fwd_;
  std::optional<MemoryPair> fwd_w_, t_to_y_;  ///< t_to_y_: T (lib, per call) -> y's view (user).
  dnnl::memory src_, bias_, fwd_scratch_;
  std::vector<float> tiled_bias_;  ///< The bias repeated for each of the kh x kw taps [K].
  std::unordered_map<int, dnnl::memory> fwd_args_;

  /// dT = space-to-depth(dz) in the compute type, kept for the backward call's other pass.
  std::optional<KeptInput> dt_;

  std::optional<dnnl::inner_product_backward_data> bwd_data_;
  std::optional<MemoryPair> bd_w_;
  dnnl::memory bd_diff_src_, bd_scratch_;
  std::unordered_map<int, dnnl::memory> bd_args_;

  std::optional<dnnl::inner_product_backward_weights> bwd_w_;
  std::optional<MemoryPair> bw_w_;
  dnnl::memory bw_src_, bw_bias_, bw_scratch_;
  std::vector<float> tap_dbias_;  ///< dbias of each of the kh x kw taps [K].
  std::unordered_map<int, dnnl::memory> bw_args_;
};

}  // namespace trainer::cpu
