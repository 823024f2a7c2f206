#pragma once
// StubDeviceContext: a DeviceContext for tests that need a non-CPU Device
// without a GPU. Memory calls throw InternalError (a test that must not touch
// memory uses it as is; others override them); the rest do nothing.
#include "core/device.h"
#include "core/error.h"

namespace trainer {

class StubDeviceContext : public DeviceContext {
 public:
  void* allocate(size_t) override { throw InternalError("StubDeviceContext::allocate"); }
  void deallocate(void*, size_t) noexcept override {}
  void copy(void*, const void*, size_t) override { throw InternalError("StubDeviceContext::copy"); }
  void zero(void*, size_t) override { throw InternalError("StubDeviceContext::zero"); }
  void synchronize() override {}
  void make_current() override {}
  void set_layer(const char*) override {}
  void* pinned_staging(size_t) override { throw InternalError("StubDeviceContext::pinned_staging"); }
  void upload_staged(void*, size_t) override { throw InternalError("StubDeviceContext::upload_staged"); }
  void input_consumed() override {}
  double take_input_wait_seconds() override { return 0; }
  size_t peak_bytes() const override { return 0; }
};

}  // namespace trainer
