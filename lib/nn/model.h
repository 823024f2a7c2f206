#pragma once
// Model: the layers of a config's model section as a DAG (each layer takes the
// previous layer's output unless it names `inputs`, which must be earlier
// layers), with shape inference at build time, a Keras-style summary, and
// forward/backward over [N, H, W, C] batches.
//
// A Model does not own its weights: the tower allocates three flat buffers
// (trainable parameters, their gradients, non-trainable state such as BN
// moving statistics) of the sizes reported here, on its device, and binds
// them, so gradients sit in one contiguous buffer for the all-reduce. The
// model's activations and gradients live on the device given to set_device().
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/tensor.h"
#include "nn/layer.h"

namespace trainer {

/// Where one weight of one layer lives in the tower's flat buffers.
struct WeightSlot {
  int layer = 0;          ///< Index into Model::layers().
  ParamSpec spec;         ///< Name, Keras shape, initialiser, trainable.
  size_t offset = 0;      ///< Into the parameter buffer (trainable) or the state buffer.
};

/// Wall time one layer took while profiling (Model::set_profiling).
struct LayerTime {
  std::string name, type;  ///< The layer's name and Keras type.
  double forward_s = 0;    ///< Seconds in forward(), summed over calls.
  double backward_s = 0;   ///< Seconds in backward() (incl. summing gradients of shared inputs), summed.
  long calls = 0;          ///< forward() calls timed (layers skipped for an empty batch are not counted).
  DType output = DType::F32;  ///< How the layer's output is stored (set_activation_type).
};

class Model {
 public:
  /// Builds every layer through its factory and infers all shapes. Throws
  /// UserError "<file>:<line>:<col>: layer '<name>' (<Type>): <problem>" for
  /// bad layer keys and shapes that do not fit (e.g. Concatenate of 32x32 and 31x31).
  Model(const ModelConfig& config, const std::string& file);

  const std::string& name() const { return name_; }
  /// Number of layers (the Input layer included).
  int num_layers() const { return int(nodes_.size()); }
  /// Layer i in config order.
  const Layer& layer(int i) const { return *nodes_[size_t(i)].layer; }
  /// Indices of the layers whose outputs feed layer i, in input order (empty for the Input).
  const std::vector<int>& layer_inputs(int i) const { return nodes_[size_t(i)].inputs; }
  /// Per-sample shapes [H, W, C] (n = 1).
  Shape input_shape() const { return nodes_.front().shape; }
  /// Layer i's per-sample output shape [H, W, C] (n = 1); summary() prints it as Keras's (None, H, W, C).
  Shape layer_output_shape(int i) const { return nodes_[size_t(i)].shape; }
  Shape output_shape() const { return nodes_.back().shape; }

  const std::vector<WeightSlot>& weights() const { return slots_; }
  size_t num_params() const { return num_params_; }  ///< Trainable floats.
  size_t num_state() const { return num_state_; }    ///< Non-trainable floats.
  /// The leading floats of the state that training changes (the moving
  /// statistics of BatchNormalization layers that are not frozen); the rest
  /// of the state, the frozen layers' weights, keeps its values.
  size_t num_moving_state() const { return num_moving_state_; }
  /// Floats of the weights of frozen layers (trainable: false; Layer::freeze): the state after num_moving_state().
  size_t num_frozen() const { return num_state_ - num_moving_state_; }
  /// The names of the frozen layers (those with weights and trainable: false), in model order.
  std::vector<std::string> frozen_layers() const;
  /// The names of the layers from which no path of inputs leads to the last
  /// layer (the output), in model order: nothing they compute reaches the
  /// loss, so their weights never change. Keras's Model(inputs, outputs)
  /// leaves such layers out.
  std::vector<std::string> unreached_layers() const;

  /// True when the last layer's sigmoid or softmax was removed so forward()
  /// returns logits, for losses fused with it (see strip_output_activation()).
  bool output_is_logits() const { return stripped_ != OutputActivation::None; }
  /// Removes the final sigmoid or softmax (if any, on the first call); returns
  /// what was removed (OutputActivation::None when the output was not logits
  /// of either).
  OutputActivation use_logits_output();

  /// The batch buffer forward() reads: callers may fill it in place (resized
  /// to [N, H, W, C]) and pass it to forward() to avoid a copy.
  Tensor& input_buffer() { return nodes_.front().out; }
  /// The dL/d(output) buffer backward() reads: a loss may write into it and
  /// pass it to backward() to avoid a copy.
  Tensor& output_grad_buffer() { return nodes_.back().grad; }
  /// What the last forward() returned: the last layer's output, whose
  /// storage no forward or backward gives away.
  const Tensor& output() const { return nodes_.back().out; }
  /// forward() and backward() calls so far: a recording of them (train's
  /// StepGraphs) stays valid while this is unchanged, as no other call has
  /// moved the model's storage since.
  uint64_t calls() const { return calls_; }
  /// The first layer that is not Layer::replayable() (with its type, e.g.
  /// "'drop1' (Dropout)"); empty when all are.
  std::string unreplayable_layer() const;

