// Model's memory figures worked out from shapes and types, without a device
// (the memory plan, train/memory_plan.h).
#include <algorithm>
#include <string>

#include "core/error.h"

#include "nn/model.h"

namespace trainer {

namespace {
/// 4-byte words of storage a tensor of `numel` elements of type t takes (Tensor::resize).
size_t words(size_t numel, DType t) { return (numel * dtype_size(t) + 3) / 4; }

/// Steps planned_gradient_bytes follows at most to find the steady figure
/// (the models tested are steady from their second step).
constexpr int kMaxPlannedSteps = 100;

/// What backward() needs to know of one layer to lend its gradients.
struct GradientNode {
  std::vector<int> inputs;
  bool single_consumer = false;  ///< Its output feeds one input slot (else its gradient is summed from scratch).
  bool needs_grad = false;       ///< Model::needs_gradient
  size_t words = 0;              ///< Its output gradient's storage for the batch.
};

/// Model::backward's bookkeeping of gradient storage, by capacity in words.
class GradientPool {
 public:
  explicit GradientPool(std::vector<GradientNode> nodes) : nodes_(std::move(nodes)), grad_(nodes_.size(), 0) {
    for (const GradientNode& n : nodes_) scratch_.emplace_back(n.inputs.size(), 0);
    grad_.back() = nodes_.back().words;  // the loss writes dL/d(output) into the last layer's gradient
  }
  /// One backward(); returns whether it allocated storage.
  bool step() {
    allocated_ = false;
    const size_t L = nodes_.size();
    std::vector<char> set(L, 0);
    set[L - 1] = 1;
    for (size_t i = L - 1; i >= 1; --i) {
      if (set[i]) backward_node(i, set);
      if (i + 1 < L) give_back(grad_[i]);
    }
    return allocated_;
  }
  /// Words held: every gradient, scratch and spare.
  size_t words() const {
    size_t w = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      w += grad_[i];
      for (size_t s : scratch_[i]) w += s;
    }
    for (size_t s : spare_) w += s;
    return w;
  }

 private:
  /// Model::backward_node: lends each input's gradient (or scratch), then
  /// moves the first scratch of a shared input into its gradient and gives
  /// the scratch back.
  void backward_node(size_t i, std::vector<char>& set) {
    const GradientNode& node = nodes_[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const GradientNode& src = nodes_[size_t(node.inputs[k])];
      if (!src.needs_grad) continue;
      lend(src.single_consumer ? grad_[size_t(node.inputs[k])] : scratch_[i][k], src.words);
      if (src.single_consumer) set[size_t(node.inputs[k])] = 1;
    }
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const size_t src = size_t(node.inputs[k]);
      if (!nodes_[src].needs_grad || nodes_[src].single_consumer) continue;
      if (!set[src]) std::swap(grad_[src], scratch_[i][k]);
      set[src] = 1;
      give_back(scratch_[i][k]);
    }
  }
  /// Model::give_back: storage of cap words (if any) joins the spares.
  void give_back(size_t& cap) {
    if (cap > 0) spare_.push_back(cap);
    cap = 0;
  }
  /// Model::lend, then the layer's resize: the smallest spare that holds
  /// need words, else a new allocation of exactly need (the old storage is freed).
  void lend(size_t& cap, size_t need) {
    if (cap >= need) return;
    auto best = spare_.end();
    for (auto it = spare_.begin(); it != spare_.end(); ++it)
      if (*it >= need && (best == spare_.end() || *it < *best)) best = it;
    if (best == spare_.end()) {
      cap = need;
      allocated_ = true;
      return;
    }
    const size_t b = *best;
    spare_.erase(best);
    give_back(cap);
    cap = b;
  }

  std::vector<GradientNode> nodes_;
  std::vector<size_t> grad_;                 ///< Model::Node::grad's capacity
  std::vector<std::vector<size_t>> scratch_;  ///< Model::Node::dx_scratch's capacities
  std::vector<size_t> spare_;                ///< Model::spare_
  bool allocated_ = false;
};
}  // namespace

size_t Model::output_bytes(int n) const {
  size_t w = 0;
  for (const Node& node : nodes_) w += words(node.shape.with_batch(n).numel(), node.out.dtype());
  return w * 4;
}

size_t Model::planned_gradient_bytes(int n, int steps) const {
  if (n < 1) throw InternalError("planned_gradient_bytes: a batch of " + std::to_string(n) + " samples");
  std::vector<GradientNode> nodes;
  for (const Node& node : nodes_)
    nodes.push_back(GradientNode{node.inputs, node.consumers.size() == 1, node.needs_grad,
                                 words(node.shape.with_batch(n).numel(), node.grad.dtype())});
  GradientPool pool(std::move(nodes));
  if (steps > 0) {
    for (int s = 0; s < steps; ++s) pool.step();
    return pool.words() * 4;
  }
  for (int s = 0; s < kMaxPlannedSteps; ++s)
    if (!pool.step()) return pool.words() * 4;
  throw InternalError("planned_gradient_bytes: the gradient storage still grows after " +
                      std::to_string(kMaxPlannedSteps) + " steps");
}

LayerMemory Model::layer_memory(int n, bool bf16) const {
  LayerMemory total;
  for (size_t i = 1; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    LayerMemoryQuery q;
    q.batch = n;
    for (int src : node.inputs) q.inputs.push_back(nodes_[size_t(src)].out.dtype());
    q.output = node.out.dtype();
    q.bf16 = bf16;
    q.backward = node.reaches_output && node.needs_grad;
    q.input_gradient = q.backward && !node.inputs.empty() && nodes_[size_t(node.inputs[0])].needs_grad;
    const LayerMemory m = node.layer->gpu_training_memory(q);
    total.kept += m.kept;
    total.transient = std::max(total.transient, m.transient);
    total.workspace = std::max(total.workspace, m.workspace);
  }
  return total;
}

}  // namespace trainer
