#include "nn/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>

#include "backend/elementwise_ops.h"
#include "config/params.h"
#include "core/error.h"
#include "nn/initializers.h"
#include "nn/registry.h"

namespace trainer {

std::string with_thousands(size_t n) {
  std::string s = std::to_string(n);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(size_t(i), ",");
  return s;
}

Model::Model(const ModelConfig& config, const std::string& file) : name_(config.name) {
  std::map<std::string, int> index;
  require_known_layer_types(config, file);  // every type, before any layer reads its keys
  for (const LayerSpec& spec : config.layers) {
    const std::string what = "layer '" + spec.name + "' (" + spec.type + ")";
    ParamReader p(spec.node, file, what);
    p.skip("name");
    p.skip("type");
    p.skip("inputs");
    p.skip("trainable");  // LayerSpec::trainable
    Node node;
    node.layer = find_layer_factory(spec.type)(p, spec.name);
    p.finish();
    if (spec.type != "Input") {
      if (spec.inputs.empty()) {
        if (nodes_.empty()) p.fail("the first layer must be an Input layer");
        node.inputs.push_back(int(nodes_.size()) - 1);
      }
      for (const auto& in : spec.inputs) {
        auto it = index.find(in);
        if (it == index.end()) p.fail("inputs", "names '" + in + "', which is not an earlier layer");
        node.inputs.push_back(it->second);
      }
    }
    node.dx_scratch.resize(node.inputs.size());
    std::vector<Shape> in_shapes;
    for (int i : node.inputs) {
      nodes_[size_t(i)].consumers.push_back(int(nodes_.size()));
      in_shapes.push_back(nodes_[size_t(i)].shape);
    }
    try {
      node.shape = node.layer->infer(in_shapes).with_batch(1);
    } catch (const UserError& e) {
      std::string inputs;
      for (int i : node.inputs)
        inputs += (inputs.empty() ? "" : ", ") + nodes_[size_t(i)].layer->name() + " " +
                  nodes_[size_t(i)].shape.hwc();
      throw UserError(yaml_location(file, spec.mark) + ": " + what + ": " + e.what() +
                      (inputs.empty() ? "" : " (inputs: " + inputs + ")"));
    }
    if (node.shape.h <= 0 || node.shape.w <= 0 || node.shape.c <= 0)
      throw UserError(yaml_location(file, spec.mark) + ": " + what + ": output shape " +
                      node.shape.hwc() + " is empty");
    if (node.shape.sample_numel() >= (size_t(1) << 31))  // a sample's values are indexed with int
      throw UserError(yaml_location(file, spec.mark) + ": " + what + ": output shape " + node.shape.hwc() +
                      " holds 2^31 values or more per image; use a smaller input or fewer filters");
    for (int i : node.inputs) node.needs_grad = node.needs_grad || nodes_[size_t(i)].needs_grad;
    std::vector<ParamSpec> specs = node.layer->param_specs();
    // On a layer without weights trainable changes nothing, as in Keras.
    if (!spec.trainable && !specs.empty()) node.layer->freeze();
    for (ParamSpec& ps : specs) {
      ps.trainable = ps.trainable && spec.trainable;
      node.needs_grad = node.needs_grad || ps.trainable;
      slots_.push_back(WeightSlot{int(nodes_.size()), ps, ps.trainable ? num_params_ : 0});
      if (ps.trainable) num_params_ += ps.numel();
    }
    index[spec.name] = int(nodes_.size());
    nodes_.push_back(std::move(node));
  }
  if (nodes_.empty()) throw UserError(file + ": model.layers is empty; add an Input layer and more");
  for (size_t i = 0; i + 1 < nodes_.size(); ++i)
    if (nodes_[i].layer->has_softmax())
      throw UserError(yaml_location(file, config.layers[i].mark) + ": layer '" + config.layers[i].name + "' (" +
                      config.layers[i].type + "): activation softmax is supported on the last layer only, over "
                      "its class channels (the categorical losses take its logits); use another activation here");
  // The state buffer holds what training changes (the moving statistics of BatchNormalization layers that are
  // not frozen) first, then the frozen layers' weights, which never change: a step makes its towers agree on
  // the leading part only (num_moving_state).
  for (const bool frozen : {false, true}) {
    for (WeightSlot& w : slots_)
      if (!w.spec.trainable && nodes_[size_t(w.layer)].layer->frozen() == frozen) {
        w.offset = num_state_;
        num_state_ += w.spec.numel();
      }
    if (!frozen) num_moving_state_ = num_state_;
  }
  nodes_.back().reaches_output = true;
  for (size_t i = nodes_.size(); i-- > 0;)
    if (nodes_[i].reaches_output)
      for (int j : nodes_[i].inputs) nodes_[size_t(j)].reaches_output = true;
  // grads_from_[i]: the first trainable offset of layers i, i+1, ... (slots are in layer order).
  grads_from_.assign(nodes_.size() + 1, num_params_);
  for (size_t s = slots_.size(); s-- > 0;)
    if (slots_[s].spec.trainable) grads_from_[size_t(slots_[s].layer)] = slots_[s].offset;
  for (size_t i = nodes_.size(); i-- > 0;) grads_from_[i] = std::min(grads_from_[i], grads_from_[i + 1]);
  for (const Node& node : nodes_) times_.push_back(LayerTime{node.layer->name(), node.layer->type()});
  plan_output_release();
}

void Model::plan_output_release() {
  const size_t last = nodes_.size() - 1;
  // Whether layer i's backward runs in a step with samples (as backward_node decides by grad_set).
  const auto runs = [&](size_t i) { return i == last || (nodes_[i].reaches_output && nodes_[i].needs_grad); };
  for (size_t j = 1; j < last; ++j) {
    const Node& node = nodes_[j];
    // Consumers are in layer order: the last one is the last forward to read the output.
    const size_t after = node.consumers.empty() ? j : size_t(node.consumers.back());
    nodes_[after].free_after_inference.push_back(int(j));
    // Backward runs in reverse layer order: the lowest reader is the last to read.
    int reader = runs(j) && node.layer->backward_reads().output ? int(j) : -1;
    for (int c : node.consumers)
      if (runs(size_t(c)) && nodes_[size_t(c)].layer->backward_reads().inputs && (reader < 0 || c < reader))
        reader = c;
    if (reader < 0)
      nodes_[after].free_after_forward.push_back(int(j));
    else if (reader != int(j))  // layer j's own turn releases it (backward)
      nodes_[size_t(reader)].free_after_backward.push_back(int(j));
  }
}

std::vector<std::string> Model::unreached_layers() const {
  std::vector<std::string> names;
  for (const Node& node : nodes_)
    if (!node.reaches_output) names.push_back(node.layer->name());
  return names;
}

std::string Model::unreplayable_layer() const {
  for (const Node& node : nodes_)
    if (!node.layer->replayable()) return "'" + node.layer->name() + "' (" + node.layer->type() + ")";
  return "";
}

std::vector<std::string> Model::frozen_layers() const {
  std::vector<std::string> names;
  for (const Node& node : nodes_)
    if (node.layer->frozen()) names.push_back(node.layer->name());
  return names;
}

OutputActivation Model::use_logits_output() {
  if (!strip_tried_) stripped_ = nodes_.back().layer->strip_output_activation();
  strip_tried_ = true;
  return stripped_;
}

void Model::set_device(const Device& d) {
  ++calls_;  // moves storage or pointers a recording holds
  spare_.clear();
  for (Node& node : nodes_) {
    node.out.set_device(d);
    node.grad.set_device(d);
    for (Tensor& t : node.dx_scratch) t.set_device(d);
  }
}

void Model::set_activation_type(DType t) {
  ++calls_;  // moves storage or pointers a recording holds
  const size_t last = nodes_.size() - 1;
  std::vector<DType> type(nodes_.size(), DType::F32);
  if (t != DType::F32)
    for (size_t i = 1; i < last; ++i)
      if (nodes_[i].layer->dtype_support() == DTypeSupport::Uniform ||
          nodes_[i].layer->dtype_support() == DTypeSupport::Any)
        type[i] = t;
  // Demote until nothing changes (each pass only turns types to fp32, so
  // this ends): a Uniform layer with an fp32 input, and any layer whose
  // output feeds an fp32-only layer or an fp32 Uniform one (an AnyInput
  // layer reads either).
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 1; i < last; ++i) {
      if (type[i] == DType::F32) continue;
      bool f32 = false;
      if (nodes_[i].layer->dtype_support() == DTypeSupport::Uniform)
        for (int j : nodes_[i].inputs) f32 = f32 || type[size_t(j)] == DType::F32;
      for (int j : nodes_[i].consumers) {
        const DTypeSupport s = nodes_[size_t(j)].layer->dtype_support();
        f32 = f32 || s == DTypeSupport::F32Only || (s == DTypeSupport::Uniform && type[size_t(j)] == DType::F32);
      }
      if (f32) type[i] = DType::F32, changed = true;
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    node.out.set_dtype(type[i]);
    node.grad.set_dtype(type[i]);
    for (size_t k = 0; k < node.inputs.size(); ++k) node.dx_scratch[k].set_dtype(type[size_t(node.inputs[k])]);
  }
}

