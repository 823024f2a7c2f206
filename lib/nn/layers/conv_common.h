#pragma once
// What Conv2D, Conv2DTranspose and Dense (a 1x1 Conv2D on the last axis)
// share: their Keras keys (read once here) and weight binding, forward (op +
// bias + activation) and backward.
#include <string>
#include <type_traits>

#include "backend/ops.h"
#include "core/error.h"
#include "nn/layer.h"
#include "config/params.h"
#include "nn/activation.h"
#include "nn/layers/kept_activation.h"
#include "nn/onnx_graph.h"

namespace trainer {

/// A Conv2D / Conv2DTranspose / Dense layer's configuration (Keras names and defaults).
struct ConvConfig {
  int filters = 1;                                ///< Output channels.
  Conv2DParams geom;                              ///< kernel_size, strides, padding, dilation_rate.
  Activation activation;                          ///< Applied after the bias (default linear).
  bool softmax = false;                           ///< activation: softmax (over the filters; last layer only).
  bool use_bias = true;
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";
  Regularizer kernel_regularizer, bias_regularizer;  ///< Keras's None: none.
};

/// Reads filters (required, >= 1), kernel_size (required, int or pair),
/// strides (default 1), padding (valid|same, default valid), dilation_rate
/// (int or pair, default 1; only with strides 1, as Keras), activation
/// (default linear), use_bias (default true), kernel_initializer (default
/// glorot_uniform), bias_initializer (default zeros), kernel_regularizer and
/// bias_regularizer (default none; nn/regularizer.h). UserError (with
/// file:line:col) for a missing or bad value.
ConvConfig read_conv_config(ParamReader& p);
/// The window keys of read_conv_config into c: kernel_size, strides,
/// padding, dilation_rate (DepthwiseConv2D's too). UserError for a bad value.
void read_conv_geometry(ParamReader& p, ConvConfig& c);
/// The keys Conv2D, Conv2DTranspose, Dense and DepthwiseConv2D share, into c:
/// activation, use_bias, <kernel>_initializer, bias_initializer,
/// <kernel>_regularizer, bias_regularizer (defaults as above; kernel is
/// "kernel", or DepthwiseConv2D's "depthwise"). UserError for a bad value.
void read_affine_keys(ParamReader& p, ConvConfig& c, const std::string& kernel = "kernel");

/// "3x3" style text of a window size.
std::string window_text(int h, int w);

/// [N, Ho, Wo, filters] of a convolution of `in` with geometry g (Ho =
/// conv_output_length(H, span_h, stride_h, same), Keras's). UserError when
/// the output would be empty, with the fix.
Shape conv_output_shape(const Shape& in, const Conv2DParams& g, int filters);

/// MaxPooling2D's and AveragePooling2D's keys: pool_size (int or pair,
/// default 2), strides (default pool_size, Keras's None), padding (valid |
/// same, default valid). UserError (with file:line:col) for a bad value.
Pool2DParams read_pool_params(ParamReader& p);

/// [N, Ho, Wo, C] of a pooling of `in` (conv_output_length, Keras).
/// UserError when the output would be empty, with the fix.
Shape pool_output_shape(const Shape& in, const Pool2DParams& p);

/// Adds a convolution's inference-mode nodes to g (d: the layer's
/// describe(), of kind Conv2D or Conv2DTranspose): Conv or ConvTranspose with
/// the Keras kernel [kh, kw, a, b] (io.weights' "kernel", or a
/// DepthwiseConv2D's "depthwise_kernel" [kh, kw, Cin, M] as the grouped
/// [kh, kw, 1, Cin * M]; a Dense kernel [a, b] as 1x1) transposed to ONNX's
/// [b, a, kh, kw], explicit pads, the "bias" when d.use_bias, then d's
/// activation. OpenCV's dnn (4.6) rejects asymmetric ConvTranspose pads: the
/// transposed convolution crops the symmetric part and a Slice the rest.
void conv_to_onnx(OnnxGraph& g, const LayerDescription& d, const OnnxLayerIO& io);

/// One convolution as its GPU memory depends on it: cuDNN's a and b (Conv2D:
/// the input and the output; Conv2DTranspose: the output and the input, as
/// it runs as cuDNN's backward-data), the geometry and cuDNN's K.
struct ConvMemoryShape {
  Shape a, b;                 ///< [N, H, W, C] of cuDNN's a and b.
  DType a_type = DType::F32, b_type = DType::F32;  ///< The types the model holds them in.
  Conv2DParams geom;
  int filters = 1;            ///< cuDNN's K (conv_filters()).
  bool linear = true;         ///< The activation the convolution applies itself is linear.
  bool transposed = false;    ///< Conv2DTranspose (a is the output).
  bool backward = true;       ///< Its backward runs (LayerMemoryQuery::backward).
  bool input_gradient = true; ///< Its backward computes the input's gradient (backward-data runs).
};

/// What a convolution holds on a GPU tower, following cuda/cudnn_conv.cpp:
/// it computes in bf16 when q.bf16 and bf16_convolution(K, groups), else
/// fp32; a side whose held type differs from that, or a padded explicitly
/// (TensorFlow's uneven 'same' padding), is staged in the compute type.
/// Kept: the staged copy of the input. Transient (when backward runs): dz =
/// dy * act'(y) in the compute type, made unless the output is held in it
/// and the activation is linear (with a's explicit padding, an fp32
/// gradient and its padded copy). Workspace: the compute-type kernel plus
/// the staged output of the forward or the staged input gradient of
/// backward-data (when it runs), each in kWorkspaceAlign units (cuDNN's
/// algorithm workspace, chosen at the first step, is not included).
LayerMemory conv_gpu_memory(const ConvMemoryShape& c, bool bf16);

/// Base of Conv2D, Dense and DepthwiseConv2D (Op = Conv2DOp) and Conv2DTranspose (Op = Conv2DTransposeOp):
/// params are {kernel, bias} (bias only with use_bias), y = act(op(x, kernel) + bias), act
/// applied by the backend's op or, when its gradient needs its input, by a KeptActivation.
/// Derived classes implement type(), infer() (setting in_ and out_), param_specs()
/// and describe().
template <class Op>
class ConvLayerBase : public Layer {
 public:
  ConvLayerBase(std::string name, const ConvConfig& c) : Layer(std::move(name)), c_(c), op_(c.geom) {}

