#pragma once
// Placing a layer's scratch (a Buffer or Tensor it keeps across steps) on the
// device of the tower that calls it.
#include "core/device.h"

namespace trainer {

/// x (a Buffer<T> or Tensor) on device d: moved there (and emptied) when it
/// lives elsewhere, else unchanged. Returns x.
template <class X>
X& on_device(X& x, const Device& d) {
  if (x.device() != d) x.set_device(d);
  return x;
}

}  // namespace trainer