void Model::set_activation_layouts(const Device& d) {
  ++calls_;  // moves storage or pointers a recording holds
  const size_t last = nodes_.size() - 1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    // Only CPU convolutions take the layout; a GPU's are not asked (and not built here).
    bool blocked = !d.is_cuda() && i > 0 && i < last && node.inputs.size() == 1 && node.consumers.size() == 1;
    if (blocked) {
      Node& next = nodes_[size_t(node.consumers[0])];
      const DType in = nodes_[size_t(node.inputs[0])].out.dtype(), mid = node.out.dtype();
      blocked = next.inputs.size() == 1 && node.layer->takes_blocked(d, in, mid) &&
                next.layer->takes_blocked(d, mid, next.out.dtype());
    }
    node.out.set_layout(blocked ? Layout::Blocked16 : Layout::NHWC);
    node.grad.set_layout(node.out.layout());
  }
  for (Node& node : nodes_)
    for (size_t k = 0; k < node.inputs.size(); ++k)
      node.dx_scratch[k].set_layout(nodes_[size_t(node.inputs[k])].out.layout());
}

namespace {

/// Names the layer queuing work on a GPU, for error messages ("" after the pass).
void name_layer(const Context& ctx, const char* name) {
  if (ctx.device.is_cuda()) ctx.device.ctx->set_layer(name);
}

/// Profiling clock: waits for the device's queued work (a GPU; CPU ops are
/// synchronous), then reads the host time, so the time between two reads
/// holds the device work queued between them.
std::chrono::steady_clock::time_point synced_now(const Context& ctx) {
  if (ctx.device.is_cuda()) ctx.device.ctx->synchronize();
  return std::chrono::steady_clock::now();
}

/// Seconds from start to now, after synced_now()'s wait.
double synced_since(const Context& ctx, std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(synced_now(ctx) - start).count();
}

}  // namespace

