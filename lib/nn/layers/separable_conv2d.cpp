// SeparableConv2D (Keras): a depthwise convolution (each input channel alone
// with depth_multiplier kernels, as DepthwiseConv2D, no bias) and a 1x1
// convolution mixing its Cin * M channels into `filters`, then the bias and the
// activation: x [N, H, W, Cin] -> z [N, Ho, Wo, Cin * M] -> y [N, Ho, Wo,
// filters]. Weights depthwise_kernel [kh, kw, Cin, M], pointwise_kernel
// [1, 1, Cin * M, filters], bias [filters] (Keras's names and layouts). The
// layer keeps z (and its gradient) on the tower's device between a training
// forward and backward; both convolutions are the backend's Conv2DOp on fp32
// tensors (under bf16 on a GPU the depthwise part computes in tf32, the 1x1
// part, not grouped, in bf16 with conversions around it: docs/gpu.md).
#include "nn/initializers.h"
#include "nn/layers/conv_common.h"
#include "nn/layers/on_device.h"
#include "nn/registry.h"

namespace trainer {

namespace {

class SeparableConv2D final : public Layer {
 public:
  SeparableConv2D(std::string name, const ConvConfig& c, int multiplier, std::string pointwise_initializer,
                  Regularizer pointwise_regularizer)
      : Layer(std::move(name)),
        c_(c),
        multiplier_(multiplier),
        pointwise_initializer_(std::move(pointwise_initializer)),
        pointwise_regularizer_(pointwise_regularizer),
        depthwise_(c.geom),
        pointwise_(Conv2DParams{}) {}
  std::string type() const override { return "SeparableConv2D"; }

  /// [Ho, Wo, filters] (Ho as Conv2D's). UserError when the number of inputs
  /// is not 1 or the output would be empty.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1) throw UserError(type() + " takes one input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    if ((long long)in_.c * multiplier_ > 65536)
      throw UserError("depth_multiplier " + std::to_string(multiplier_) + " gives " +
                      std::to_string((long long)in_.c * multiplier_) +
                      " depthwise channels, more than 65536; use a smaller depth_multiplier");
    mid_ = conv_output_shape(in_, c_.geom, in_.c * multiplier_);
    out_ = mid_;
    out_.c = c_.filters;
    Conv2DParams g = c_.geom;
    g.groups = in_.c;
    depthwise_ = Conv2DOp(g);
    return out_;
  }

  /// depthwise_kernel [kh, kw, Cin, M] (fans Cin*kh*kw and M*kh*kw, Keras's of
  /// that shape), pointwise_kernel [1, 1, Cin * M, filters] (fans Cin * M and
  /// filters), bias [filters] (with use_bias).
  std::vector<ParamSpec> param_specs() const override {
    const double receptive = double(c_.geom.kh) * c_.geom.kw;
    std::vector<ParamSpec> specs{
        ParamSpec{"depthwise_kernel", {c_.geom.kh, c_.geom.kw, in_.c, multiplier_}, c_.kernel_initializer,
                  in_.c * receptive, multiplier_ * receptive, true, c_.kernel_regularizer},
        ParamSpec{"pointwise_kernel", {1, 1, mid_.c, c_.filters}, pointwise_initializer_, double(mid_.c),
                  double(c_.filters), true, pointwise_regularizer_}};
    if (c_.use_bias)
      specs.push_back(ParamSpec{"bias", {c_.filters}, c_.bias_initializer, double(c_.filters), double(c_.filters),
                                true, c_.bias_regularizer});
    return specs;
  }
  void bind(const std::vector<float*>& params, const std::vector<float*>& grads) override {
    depthwise_kernel_ = params[0], ddepthwise_kernel_ = grads[0];
    pointwise_kernel_ = params[1], dpointwise_kernel_ = grads[1];
    if (c_.use_bias) bias_ = params[2], dbias_ = grads[2];
  }