  void bind(const std::vector<float*>& params, const std::vector<float*>& grads) override {
    kernel_ = params[0], dkernel_ = grads[0];
    if (c_.use_bias) bias_ = params[1], dbias_ = grads[1];
  }

  /// Reads and writes either type, independently (the backend converts);
  /// fp32 where bf16_convolution says no (fewer than kMinBf16Filters
  /// filters, cuDNN's K, which a GPU runs in tf32 and a CPU in fp32 on fp32
  /// tensors). Grouped convolutions (DepthwiseConv2D, Conv2D groups) stay
  /// fp32 too: they move few bytes per multiply, and cuDNN's grouped bf16
  /// algorithms are not needed for that. A layer whose activation needs its input writes fp32
  /// (kept_activation.h applies the activation to fp32 values) from either type.
  DTypeSupport dtype_support() const override {
    if (!bf16_convolution(conv_filters(), c_.geom.groups)) return DTypeSupport::F32Only;
    return activation_needs_input(c_.activation.kind) ? DTypeSupport::AnyInput : DTypeSupport::Any;
  }

  /// x [N, H, W, Cin] -> y [N, Ho, Wo, filters]. InternalError when x's
  /// per-sample shape differs from the inferred one.
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    Shape ys = out_.with_batch(xt.shape().n);
    y.resize(ys);
    op_.forward(ctx.device, xt.view(), ConvWeights{kernel_, bias_}, fused_activation(c_.activation), y.view());
    kept_.forward(ctx, c_.activation, y);
    if (c_.softmax) softmax_channels(ctx.device, y.data(), y.numel() / size_t(ys.c), ys.c);
  }

  /// The input for the kernel's gradient (none once frozen: the input's
  /// gradient needs only dz and the kernel); the output where the op's own
  /// activation is differentiated from it (an activation kept_ applies keeps z).
  BackwardReads backward_reads() const override { return {!frozen(), !fused_activation(c_.activation).linear()}; }