void Model::bind(float* params, float* grads, float* state) {
  ++calls_;  // moves storage or pointers a recording holds
  size_t s = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<float*> p, g;
    for (; s < slots_.size() && slots_[s].layer == int(i); ++s) {
      const WeightSlot& w = slots_[s];
      p.push_back((w.spec.trainable ? params : state) + w.offset);
      g.push_back(w.spec.trainable ? grads + w.offset : nullptr);
    }
    nodes_[i].layer->bind(p, g);
  }
}

void Model::initialize(uint64_t seed, float* params, float* state) const {
  for (size_t s = 0; s < slots_.size(); ++s) {
    const WeightSlot& w = slots_[s];
    float* dst = (w.spec.trainable ? params : state) + w.offset;
    // One independent stream per weight: seed mixed with the weight's position.
    uint64_t ws = seed * 0x9E3779B97F4A7C15ull + (s + 1) * 0xBF58476D1CE4E5B9ull;
    trainer::initialize(w.spec.initializer, w.spec.fan_in, w.spec.fan_out, ws, dst, w.spec.numel());
  }
}

const Tensor& Model::forward(const Context& ctx, const Tensor& x) {
  ++calls_;
  const int n = x.shape().n;
  if (!x.shape().same_sample(input_shape()))
    throw InternalError("model input " + x.shape().nhwc() + " does not match " + input_shape().hwc());
  if (&x != &nodes_[0].out) nodes_[0].out = x;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    if (n == 0 && !(ctx.training && node.layer->collective())) {
      node.out.resize(node.shape.with_batch(0));
      continue;
    }
    in_.clear();
    for (int j : node.inputs) in_.push_back(&nodes_[size_t(j)].out);
    lend(node.out, node.shape.with_batch(n));
    name_layer(ctx, node.layer->name().c_str());
    if (profiling_) {
      const auto start = synced_now(ctx);
      node.layer->forward(ctx, in_, node.out);
      times_[i].forward_s += synced_since(ctx, start);
      times_[i].calls++;
    } else {
      node.layer->forward(ctx, in_, node.out);
    }
    release_outputs(ctx.training ? node.free_after_forward : node.free_after_inference);
  }
  name_layer(ctx, "");
  return nodes_.back().out;
}

