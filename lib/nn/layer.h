#pragma once
// Layer: one node of a model. Each layer is written once, in one file under
// nn/layers/, and does shape inference, forward and backward for [N, H, W, C]
// tensors (as Caffe's setup/reshape/forward/backward): fp32, or bf16 where the
// layer says it takes them (dtype_support) and the model stores its
// activations in bf16 (a GPU tower with training.precision bf16). Layers are
// built from their YAML entry by a factory registered in nn/registry.cpp.
//
// Ownership: a layer does not own its weights. The tower (replica) allocates one
// contiguous parameter buffer and one contiguous gradient buffer for the whole
// model and bind()s views into them, so one all-reduce covers every gradient.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/tensor.h"
#include "nn/layer_description.h"
#include "nn/output_activation.h"
#include "nn/regularizer.h"

namespace trainer {

/// The usual cause of a merge layer's (Add, Concatenate) inputs differing in
/// height or width, appended to their shape errors.
inline constexpr const char* kMergeSizeHint =
    "; check the padding and the pooling/upsampling sizes: 'valid' padding shrinks a convolution's output by "
    "kernel_size - 1 (use padding: same, as the seed U-Net, or crop the larger input with a Cropping2D layer), "
    "and an odd size before a pooling loses a row (use an input size divisible by 2 to the number of "
    "poolings)";

class Communicator;
class OnnxGraph;
struct OnnxLayerIO;

/// What a forward or backward call needs to know about the step.
struct Context {
  bool training = false;        ///< Train mode: batch statistics in BN, dropout active.
  Communicator* comm = nullptr; ///< Collective ops among towers (synchronized BN); may be null.
  int rank = 0;                 ///< This tower's rank in comm.
  uint64_t seed = 0;            ///< Run seed (dropout masks derive from seed, step, sample index).
  uint64_t step = 0;            ///< Global training step (iteration) counter.
  int sample_offset = 0;        ///< Global index of this tower's first sample in the global batch.
  int global_batch = 0;         ///< Samples in the global batch (all towers; synchronized BN's count).
  Device device;                ///< Where this tower's tensors live and its ops run.
};

/// One weight tensor of a layer, in Keras's layout and with Keras's name.
struct ParamSpec {
  std::string name;              ///< "kernel", "bias", "gamma", "beta", "moving_mean", ...
  std::vector<int> shape;        ///< Keras layout, e.g. Conv2D kernel [kh, kw, in, out].
  std::string initializer;       ///< "glorot_uniform", "zeros", "ones", "he_normal", ...
  double fan_in = 1, fan_out = 1;  ///< As Keras computes them for this shape.
  bool trainable = true;         ///< false: state such as BN moving statistics (no gradient).
  Regularizer regularizer;       ///< Keras's kernel_regularizer / bias_regularizer (trainable weights).
  size_t numel() const {
    size_t n = 1;
    for (int d : shape) n *= size_t(d);
    return n;
  }
};

/// Which activation types (core/dtype.h) a layer's forward and backward take.
enum class DTypeSupport {
  F32Only,  ///< Inputs, output and their gradients are fp32.
  Uniform,  ///< Any type, the same for every input and the output (pooling, concatenation).
  Any,      ///< Each input and the output of any type, independently (convolutions convert as they read).
  /// Inputs of any type, the output fp32 (a convolution whose activation, applied
  /// after it in fp32, needs its input: nn/layers/kept_activation.h).
  AnyInput,
};

/// Device memory a layer holds during a training step on a GPU tower beyond
/// its output and its output's gradient (which the model holds), in bytes
/// (Model::layer_memory adds them up for the memory plan, train/memory_plan.h).
struct LayerMemory {
  size_t kept = 0;       ///< Held from forward to backward, and kept across steps.
  size_t transient = 0;  ///< Held during the layer's own backward only.
  size_t workspace = 0;  ///< The largest request of one of its calls on the tower's shared workspace.
};

/// What a layer's memory depends on: the batch on the tower and the types
/// the model stores its inputs and output in.
struct LayerMemoryQuery {
  int batch = 0;                ///< Samples on the tower.
  std::vector<DType> inputs;    ///< Each input's type, in input order.
  DType output = DType::F32;    ///< The output's type.
  bool bf16 = false;            ///< The tower computes in bf16 (training.precision bf16).
  bool backward = true;         ///< backward() runs (the layer reaches the output and needs a gradient).
  bool input_gradient = true;   ///< backward() computes dx of the (first) input (Model::needs_gradient of it).
};

/// What a layer's backward() reads of its last training forward besides dy:
/// the values of its inputs and of its output (their shapes it may always
/// read). The model gives the storage of an output that no later backward
/// reads to other tensors (Model::activation_bytes), so a tensor a layer
/// says it does not read raises InternalError when it is (Tensor::raw).
struct BackwardReads {
  bool inputs = true;  ///< Reads every input's values (some layers read only one; all are kept then).
  bool output = true;  ///< Reads its output's values.
};

class Layer {
 public:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  /// Keras class name, e.g. "Conv2D".
  virtual std::string type() const = 0;