  /// Puts every activation and gradient tensor (the input buffer and the
  /// output-gradient buffer included) on device d, emptied. Call it before
  /// the first forward(); forward()/backward() then take a Context whose
  /// device is d. Default: the CPU.
  void set_device(const Device& d);
  /// Stores activations as `t` where the layers allow it (a GPU tower in
  /// bf16 passes DType::BF16; default fp32 everywhere): a layer's output, its
  /// gradient and the scratch for it are of type t when t is BF16, the layer
  /// is neither the first (the Input the batch is copied into) nor the last
  /// (the loss reads fp32 logits), it takes bf16 (Layer::dtype_support), and
  /// so do its consumers; a Uniform layer (pooling, concatenation) is bf16
  /// only when all its inputs are, and then its inputs stay bf16 only if it
  /// does. So a bf16 U-Net keeps bf16 between its convolutions, poolings
  /// and concatenations, and fp32 at the input, the Rescaling and the
  /// logits. Contents are discarded; call it before forward().
  void set_activation_type(DType t);
  /// The type of layer i's output (and its gradient).
  DType activation_type(int i) const { return nodes_[size_t(i)].out.dtype(); }
  /// Keeps a layer's output and its gradient in Layout::Blocked16 where that
  /// layer and its only consumer both take the layout on device d
  /// (Layer::takes_blocked: two CPU Winograd convolutions in a row, whose
  /// reorders to and from NHWC between them are then skipped); NHWC
  /// elsewhere, always at the input and the output. Call it on the model's
  /// device after set_activation_type(), before forward().
  void set_activation_layouts(const Device& d);
  /// The layout of layer i's output (and its gradient).
  Layout activation_layout(int i) const { return nodes_[size_t(i)].out.layout(); }
  /// Whether backward() computes the gradient of layer i's output: only where
  /// layer i or a layer feeding it (directly or not) has trainable weights, so
  /// the Input, a Rescaling right after it and the first convolution's input
  /// gradient are skipped (as frameworks skip inputs that need no gradient).
  bool needs_gradient(int i) const { return nodes_[size_t(i)].needs_grad; }
  /// Bytes of device memory the model holds for activations: the layers'
  /// outputs (the Input's, the tower's batch, included), their gradients,
  /// the scratch for summing shared gradients, and the spare storage
  /// between them. Storage is given back to the spares as soon as nothing
  /// reads it any more, and lent to the next output or gradient that fits
  /// (as frameworks free a tensor once its last use has run):
  /// - an output no backward reads (Layer::backward_reads: neither its own
  ///   layer's nor a consumer's; a linear Conv2DTranspose's output that
  ///   only a Concatenate reads, the input of a frozen convolution), right after the forward of its last
  ///   consumer; in inference (Context::training false) every output, then;
  /// - any other output once the last backward that reads it has run;
  /// - a layer's output gradient once that layer's backward has run.
  /// The Input's output (the batch the tower fills) and the last layer's
  /// (what forward() returns, read by the loss and metrics) are kept. So
  /// this is about the most a step holds at once, not the sum of its tensors.
  size_t activation_bytes() const;
  /// What activation_bytes() becomes after `steps` training steps of a
  /// batch of n >= 1, worked out from the shapes and types alone by the
  /// rules forward() and backward() follow (which gradients backward
  /// computes, in which order, when storage is given back, how it is
  /// lent); steps 0: once steady, after the first step that allocates
  /// nothing (the next steps then repeat it). No device is needed.
  /// InternalError for n < 1.
  size_t planned_activation_bytes(int n, int steps = 0) const;
  /// The layers' own memory on a GPU tower for a batch of n
  /// (Layer::gpu_training_memory in the types set_activation_type chose,
  /// told which backward passes run; bf16: the tower computes in bf16):
  /// kept summed over the layers, transient and workspace the largest of
  /// one layer.
  LayerMemory layer_memory(int n, bool bf16) const;

  /// Binds views into buffers of num_params(), num_params() and num_state()
  /// floats on the model's device.
  void bind(float* params, float* grads, float* state);
  /// Fills host arrays params [num_params()] and state [num_state()] with the
  /// layers' Keras initialisers; the same seed gives the same weights on every
  /// tower.
  void initialize(uint64_t seed, float* params, float* state) const;

