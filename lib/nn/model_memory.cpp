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

/// Steps planned_activation_bytes follows at most to find the steady figure
/// (the models tested are steady from their second step).
constexpr int kMaxPlannedSteps = 100;

/// What forward() and backward() need to know of one layer to lend storage.
struct PoolNode {
  std::vector<int> inputs;
  bool single_consumer = false;  ///< Its output feeds one input slot (else its gradient is summed from scratch).
  bool needs_grad = false;       ///< Model::needs_gradient
  size_t words = 0;              ///< Its output's storage for the batch, and its gradient's (of the same type).
  std::vector<int> free_after_forward, free_after_backward;  ///< Model::Node's
};

/// Model::forward's and Model::backward's bookkeeping of output and
/// gradient storage, by capacity in words.
class ActivationPool {
 public:
  explicit ActivationPool(std::vector<PoolNode> nodes)
      : nodes_(std::move(nodes)), out_(nodes_.size(), 0), grad_(nodes_.size(), 0) {
    for (const PoolNode& n : nodes_) scratch_.emplace_back(n.inputs.size(), 0);
    out_.front() = nodes_.front().words;  // the batch the tower fills, held throughout
    grad_.back() = nodes_.back().words;   // the loss writes dL/d(output) into the last layer's gradient
  }
  /// One training forward() and backward(); returns whether it allocated storage.
  bool step() {
    allocated_ = false;
    const size_t L = nodes_.size();
    for (size_t i = 1; i < L; ++i) {
      lend(out_[i], nodes_[i].words);
      for (int j : nodes_[i].free_after_forward) give_back(out_[size_t(j)]);
    }
    std::vector<char> set(L, 0);
    set[L - 1] = 1;
    for (size_t i = L - 1; i >= 1; --i) {
      if (set[i]) backward_node(i, set);
      if (i + 1 < L) give_back(grad_[i]), give_back(out_[i]);
      for (int j : nodes_[i].free_after_backward) give_back(out_[size_t(j)]);
    }
    return allocated_;
  }
  /// Words held: every output, gradient, scratch and spare.
  size_t words() const {
    size_t w = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      w += out_[i] + grad_[i];
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
    const PoolNode& node = nodes_[i];
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const PoolNode& src = nodes_[size_t(node.inputs[k])];
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
  /// Model::give_back and Model::release: storage of cap words (if any) joins the spares.
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

  std::vector<PoolNode> nodes_;
  std::vector<size_t> out_, grad_;            ///< Model::Node::out's and grad's capacities
  std::vector<std::vector<size_t>> scratch_;  ///< Model::Node::dx_scratch's capacities
  std::vector<size_t> spare_;                 ///< Model::spare_
  bool allocated_ = false;
};
}  // namespace

size_t Model::planned_activation_bytes(int n, int steps) const {
  if (n < 1) throw InternalError("planned_activation_bytes: a batch of " + std::to_string(n) + " samples");
  std::vector<PoolNode> nodes;
  for (const Node& node : nodes_)
    nodes.push_back(PoolNode{node.inputs, node.consumers.size() == 1, node.needs_grad,
                             words(node.shape.with_batch(n).numel(), node.out.dtype()), node.free_after_forward,
                             node.free_after_backward});
  ActivationPool pool(std::move(nodes));
  if (steps > 0) {
    for (int s = 0; s < steps; ++s) pool.step();
    return pool.words() * 4;
  }
  for (int s = 0; s < kMaxPlannedSteps; ++s)
    if (!pool.step()) return pool.words() * 4;
  throw InternalError("planned_activation_bytes: the activation storage still grows after " +
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