  /// Shape inference on per-sample shapes (n ignored). Called once, before
  /// param_specs(). Throws UserError with a message (without location; the
  /// model prefixes the layer's file:line:col) when the inputs do not fit.
  virtual Shape infer(const std::vector<Shape>& inputs) = 0;
  /// Weights, valid after infer(). Trainable ones first is not required.
  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  /// Keras's `trainable: false` (layer.trainable = False): the model makes
  /// every weight of the layer non-trainable (bind() then gets nullptr for
  /// their gradients, and backward() must compute dx without them), and the
  /// layer computes in inference mode where that differs: a frozen
  /// BatchNormalization normalises with, and keeps, its moving statistics
  /// (Keras 3's BatchNormalization docs). Called by the model once, before
  /// bind(), on layers with weights only (elsewhere the key changes nothing).
  void freeze() { frozen_ = true; }
  bool frozen() const { return frozen_; }
  /// Views into the tower's buffers, one per param_specs() entry, same order.
  /// grads[i] is nullptr for non-trainable entries (all of them once frozen).
  virtual void bind(const std::vector<float*>& params, const std::vector<float*>& grads) {
    (void)params, (void)grads;
  }

  /// The activation types forward() and backward() take on a GPU (the CPU
  /// backend is fp32 only); the model never passes a layer other ones.
  virtual DTypeSupport dtype_support() const { return DTypeSupport::F32Only; }

  /// y <- f(x). y is resized by the layer (its type, set by the model, is
  /// kept). x.size() equals the number of inputs.
  virtual void forward(const Context& ctx, const std::vector<const Tensor*>& x, Tensor& y) = 0;
  /// Given dy = dL/dy (of y's type), writes dx[i] = dL/dx[i] (overwriting;
  /// dx[i] may be nullptr when not needed; the layer resizes non-null dx[i]
  /// to x[i]'s shape, keeping the type the model gave it, x[i]'s) and
  /// overwrites its parameter gradients. x and y are the tensors of the last
  /// forward call in training mode; those backward_reads() says it does not
  /// read come with their storage released (their shapes only), and their
  /// memory may hold other tensors by then, so no pointer kept from forward
  /// may be read either.
  virtual void backward(const Context& ctx, const std::vector<const Tensor*>& x, const Tensor& y,
                        const Tensor& dy, const std::vector<Tensor*>& dx) = 0;
  /// What backward() reads (BackwardReads); default both, which is always safe.
  virtual BackwardReads backward_reads() const { return {}; }