  /// x: [N, H, W, C] matching input_shape(), on ctx.device. Returns the output
  /// [N, H', W', C'] (valid until the next call). N may be 0 (a tower without
  /// samples): layers are skipped except collective ones in training mode. On
  /// a GPU each layer names itself to the device context (for error messages)
  /// while it queues work.
  const Tensor& forward(const Context& ctx, const Tensor& x);
  /// dy: dL/d(output) of the last forward (training mode). Overwrites the
  /// gradients of every layer that reaches the output (output gradients only
  /// where needs_gradient()); the gradients of layers
  /// whose output no path carries to the model's output are left untouched
  /// (they stay as the tower initialised them: zero). A tower with N = 0 runs
  /// the backward of the collective layers that towers with samples run (those
  /// that reach the output and needs_gradient(), and the last layer), so
  /// collectives match across towers. grads_ready(begin), when
  /// given, is called after each layer's turn (in reverse layer order, also
  /// for skipped layers): the gradients [begin, num_params()) are then final,
  /// so their all-reduce can start while backward goes on (gradient buckets).
  void backward(const Context& ctx, const Tensor& dy, const std::function<void(size_t)>& grads_ready = {});

  /// Keras model.summary(): layer (type), output shape, params, connected to; totals. With
  /// frozen layers, a Trainable column as Keras's show_trainable=True: Y, N (frozen), - (no weights).
  std::string summary() const;

  /// Profiling (off by default): while on, forward() and backward() add each
  /// layer's host wall time (std::chrono::steady_clock) to layer_times(). On a
  /// GPU the device is synchronized before and after every layer so that its
  /// queued work is counted in that layer; this slows training: use it to find
  /// the slow layers, not to measure throughput. Turning it on or off keeps
  /// the times gathered so far (see reset_layer_times()).
  void set_profiling(bool on) { profiling_ = on; }
  /// Times of every layer but the Input (which computes nothing), in layer order.
  std::vector<LayerTime> layer_times() const;
  /// Sets every layer's times and calls to zero.
  void reset_layer_times();

 private:
  struct Node {
    std::unique_ptr<Layer> layer;
    std::vector<int> inputs;
    std::vector<int> consumers;      ///< Layers taking this output, in layer order (once per input slot).
    Shape shape;
    Tensor out, grad;
    std::vector<Tensor> dx_scratch;  ///< dx for inputs with several consumers, summed after; one per input.
    bool grad_set = false;
    bool reaches_output = false;     ///< Some path leads from this node to the output.
    bool needs_grad = false;         ///< This layer or one before it has trainable weights (see needs_gradient).
    /// Layers whose outputs nothing reads once this layer's training
    /// forward, inference forward or backward has run (activation_bytes).
    std::vector<int> free_after_forward, free_after_inference, free_after_backward;
  };
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<WeightSlot> slots_;
  size_t num_params_ = 0, num_state_ = 0, num_moving_state_ = 0;
  OutputActivation stripped_ = OutputActivation::None;  ///< use_logits_output()
  bool strip_tried_ = false;
  // Per-call argument lists, kept to avoid allocating in every step.
  std::vector<const Tensor*> in_;
  std::vector<Tensor*> dx_;
  std::vector<char> via_scratch_;
  std::vector<size_t> grads_from_;  ///< [layers + 1]: first trainable offset of layers i and later.
  /// Output and gradient storage given back (see activation_bytes), kept
  /// across steps so that a step allocates nothing once warm.
  std::vector<Buffer<float>> spare_;
  /// Gives t room for s elements of its type from the smallest spare storage
  /// that holds them, when its own does not (else the layer's resize allocates).
  void lend(Tensor& t, const Shape& s);
  /// Moves t's storage to the spares (t is left empty).
  void give_back(Tensor& t);
  /// Moves t's storage to the spares, keeping its shape (Tensor::release_storage).
  void release(Tensor& t);
  /// Moves the storage of the outputs of `layers` to the spares, keeping their shapes (Tensor::release_storage).
  void release_outputs(const std::vector<int>& layers);
  /// Fills the nodes' free_after_* lists from the graph and Layer::backward_reads (see activation_bytes).
  void plan_output_release();
  bool profiling_ = false;
  uint64_t calls_ = 0;              ///< calls()
  std::vector<LayerTime> times_;    ///< [layers]: profiled times of layer i.
  /// Backward of layer i (n: the batch).
  void backward_node(const Context& ctx, size_t i, int n);
};

/// "1,234,567".
std::string with_thousands(size_t n);

}  // namespace trainer