  /// dz = dy * act'(y) (act'(z) for an activation kept_ applies); dkernel,
  /// dbias from (x, dz); dx[0] (when not nullptr) from dz (one backend call:
  /// Conv2DOp::backward).
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor& y,
                const Tensor& dy, const std::vector<Tensor*>& dx) override {
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    require_type(dy, y.dtype());
    if (c_.softmax)  // Model allows softmax on the last layer only, and training strips it there
      throw InternalError("layer '" + name() + "': backward through a softmax");
    if (dx[0]) {
      require_type(*dx[0], xt.dtype());
      dx[0]->resize(xt.shape());
    }
    ConvBackwardArgs a;
    a.act = fused_activation(c_.activation);
    a.y = {backward_reads().output ? y.raw() : nullptr, y.dtype(), dy.shape(), y.layout()};
    a.dy = kept_.backward(ctx, c_.activation, dy, name()).raw();
    a.x = {backward_reads().inputs ? xt.raw() : nullptr, xt.dtype(), xt.shape(), xt.layout()};
    a.kernel = kernel_;
    a.dkernel = dkernel_;
    a.dbias = dbias_;
    a.dx = dx[0] ? dx[0]->raw() : nullptr;
    op_.backward(ctx.device, a);
  }

  /// conv_gpu_memory for this layer, plus the pre-activation and its
  /// gradient (fp32, the output's size) of an activation kept_ applies.
  LayerMemory gpu_training_memory(const LayerMemoryQuery& q) const override {
    constexpr bool transposed = std::is_same_v<Op, Conv2DTransposeOp>;
    const Shape x = in_.with_batch(q.batch), y = out_.with_batch(q.batch);
    const DType xt = q.inputs.at(0);
    ConvMemoryShape c{transposed ? y : x, transposed ? x : y, transposed ? q.output : xt,
                      transposed ? xt : q.output, c_.geom, conv_filters(),
                      fused_activation(c_.activation).linear(), transposed, q.backward, q.input_gradient};
    LayerMemory m = conv_gpu_memory(c, q.bf16);
    // kept_'s z from the forward, and its dz from a backward.
    if (activation_needs_input(c_.activation.kind)) m.kept += (q.backward ? 2 : 1) * y.numel() * sizeof(float);
    return m;
  }

  /// The op's answer (Conv2DOp::takes_blocked) for a convolution whose
  /// activation the op applies itself (not softmax, not one kept_ applies),
  /// asked for a batch of one: oneDNN's Winograd choice does not depend on
  /// the batch, and were it to, a pass would reorder the blocked tensor
  /// (ConvProblem::blocked_src), not misread it.
  bool takes_blocked(const Device& d, DType in, DType out) override {
    if (c_.softmax || activation_needs_input(c_.activation.kind)) return false;
    return op_.takes_blocked(d, in_.with_batch(1), out_.with_batch(1), in, out);
  }

  OutputActivation strip_output_activation() override {
    return trainer::strip_output_activation(c_.activation, c_.softmax);
  }
  bool has_softmax() const override { return c_.softmax; }

 protected:
  /// Sets in_ to the one per-sample input shape. UserError when there is not
  /// exactly one input.
  void set_input(const std::vector<Shape>& inputs) {
    if (inputs.size() != 1)
      throw UserError(type() + " takes one input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
  }
  /// kind with the kernel size, strides, bias and activation, and the padding
  /// of the convolution mapping `big` pixels to `small` ones (conv_padding),
  /// as the backend applies it.
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override { conv_to_onnx(g, describe(), io); }
  LayerDescription describe_conv(LayerKind kind, const Shape& big, const Shape& small) const {
    const Conv2DParams& g = c_.geom;
    LayerDescription d;
    d.kind = kind;
    d.kh = g.kh, d.kw = g.kw, d.stride_h = g.stride_h, d.stride_w = g.stride_w;
    d.use_bias = c_.use_bias;
    d.activation = c_.activation;
    d.softmax = c_.softmax;
    d.dilation_h = g.dilation_h, d.dilation_w = g.dilation_w;
    d.groups = g.groups;
    d.pad_h = conv_padding(big.h, small.h, g.span_h(), g.stride_h);
    d.pad_w = conv_padding(big.w, small.w, g.span_w(), g.stride_w);
    return d;
  }
  /// kernel [kh, kw, a, b] with Keras's fans of a kernel of that shape:
  /// receptive = kh*kw, fan_in = a*receptive, fan_out = b*receptive; then, with
  /// use_bias, bias [filters] with fan_in = fan_out = filters (Keras's fans of
  /// a 1-D weight); each with its regularizer.
  std::vector<ParamSpec> kernel_and_bias_specs(int a, int b) const {
    const double receptive = double(c_.geom.kh) * c_.geom.kw;
    std::vector<ParamSpec> specs{ParamSpec{"kernel",
                                           {c_.geom.kh, c_.geom.kw, a, b},
                                           c_.kernel_initializer,
                                           a * receptive,
                                           b * receptive,
                                           true,
                                           c_.kernel_regularizer}};
    if (c_.use_bias)
      specs.push_back(ParamSpec{"bias", {c_.filters}, c_.bias_initializer, double(c_.filters), double(c_.filters),
                                true, c_.bias_regularizer});
    return specs;
  }
  /// Sets in_ (one input) and out_ = [Ho, Wo, filters] of the convolution
  /// (Ho = conv_output_length(H, span_h, stride_h, same), Keras's). UserError
  /// when there is not one input or the output would be empty, with the fix.
  void infer_conv(const std::vector<Shape>& inputs, int filters) {
    set_input(inputs);
    out_ = conv_output_shape(in_, c_.geom, filters);
  }
  /// Cuts the channels into `groups` groups (Conv2DParams::groups), before any forward.
  void set_groups(int groups) {
    c_.geom.groups = groups;
    op_ = Op(c_.geom);
  }
  /// The filters of the convolution cuDNN runs (its K): Conv2D's output
  /// channels, Conv2DTranspose's input channels. Valid after infer().
  virtual int conv_filters() const = 0;

  ConvConfig c_;
  Shape in_, out_;  ///< Per-sample input and output shapes from infer().

 private:
  Op op_;
  KeptActivation kept_;
  float *kernel_ = nullptr, *dkernel_ = nullptr, *bias_ = nullptr, *dbias_ = nullptr;
};

}  // namespace trainer