  /// Whether on device d, with input and output types `in` and `out`, the
  /// layer reads its input and writes its output in Layout::Blocked16
  /// without reordering them (a CPU Winograd convolution). The model keeps
  /// that layout between two such layers (Model::set_activation_layouts)
  /// and then passes them tensors of either layout; every other layer gets
  /// NHWC only. Default: false.
  virtual bool takes_blocked(const Device& d, DType in, DType out) {
    (void)d, (void)in, (void)out;
    return false;
  }

  /// The device memory a training step of this layer holds on a GPU tower
  /// (LayerMemory), as its CUDA code allocates it; default none. Valid
  /// after infer().
  virtual LayerMemory gpu_training_memory(const LayerMemoryQuery& q) const {
    (void)q;
    return {};
  }

  /// True when forward/backward call collectives (synchronized BN): the model
  /// then calls them even on a tower with no samples this step (n = 0).
  virtual bool collective() const { return false; }
  /// True when a training forward and backward queue the same device work,
  /// with the same arguments, at every step of one batch shape, so that a GPU
  /// tower may record them once and replay them (training.cuda_graphs);
  /// false where a kernel takes a per-step value (Dropout's mask key).
  virtual bool replayable() const { return true; }
  /// What the layer computes in inference mode, with the hyper-parameters it
  /// was built with (for exporters). Valid after infer() (window layers report
  /// their padding for the inferred shapes).
  virtual LayerDescription describe() const = 0;
  /// Adds what the layer computes in inference mode to g (nn/onnx_graph.h):
  /// io.out from io.ins, NCHW tensors, with the layer's weights io.weights
  /// (Keras names and layouts). docs/export.md lists each layer's operators.
  /// InternalError when a weight is missing, or for a layer that has
  /// no place in an exported graph (an Input after the first layer).
  virtual void to_onnx(OnnxGraph& g, const OnnxLayerIO& io) const = 0;
  /// Whether the output holds the input's values, moved, kept, resized or
  /// pooled but not computed on (Dropout, a linear Activation, UpSampling2D,
  /// Cropping2D, ZeroPadding2D, Reshape, the window poolings): an activation
  /// before such a layer is still the model's output activation.
  virtual bool passes_values() const { return identity_at_inference(); }
  /// Whether the output is the input at inference (Dropout, a linear
  /// Activation): an exported graph reads the input's tensor instead.
  virtual bool identity_at_inference() const { return false; }
  /// For the last layer: if it ends in a sigmoid or a softmax, drop it (so the
  /// output is logits, for a loss fused with it) and say which.
  virtual OutputActivation strip_output_activation() { return OutputActivation::None; }
  /// Whether the layer ends in a softmax over the channels (activation:
  /// softmax), which only a model's last layer may have (Model checks it).
  virtual bool has_softmax() const { return false; }
  /// Whether Keras's output is [N, C] rather than [N, H, W, C] (held as
  /// [N, 1, 1, C] here either way), given whether the (first) input is: a
  /// global pooling without keepdims makes it so, a Reshape to one size too,
  /// and other layers keep their input's (Dense on [N, C] gives [N, units]).
  /// What summary() prints.
  virtual bool flat_output(bool input_flat) const { return input_flat; }

 protected:
  /// InternalError "layer '<name>': a <t's type> tensor where <want> is
  /// expected" unless t is of type `want` (a broken activation-type plan).
  void require_type(const Tensor& t, DType want) const {
    if (t.dtype() != want)
      throw InternalError("layer '" + name_ + "': a " + dtype_name(t.dtype()) + " tensor where " +
                          dtype_name(want) + " is expected");
  }
  /// InternalError "layer '<name>': input [H, W, C] but inferred [H', W', C']"
  /// unless a forward input's per-sample shape is the one infer() saw.
  void require_sample_shape(const Shape& got, const Shape& inferred) const {
    if (!got.same_sample(inferred))
      throw InternalError("layer '" + name_ + "': input " + got.hwc() + " but inferred " + inferred.hwc());
  }

 private:
  std::string name_;
  bool frozen_ = false;
};

}  // namespace trainer
