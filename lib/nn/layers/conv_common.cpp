#include "nn/layers/conv_common.h"

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

}  // namespace trainer
