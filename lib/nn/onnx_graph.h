#pragma once
// The ONNX graph that layers export themselves into (Layer::to_onnx): nodes,
// constants and the pieces several layers share (activations, crops,
// broadcasts). Tensors are named strings, in NCHW as ONNX and OpenCV's dnn
// expect; opset 13 (nn/onnx_export.h). Protobuf stays behind this header.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/ops.h"
#include "io/checkpoint.h"
#include "nn/activation.h"
#include "nn/layer_description.h"

namespace onnx {
class GraphProto;
class NodeProto;
}  // namespace onnx

namespace trainer {

/// The weights of one layer by Keras name (e.g. "kernel", "bias"), in Keras
/// layout (Trainer::weights()).
using LayerWeights = std::map<std::string, const WeightRecord*>;

/// What one layer's export reads and writes.
struct OnnxLayerIO {
  std::string name;              ///< The layer's name: the prefix of its nodes' and constants' names.
  std::vector<std::string> ins;  ///< Its input tensors, in input order.
  std::string out;               ///< The tensor it computes.
  LayerWeights weights;          ///< Its weights.
  /// The weight named key; InternalError naming the layer when it has none.
  const WeightRecord& weight(const std::string& key) const;
};

/// A node just added, for its attributes (ONNX AttributeProto); each setter
/// returns the node.
class OnnxNode {
 public:
  OnnxNode& ints(const std::string& key, const std::vector<int64_t>& values);
  OnnxNode& integer(const std::string& key, int64_t value);
  OnnxNode& real(const std::string& key, float value);
  OnnxNode& text(const std::string& key, const std::string& value);

 private:
  friend class OnnxGraph;
  explicit OnnxNode(onnx::NodeProto& node) : node_(node) {}
  onnx::NodeProto& node_;
};

/// Adds nodes and initializers to one graph (kept by reference).
class OnnxGraph {
 public:
  explicit OnnxGraph(onnx::GraphProto& graph) : graph_(graph) {}

  /// Adds node op(inputs) -> output, named name.
  OnnxNode node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                const std::string& name);
  /// Adds a float32 initializer of shape dims; returns its name.
  std::string constant(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  /// Adds a 1-D int64 initializer; returns its name.
  std::string int_constant(const std::string& name, const std::vector<int64_t>& values);

  /// Adds a(in) -> out (opset 13 operators, whose formulas match
  /// backend/elementwise_math.h). InternalError for Linear.
  void activation(Activation a, const std::string& in, const std::string& out, const std::string& name);
  /// Adds what follows a layer's linear part: d's activation, or its softmax
  /// over the channels (Softmax on axis 1).
  void output_activation(const LayerDescription& d, const std::string& in, const std::string& out,
                         const std::string& name);
  /// Adds a Slice in -> out removing rows h and columns w (before: top/left,
  /// after: bottom/right) of an NCHW tensor.
  void crop(const std::string& in, PadPair h, PadPair w, const std::string& out, const std::string& name);
  /// Adds the nodes bringing in, of per-sample shape from (1 channel, or 1x1
  /// pixels of to's channels or 1), to shape to, as Keras broadcasts; returns
  /// the result's name. OpenCV's dnn (4.6) broadcasts no Mul or Add input
  /// (ONNX would): one channel goes through an Expand over the channels, 1x1
  /// pixels through a nearest Resize to H x W, then for one value the Expand.
  std::string broadcast(const std::string& in, const Shape& from, const Shape& to, const std::string& name);
  /// Adds a window pooling (d: the layer's describe(), of kind MaxPooling2D or
  /// AveragePooling2D) with explicit pads: MaxPool, or AveragePool without the
  /// padding counted (count_include_pad 0, TensorFlow's mean).
  void pool(const LayerDescription& d, const OnnxLayerIO& io);
  /// Adds out = gamma[c] * in + beta[c] over the c channels of an NCHW tensor
  /// (w's "gamma" and "beta", 1 and 0 when absent) as a BatchNormalization of
  /// mean 0, variance 1 and epsilon 0: exact, and read by OpenCV 4.6.
  void channel_affine(const LayerWeights& w, int64_t c, const std::string& in, const std::string& out,
                      const std::string& name);

 private:
  onnx::GraphProto& graph_;
};

}  // namespace trainer
