#include "nn/layers/conv_common.h"

#include "nn/initializers.h"

namespace trainer {

ConvConfig read_conv_config(ParamReader& p) {
  ConvConfig c;
  c.filters = p.get_int("filters", std::nullopt, 1, 65536);
  std::vector<int> k = p.get_int_pair("kernel_size", std::nullopt, 1, 1024);
  std::vector<int> s = p.get_int_pair("strides", std::vector<int>{1, 1}, 1, 1024);
  c.geom.kh = k[0], c.geom.kw = k[1];
  c.geom.stride_h = s[0], c.geom.stride_w = s[1];
  c.geom.same_padding = p.get_string("padding", std::string("valid"), {"valid", "same"}) == "same";
  c.activation = read_activation(p);
  c.use_bias = p.get_bool("use_bias", true);
  c.kernel_initializer =
      p.get_string("kernel_initializer", std::string("glorot_uniform"), initializer_names());
  c.bias_initializer = p.get_string("bias_initializer", std::string("zeros"), initializer_names());
  return c;
}

std::string window_text(int h, int w) { return std::to_string(h) + "x" + std::to_string(w); }

}  // namespace trainer