void Model::backward(const Context& ctx, const Tensor& dy, const std::function<void(size_t)>& grads_ready) {
  ++calls_;
  const int n = dy.shape().n;
  for (auto& node : nodes_) {
    // An empty tower: every gradient a tower with samples computes is the empty tensor.
    node.grad_set = n == 0 && node.reaches_output && node.needs_grad;
    if (n == 0) node.grad.resize(node.shape.with_batch(0));
  }
  if (&dy != &nodes_.back().grad) nodes_.back().grad = dy;
  nodes_.back().grad_set = true;
  for (size_t i = nodes_.size() - 1; i >= 1; --i) {
    backward_node(ctx, i, n);
    // Read by nothing from here on (the last layer's are forward's result and the loss's buffer).
    if (i + 1 < nodes_.size()) {
      give_back(nodes_[i].grad);
      release(nodes_[i].out);
    }
    release_outputs(nodes_[i].free_after_backward);
    if (grads_ready) grads_ready(grads_from_[i]);
  }
  name_layer(ctx, "");
}

void Model::lend(Tensor& t, const Shape& s) {
  const size_t need = s.numel();
  if (t.capacity(t.dtype()) >= need) return;
  const size_t words = (need * dtype_size(t.dtype()) + 3) / 4;
  auto best = spare_.end();
  for (auto it = spare_.begin(); it != spare_.end(); ++it)
    if (it->capacity() >= words && (best == spare_.end() || it->capacity() < best->capacity())) best = it;
  if (best == spare_.end()) return;
  Buffer<float> b = std::move(*best);
  spare_.erase(best);
  give_back(t);
  t.adopt_storage(std::move(b));
}

void Model::give_back(Tensor& t) {
  if (t.capacity(DType::F32) > 0) spare_.push_back(t.take_storage());
}

void Model::release(Tensor& t) {
  if (t.capacity(DType::F32) > 0) spare_.push_back(t.release_storage());
}

void Model::release_outputs(const std::vector<int>& layers) {
  for (int j : layers) release(nodes_[size_t(j)].out);
}

size_t Model::activation_bytes() const {
  size_t words = 0;
  for (const Node& node : nodes_) {
    words += node.out.capacity(DType::F32) + node.grad.capacity(DType::F32);
    for (const Tensor& t : node.dx_scratch) words += t.capacity(DType::F32);
  }
  for (const Buffer<float>& b : spare_) words += b.capacity();
  return words * sizeof(float);
}

void Model::backward_node(const Context& ctx, size_t i, int n) {
  std::vector<const Tensor*>& in = in_;
  std::vector<Tensor*>& dx = dx_;
  std::vector<char>& via_scratch = via_scratch_;
  Node& node = nodes_[i];
  if (!node.grad_set) return;  // does not reach the output, or needs no gradient
  if (n == 0 && !node.layer->collective()) return;
  const auto start = profiling_ ? synced_now(ctx) : std::chrono::steady_clock::time_point{};
  {
    in.clear();
    dx.clear();
    via_scratch.assign(node.inputs.size(), 0);
    std::vector<Tensor>& scratch = node.dx_scratch;
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      Node& src = nodes_[size_t(node.inputs[k])];
      in.push_back(&src.out);
      if (!src.needs_grad) {
        dx.push_back(nullptr);  // no trainable weight at or before src: its gradient would go unused
        continue;
      }
      if (src.consumers.size() == 1) {
        dx.push_back(&src.grad);
        src.grad_set = true;
      } else {
        via_scratch[k] = 1;
        dx.push_back(&scratch[k]);
      }
      lend(*dx.back(), src.shape.with_batch(n));
    }
    name_layer(ctx, node.layer->name().c_str());
    node.layer->backward(ctx, in, node.out, node.grad, dx);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (!via_scratch[k]) continue;
      Node& src = nodes_[size_t(node.inputs[k])];
      if (!src.grad_set) {
        std::swap(src.grad, scratch[k]);
        src.grad_set = true;
      } else {
        if (scratch[k].dtype() != src.grad.dtype())
          throw InternalError("layer '" + src.layer->name() + "': gradients of two types to sum");
        accumulate(ctx.device, src.grad.dtype(), src.grad.raw(), scratch[k].raw(), src.grad.numel());
      }
      give_back(scratch[k]);
    }
  }
  if (profiling_) times_[i].backward_s += synced_since(ctx, start);
}

