#pragma once
// What Cropping2D and ZeroPadding2D share: Keras's forms of their border
// argument.
#include <string>

#include "backend/elementwise_ops.h"
#include "config/params.h"

namespace trainer {

/// Reads key as Keras's Cropping2D / ZeroPadding2D argument: an integer (every
/// side), [height, width] (height rows at the top and at the bottom, width
/// columns at the left and at the right) or [[top, bottom], [left, right]];
/// each side in [0, 1000000]. def for every side when key is absent. UserError
/// at the key naming the three forms otherwise.
Crop2DParams read_border(ParamReader& p, const std::string& key, int def);

}  // namespace trainer
