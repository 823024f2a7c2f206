#pragma once
// What GlobalAveragePooling2D and GlobalMaxPooling2D share: their Keras keys,
// shape inference and description. Keras's output is [N, C] (keepdims
// false, the default) or [N, 1, 1, C] (keepdims true); both are held as
// [N, 1, 1, C] here, the same elements in the same order, so a Reshape to
// (1, 1, C), a Dense or a Multiply with [N, H, W, C] follows either as in
// Keras.
#include "config/params.h"
#include "core/error.h"
#include "nn/data_format.h"
#include "nn/layer.h"
#include "nn/onnx_graph.h"

namespace trainer {

class GlobalPooling2D : public Layer {
 public:
  GlobalPooling2D(std::string name, bool keepdims) : Layer(std::move(name)), keepdims_(keepdims) {}

  /// [1, 1, C]. UserError when the number of inputs is not 1.
  Shape infer(const std::vector<Shape>& inputs) override {
    if (inputs.size() != 1) throw UserError(type() + " takes one input, got " + std::to_string(inputs.size()));
    in_ = inputs[0];
    return Shape{in_.n, 1, 1, in_.c};
  }
  /// One window over the whole input (describe()).
  void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const override { g.pool(describe(), io); }
  bool passes_values() const override { return true; }
  /// Keras's [N, C] without keepdims.
  bool flat_output(bool) const override { return !keepdims_; }

 protected:
  /// A pooling of `kind` with one window over the whole inferred input (what
  /// the layer computes, for exporters).
  LayerDescription describe_window(LayerKind kind) const {
    LayerDescription d;
    d.kind = kind;
    d.kh = d.stride_h = in_.h, d.kw = d.stride_w = in_.w;
    return d;
  }
  Shape in_;  ///< Per-sample input shape from infer().
  bool keepdims_;  ///< Keras's output [N, 1, 1, C] (true) or [N, C].
};

/// Reads data_format (channels_last only) and returns keepdims (bool, default
/// false; either way the output is held as [N, 1, 1, C]). UserError for another value.
inline bool read_global_pooling_keys(ParamReader& p) {
  const bool keepdims = p.get_bool("keepdims", false);
  read_data_format(p);
  return keepdims;
}

}  // namespace trainer
