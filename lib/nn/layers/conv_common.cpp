#include "nn/layers/conv_common.h"

#include <algorithm>

#include "nn/data_format.h"
#include "nn/initializers.h"

namespace trainer {

ConvConfig read_conv_config(ParamReader& p) {
  ConvConfig c;
  c.filters = p.get_int("filters", std::nullopt, 1, 65536);
  read_conv_geometry(p, c);
  read_affine_keys(p, c);
  return c;
}

void read_conv_geometry(ParamReader& p, ConvConfig& c) {
  read_data_format(p);
  std::vector<int> k = p.get_int_pair("kernel_size", std::nullopt, 1, 1024);
  std::vector<int> s = p.get_int_pair("strides", std::vector<int>{1, 1}, 1, 1024);
  c.geom.kh = k[0], c.geom.kw = k[1];
  c.geom.stride_h = s[0], c.geom.stride_w = s[1];
  c.geom.same_padding = p.get_string("padding", std::string("valid"), {"valid", "same"}) == "same";
  std::vector<int> d = p.get_int_pair("dilation_rate", std::vector<int>{1, 1}, 1, 1024);
  c.geom.dilation_h = d[0], c.geom.dilation_w = d[1];
  if ((d[0] > 1 || d[1] > 1) && (s[0] > 1 || s[1] > 1))
    p.fail("dilation_rate", "is " + window_text(d[0], d[1]) + " with strides " + window_text(s[0], s[1]) +
                                ", which Keras does not allow either; use strides: 1 with a dilation_rate, or "
                                "dilation_rate: 1 with strides");
}

void read_affine_keys(ParamReader& p, ConvConfig& c, const std::string& kernel) {
  c.activation = read_activation(p, c.softmax);
  c.use_bias = p.get_bool("use_bias", true);
  c.kernel_initializer =
      p.get_string(kernel + "_initializer", std::string("glorot_uniform"), initializer_names());
  c.bias_initializer = p.get_string("bias_initializer", std::string("zeros"), initializer_names());
  c.kernel_regularizer = read_regularizer(p, kernel + "_regularizer");
  c.bias_regularizer = read_regularizer(p, "bias_regularizer");
}

std::string window_text(int h, int w) { return std::to_string(h) + "x" + std::to_string(w); }

Shape conv_output_shape(const Shape& in, const Conv2DParams& g, int filters) {
  const int ho = conv_output_length(in.h, g.span_h(), g.stride_h, g.same_padding);
  const int wo = conv_output_length(in.w, g.span_w(), g.stride_w, g.same_padding);
  if (ho <= 0 || wo <= 0) {
    const bool dilated = g.dilation_h > 1 || g.dilation_w > 1;
    throw UserError("input is " + window_text(in.h, in.w) + " but kernel_size is " + window_text(g.kh, g.kw) +
                    (dilated ? " (spanning " + window_text(g.span_h(), g.span_w()) + " with dilation_rate " +
                                   window_text(g.dilation_h, g.dilation_w) + ")"
                             : std::string()) +
                    " with padding 'valid'; use padding: same or a smaller kernel_size" +
                    (dilated ? " or dilation_rate" : ""));
  }
  return Shape{in.n, ho, wo, filters};
}

Pool2DParams read_pool_params(ParamReader& p) {
  Pool2DParams g;
  read_data_format(p);
  std::vector<int> pool = p.get_int_pair("pool_size", std::vector<int>{2, 2}, 1, 1024);
  // Keras: strides None (null, or left out) means strides = pool_size.
  std::vector<int> s = p.given("strides") ? p.get_int_pair("strides", pool, 1, 1024) : pool;
  g.ph = pool[0], g.pw = pool[1];
  g.stride_h = s[0], g.stride_w = s[1];
  g.same_padding = p.get_string("padding", std::string("valid"), {"valid", "same"}) == "same";
  return g;
}

Shape pool_output_shape(const Shape& in, const Pool2DParams& p) {
  const int ho = conv_output_length(in.h, p.ph, p.stride_h, p.same_padding);
  const int wo = conv_output_length(in.w, p.pw, p.stride_w, p.same_padding);
  if (ho <= 0 || wo <= 0)
    throw UserError("input is " + window_text(in.h, in.w) + " but pool_size is " + window_text(p.ph, p.pw) +
                    " with padding 'valid'; use padding: same or a smaller pool_size");
  return Shape{in.n, ho, wo, in.c};
}

namespace {

/// Keras kernel [kh, kw, A, B] -> ONNX [B, A, kh, kw]. Conv2D (A = in, B = out)
/// gives Conv's [out, in, kh, kw]; Conv2DTranspose (A = out, B = in) gives
/// ConvTranspose's [in, out, kh, kw].
std::vector<float> keras_kernel_to_onnx(const WeightRecord& k) {
  const bool dense = k.shape.size() == 2;  // a Dense kernel [a, b]: a 1x1 one
  const int kh = dense ? 1 : k.shape[0], kw = dense ? 1 : k.shape[1];
  const int a = k.shape[k.shape.size() - 2], b = k.shape[k.shape.size() - 1];
  std::vector<float> out(k.values.size());
  for (int y = 0; y < kh; ++y)
    for (int x = 0; x < kw; ++x)
      for (int i = 0; i < a; ++i)
        for (int o = 0; o < b; ++o)
          out[((size_t(o) * a + i) * kh + y) * kw + x] = k.values[((size_t(y) * kw + x) * a + i) * b + o];
  return out;
}

/// The kernel in the grouped layout: a DepthwiseConv2D's depthwise_kernel [kh, kw, Cin, M] as [kh, kw, 1, Cin * M].
WeightRecord grouped_kernel(const OnnxLayerIO& io) {
  const auto depthwise = io.weights.find("depthwise_kernel");
  if (depthwise == io.weights.end()) return io.weight("kernel");
  WeightRecord kernel = *depthwise->second;
  kernel.shape = {kernel.shape[0], kernel.shape[1], 1, kernel.shape[2] * kernel.shape[3]};
  return kernel;
}

}  // namespace

void conv_to_onnx(OnnxGraph& g, const LayerDescription& d, const OnnxLayerIO& io) {
  const std::string& name = io.name;
  const WeightRecord kernel = grouped_kernel(io);
  const bool conv = d.kind == LayerKind::Conv2D;
  const size_t rank = kernel.shape.size();  // [kh, kw, a, c] (a per group), or a Dense layer's [a, c]
  const int a = kernel.shape[rank - 2], c = kernel.shape[rank - 1];
  std::vector<std::string> inputs{io.ins[0],
                                  g.constant(name + "/kernel", {c, a, d.kh, d.kw}, keras_kernel_to_onnx(kernel))};
  if (d.use_bias) {
    const WeightRecord& bias = io.weight("bias");
    inputs.push_back(g.constant(name + "/bias", {int64_t(bias.values.size())}, bias.values));
  }
  const bool act = !d.activation.linear() || d.softmax;
  const std::string pre = act ? name + "/preactivation" : io.out;
  // TensorFlow's 'same' puts the extra pixel of an odd padding at the end.
  const PadPair ph = d.pad_h, pw = d.pad_w;
  const int sh = conv ? 0 : std::min(ph.before, ph.after), sw = conv ? 0 : std::min(pw.before, pw.after);
  const bool slice = !conv && (ph.before != ph.after || pw.before != pw.after);
  const std::string conv_out = slice ? name + "/uncropped" : pre;
  OnnxNode n = g.node(conv ? "Conv" : "ConvTranspose", inputs, conv_out, name);
  n.ints("kernel_shape", {d.kh, d.kw}).ints("strides", {d.stride_h, d.stride_w});
  if (conv) {
    n.ints("pads", {ph.before, pw.before, ph.after, pw.after});
    if (d.groups > 1) n.integer("group", d.groups);
    if (d.dilation_h > 1 || d.dilation_w > 1) n.ints("dilations", {d.dilation_h, d.dilation_w});
  } else {
    n.ints("pads", {sh, sw, sh, sw});
    // Keras gives in*stride pixels even when the kernel is smaller than the
    // stride, ONNX (in-1)*stride + k: output_padding adds what is missing.
    const int extra_h = std::max(0, d.stride_h - d.kh), extra_w = std::max(0, d.stride_w - d.kw);
    if (extra_h || extra_w) n.ints("output_padding", {extra_h, extra_w});
  }
  if (slice)
    g.crop(conv_out, PadPair{ph.before - sh, ph.after - sh}, PadPair{pw.before - sw, pw.after - sw}, pre,
           name + "/crop");
  if (act) g.output_activation(d, pre, io.out, name + "/activation");
}

namespace {
constexpr size_t aligned(size_t bytes) { return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }
}  // namespace

LayerMemory conv_gpu_memory(const ConvMemoryShape& c, bool bf16) {
  const bool half = bf16 && bf16_convolution(c.filters, c.geom.groups);
  const DType compute = half ? DType::BF16 : DType::F32;
  const size_t elem = dtype_size(compute);
  const PadPair ph = conv_padding(c.a.h, c.b.h, c.geom.span_h(), c.geom.stride_h);
  const PadPair pw = conv_padding(c.a.w, c.b.w, c.geom.span_w(), c.geom.stride_w);
  const bool explicit_pad = ph.before != ph.after || pw.before != pw.after;
  // a as cuDNN sees it: padded only where the padding is uneven (else cuDNN pads).
  const size_t a_bytes = explicit_pad ? size_t(c.a.n) * (c.a.h + ph.before + ph.after) *
                                            (c.a.w + pw.before + pw.after) * c.a.c * elem
                                      : c.a.numel() * elem;
  const size_t b_bytes = c.b.numel() * elem;
  const size_t w_bytes = size_t(c.geom.kh) * c.geom.kw * (c.a.c / c.geom.groups) * c.b.c * elem;
  const bool a_staged = c.a_type != compute || explicit_pad, b_staged = c.b_type != compute;
  // The input is x (Conv2D: a, Conv2DTranspose: b), the output y (the other side).
  const bool x_staged = c.transposed ? b_staged : a_staged, y_staged = c.transposed ? a_staged : b_staged;
  const size_t x_bytes = c.transposed ? b_bytes : a_bytes, y_bytes = c.transposed ? a_bytes : b_bytes;
  LayerMemory m;
  m.kept = x_staged ? x_bytes : 0;
  if (c.backward && (y_staged || !c.linear)) {
    const Shape& y = c.transposed ? c.a : c.b;
    // A transposed convolution's padded dz: the fp32 gradient, then its padded copy.
    m.transient = c.transposed && explicit_pad ? y.numel() * sizeof(float) + a_bytes : y.numel() * elem;
  }
  const size_t forward = y_staged ? aligned(y_bytes) : 0;
  const size_t backward_data = c.input_gradient && x_staged ? aligned(x_bytes) : 0;
  m.workspace = aligned(w_bytes) + std::max(forward, backward_data);
  return m;
}

}  // namespace trainer
