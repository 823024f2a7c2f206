#pragma once
// Weight regularizers of keras.regularizers (L1, L2, L1L2): a penalty
// l1 * sum |w| + l2 * sum w^2 over one weight, added to the training loss
// (and to the logged loss and val_loss, as Keras adds model.losses to both),
// whose gradient l1 * sign(w) + 2 * l2 * w is added to the weight's gradient
// before the optimizer's update (backend/train_math.h, regularized_grad).
#include <string>

namespace trainer {

class ParamReader;

/// The factors of one weight's penalty; both 0: not regularized.
struct Regularizer {
  double l1 = 0, l2 = 0;
  bool any() const { return l1 > 0 || l2 > 0; }
};

/// Reads key (e.g. "kernel_regularizer") the ways Keras accepts it: absent or
/// null (none), "l1" / "L1" (L1(0.01)), "l2" / "L2" (L2(0.01)), "l1_l2"
/// (tf.keras 2's l1_l2(): 0.01 and 0.01), or a mapping {type: L1 | L2 | L1L2,
/// l1: ..., l2: ...} with Keras's defaults (L1 and L2: 0.01; L1L2: 0 and 0).
/// The factors are >= 0. UserError at the key for anything else: an L1L2
/// without factors ("L1L2", "l1l2" or a mapping without l1 and l2: Keras 3's
/// L1L2() does nothing), a Python call such as "l2(1e-4)" (the mapping to
/// write instead, with its factor), an unknown type.
Regularizer read_regularizer(ParamReader& p, const std::string& key);

}  // namespace trainer
