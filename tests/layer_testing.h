#pragma once
// Helpers for layer tests: build a layer from a YAML snippet through the
// registry (the same path a config file takes), give it random weights, and
// check its backward pass against central finite differences.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/layer.h"
#include "train/loss.h"

namespace trainer::testing {

/// A layer from a YAML mapping such as "{type: Conv2D, filters: 4, kernel_size: 3}".
/// Throws UserError as a config would.
std::unique_ptr<Layer> layer_from_yaml(const std::string& yaml, const std::string& name = "layer");

/// Owns a layer's weights and gradients (bound to the layer), filled by fill().
struct BoundWeights {
  std::vector<ParamSpec> specs;
  std::vector<std::vector<float>> params, grads;
};

/// Runs infer() on the per-sample input shapes, allocates and binds weights,
/// filled uniformly in [-1, 1) (BN variances in [0.5, 1.5)) from seed. The
/// layer keeps pointers into the result, so it must outlive the layer's use.
[[nodiscard]] BoundWeights bind_random(Layer& layer, const std::vector<Shape>& inputs, unsigned seed);

/// A CPU Context with training set (the default Context is inference).
Context training_context();

/// "accepted" when layer_from_yaml(yaml) builds and infers on per-sample
/// input `in`, else the UserError's message.
std::string layer_error(const std::string& yaml, Shape in);

/// Catch checks that a normalisation layer's weights (bound by bind_random
/// to w) are Keras's: gamma (when scale) then beta (when center), each [C]
/// and trainable. Returns their values {gamma, beta}, empty when absent.
std::pair<std::vector<float>, std::vector<float>> check_norm_weights(const BoundWeights& w, bool scale, bool center,
                                                                     int C);

/// Catch checks that a training and an inference forward of x both give y of
/// x's shape within tol (absolute) of want.
void check_forward_in_both_modes(Layer& layer, const Tensor& x, const std::vector<double>& want, double tol);

/// Catch checks of the backward of a layer whose statistics are its batch's
/// own (GroupNormalization, LayerNormalization), bound by bind_random to w for
/// inputs of shape s: a backward after an inference forward of another batch
/// size gives the same dx and weight gradients as right after the training
/// forward; a backward with no dx wanted gives the same weight gradients
/// (overwriting poisoned ones); an empty shard (no samples) gives zero weight
/// gradients.
void check_norm_backward(Layer& layer, BoundWeights& w, Shape s);

/// A CPU tensor of shape s holding v (s.numel() values, else InternalError).
Tensor make_tensor(Shape s, const std::vector<float>& v);

/// The worst gap |numeric - analytic| / max(1e-2, |numeric|) over the logits
/// between loss_sum(kind, logits, targets, ..., form, overlap)'s gradient and
/// central differences of its value (step 1e-2), on the CPU.
double loss_gradient_gap(LossKind kind, const CrossEntropyForm& form, Tensor logits, const Tensor& targets,
                         const OverlapForm& overlap = {});

/// A CPU tensor's numel() values.
std::vector<float> tensor_values(const Tensor& t);

/// A tensor of shape s filled uniformly in [lo, hi) from seed.
Tensor random_tensor(Shape s, unsigned seed, float lo = -1.f, float hi = 1.f);

/// Largest relative error found by gradcheck, per checked quantity.
struct GradCheckResult {
  double max_rel_error_inputs = 0, max_rel_error_params = 0;
};

/// Finite-difference check of backward(). L = sum(y * r) for a fixed random r;
/// compares dL/dx and dL/dparam from backward() with (L(v+h) - L(v-h)) / 2h
/// for every element (or a strided subset of at most max_checks per tensor).
/// Relative error = |a - n| / max(1, |a|, |n|). ctx.training is used as given.
/// backward() gets the inputs and output it says it does not read
/// (Layer::backward_reads) with their storage released, as a model gives
/// them, and that storage filled with NaN meanwhile (a read through a
/// pointer kept from forward then spoils the gradients checked).
GradCheckResult gradcheck(Layer& layer, BoundWeights& w, std::vector<Tensor> inputs,
                          const Context& ctx, float h = 1e-2f, int max_checks = 200);

}  // namespace trainer::testing