std::vector<LayerTime> Model::layer_times() const {
  std::vector<LayerTime> out(times_.begin() + 1, times_.end());
  for (size_t i = 0; i < out.size(); ++i) out[i].output = nodes_[i + 1].out.dtype();
  return out;
}

void Model::reset_layer_times() {
  for (LayerTime& t : times_) t.forward_s = t.backward_s = 0, t.calls = 0;
}

namespace {

/// Keras's readable_memory_size (keras/src/utils/summary_utils.py): bytes in B, KB, MB, ... of 1024, two decimals.
std::string readable_bytes(double bytes) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (u < 5 && bytes / 1024 >= 1) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, units[u]);
  return buf;
}

/// "(None, H, W, C)", or Keras's "(None, C)" for a flat output.
std::string keras_shape(const Shape& s, bool flat) {
  return flat ? "(None, " + std::to_string(s.c) + ")"
              : "(None, " + std::to_string(s.h) + ", " + std::to_string(s.w) + ", " + std::to_string(s.c) + ")";
}

}  // namespace

std::string Model::summary() const {
  std::ostringstream os;
  size_t longest = 0;
  for (const auto& node : nodes_)
    longest = std::max(longest, node.layer->name().size() + node.layer->type().size() + 4);
  const int w1 = int(std::max<size_t>(34, longest + 1)), w2 = 22, w3 = 12;
  auto pad = [](std::string s, int w) {
    if (int(s.size()) < w) s.append(size_t(w - int(s.size())), ' ');
    return s;
  };
  // Keras's summary(show_trainable=True) column, shown when a layer is frozen: Y, N, or - without weights.
  const bool show_trainable = num_frozen() > 0;
  const int w4 = show_trainable ? 11 : 0;
  std::string rule(w1 + w2 + w3 + w4 + 30, '_'), dbl(w1 + w2 + w3 + w4 + 30, '=');
  os << "Model: \"" << name_ << "\"\n" << rule << "\n"
     << pad(" Layer (type)", w1) << pad("Output Shape", w2) << pad("Param #", w3)
     << (show_trainable ? pad("Trainable", w4) : "") << "Connected to\n"
     << dbl << "\n";
  size_t trainable = 0, fixed = 0;
  std::vector<bool> flat(nodes_.size(), false);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    size_t count = 0;
    for (const auto& s : slots_)
      if (s.layer == int(i)) {
        count += s.spec.numel();
        (s.spec.trainable ? trainable : fixed) += s.spec.numel();
      }
    std::string conn;
    for (int j : nodes_[i].inputs) conn += (conn.empty() ? "" : ", ") + nodes_[size_t(j)].layer->name();
    flat[i] = nodes_[i].layer->flat_output(!nodes_[i].inputs.empty() && flat[size_t(nodes_[i].inputs[0])]);
    const std::string mark = count == 0 ? "-" : nodes_[i].layer->frozen() ? "N" : "Y";
    os << pad(" " + nodes_[i].layer->name() + " (" + nodes_[i].layer->type() + ")", w1 - 1) << " "
       << pad(keras_shape(nodes_[i].shape, flat[i]), w2) << pad(with_thousands(count), w3)
       << (show_trainable ? pad(mark, w4) : "") << conn << "\n";
  }
  // Keras's sizes: the weights' bytes (float32 here).
  const auto size = [](size_t n) { return with_thousands(n) + " (" + readable_bytes(4.0 * double(n)) + ")"; };
  os << dbl << "\n"
     << "Total params: " << size(trainable + fixed) << "\n"
     << "Trainable params: " << size(trainable) << "\n"
     << "Non-trainable params: " << size(fixed) << "\n"
     << rule << "\n";
  return os.str();
}

}  // namespace trainer