  /// x [N, H, W, Cin] -> y [N, Ho, Wo, filters] through z [N, Ho, Wo, Cin * M].
  void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) override {
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    const int n = xt.shape().n;
    // An inference forward (validation, predict) leaves the training forward's z to backward.
    Tensor inference_z(Shape{}, ctx.device);
    Tensor& z = ctx.training ? on_device(z_, ctx.device) : inference_z;
    z.resize(mid_.with_batch(n));
    y.resize(out_.with_batch(n));
    depthwise_.forward(ctx.device, xt.view(), ConvWeights{depthwise_kernel_, nullptr}, Activation{}, z.view());
    pointwise_.forward(ctx.device, z.view(), ConvWeights{pointwise_kernel_, bias_}, fused_activation(c_.activation),
                       y.view());
    kept_.forward(ctx, c_.activation, y);
    if (c_.softmax) softmax_channels(ctx.device, y.data(), y.numel() / size_t(out_.c), out_.c);
  }
  /// dz from the pointwise convolution (with the activation's gradient and
  /// dbias), then dx and ddepthwise_kernel from dz. x, y and z are the last
  /// training forward's.
  void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor& y, const Tensor& dy,
                const std::vector<Tensor*>& dx) override {
    if (c_.softmax)  // Model allows softmax on the last layer only, and training strips it there
      throw InternalError("layer '" + name() + "': backward through a softmax");
    const Tensor& xt = *x[0];
    require_sample_shape(xt.shape(), in_);
    Tensor& dz = on_device(dz_, ctx.device);
    dz.resize(z_.shape());
    const bool want_dz = dx[0] || ddepthwise_kernel_;  // neither: a frozen layer whose input needs no gradient
    ConvBackwardArgs pointwise;
    pointwise.act = fused_activation(c_.activation);
    pointwise.y = {y.raw(), y.dtype(), dy.shape()};
    pointwise.dy = kept_.backward(ctx, c_.activation, dy, name()).raw();
    pointwise.x = z_.view();
    pointwise.kernel = pointwise_kernel_;
    pointwise.dkernel = dpointwise_kernel_;
    pointwise.dbias = dbias_;
    pointwise.dx = want_dz ? dz.raw() : nullptr;
    pointwise_.backward(ctx.device, pointwise);
    if (!want_dz) return;
    if (dx[0]) dx[0]->resize(xt.shape());
    ConvBackwardArgs depthwise;
    depthwise.y = {nullptr, dz.dtype(), dz.shape()};
    depthwise.dy = dz.raw();
    depthwise.x = xt.view();
    depthwise.kernel = depthwise_kernel_;
    depthwise.dkernel = ddepthwise_kernel_;
    depthwise.dx = dx[0] ? dx[0]->raw() : nullptr;
    depthwise_.backward(ctx.device, depthwise);
  }

  /// Kind SeparableConv2D with the depthwise convolution's window and padding
  /// (groups = Cin), the bias and the activation (the exporter writes a
  /// grouped Conv and a 1x1 Conv).
  LayerDescription describe() const override {
    const Conv2DParams& g = c_.geom;
    LayerDescription d;
    d.kind = LayerKind::SeparableConv2D;
    d.kh = g.kh, d.kw = g.kw, d.stride_h = g.stride_h, d.stride_w = g.stride_w;
    d.dilation_h = g.dilation_h, d.dilation_w = g.dilation_w;
    d.groups = in_.c;
    d.pad_h = conv_padding(in_.h, mid_.h, g.span_h(), g.stride_h);
    d.pad_w = conv_padding(in_.w, mid_.w, g.span_w(), g.stride_w);
    d.use_bias = c_.use_bias;
    d.activation = c_.activation;
    d.softmax = c_.softmax;
    return d;
  }
  /// The depthwise convolution (no bias, linear), then a 1x1 Conv2D with the
  /// pointwise kernel, the bias and the activation.
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override {
    const LayerDescription d = describe();
    LayerDescription depthwise = d;
    depthwise.kind = LayerKind::Conv2D;
    depthwise.use_bias = false;
    depthwise.activation = Activation{};
    depthwise.softmax = false;
    const std::string between = io.name + "/depthwise_output";
    conv_to_onnx(g, depthwise,
                 OnnxLayerIO{io.name + "/depthwise", io.ins, between,
                             {{"depthwise_kernel", &io.weight("depthwise_kernel")}}});
    LayerDescription pointwise = d;
    pointwise.kind = LayerKind::Conv2D;
    pointwise.kh = pointwise.kw = pointwise.stride_h = pointwise.stride_w = 1;
    pointwise.dilation_h = pointwise.dilation_w = pointwise.groups = 1;
    pointwise.pad_h = pointwise.pad_w = PadPair{};
    OnnxLayerIO second{io.name, {between}, io.out, {{"kernel", &io.weight("pointwise_kernel")}}};
    if (d.use_bias) second.weights["bias"] = &io.weight("bias");
    conv_to_onnx(g, pointwise, second);
  }
  OutputActivation strip_output_activation() override {
    return trainer::strip_output_activation(c_.activation, c_.softmax);
  }
  bool has_softmax() const override { return c_.softmax; }

 private:
  ConvConfig c_;  ///< filters, the depthwise geometry, the depthwise_* and bias keys, activation.
  int multiplier_;
  std::string pointwise_initializer_;
  Regularizer pointwise_regularizer_;
  Shape in_, mid_, out_;  ///< Per-sample input, depthwise output and output shapes from infer().
  Conv2DOp depthwise_, pointwise_;
  Tensor z_, dz_;  ///< The depthwise output and its gradient, on the tower's device.
  KeptActivation kept_;  ///< The activation when its gradient needs its input.
  float *depthwise_kernel_ = nullptr, *ddepthwise_kernel_ = nullptr, *pointwise_kernel_ = nullptr,
        *dpointwise_kernel_ = nullptr, *bias_ = nullptr, *dbias_ = nullptr;
};

}  // namespace

std::unique_ptr<Layer> make_separable_conv2d(ParamReader& p, const std::string& name) {
  ConvConfig c;
  c.filters = p.get_int("filters", std::nullopt, 1, 65536);
  read_conv_geometry(p, c);
  const int multiplier = p.get_int("depth_multiplier", 1, 1, 65536);
  read_affine_keys(p, c, "depthwise");
  std::string pointwise_initializer =
      p.get_string("pointwise_initializer", std::string("glorot_uniform"), initializer_names());
  const Regularizer pointwise_regularizer = read_regularizer(p, "pointwise_regularizer");
  return std::make_unique<SeparableConv2D>(name, c, multiplier, std::move(pointwise_initializer),
                                           pointwise_regularizer);
}

}  // namespace trainer
