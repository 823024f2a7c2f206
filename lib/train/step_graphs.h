#pragma once
// StepGraphs: a GPU tower's training forward and backward recorded as CUDA
// graphs at one step and replayed at the steps after it (training.cuda_graphs),
// so that a step queues two launches instead of a few hundred kernels and
// library calls. The loss and metrics between them, the gradient all-reduce
// and the optimizer update run as before: their kernels take per-step values
// (the learning rate) or the host reads their results.
//
// A replay stands for a call of Model::forward or Model::backward: it runs the
// same work on the same storage, and leaves the model's bookkeeping as the
// recorded calls left it. So a recording is replayed only while the model has
// made no call since (Model::calls), with the same input buffer and batch;
// anything else (validation, predict, another batch size, a profiled step)
// runs unrecorded and the next training step records again. A recording that
// fails (the work waited for the device, or ran out of memory) is dropped with
// a warning and the step runs unrecorded; after kMaxFailures the run goes on
// without graphs.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/device.h"
#include "nn/model.h"

namespace trainer {

class StepGraphs {
 public:
  /// Failed recordings after which a run records no more.
  static constexpr int kMaxFailures = 3;
  /// model.forward(ctx, model.input_buffer()) of a training step. With
  /// `record` (the step may be recorded): replayed when recorded for this
  /// input and nothing has called the model since; else recorded, then
  /// replayed (and the backward that follows recorded too). Without it, or
  /// after kMaxFailures, run. Returns model.output() [N, H, W, C]. Throws
  /// what forward throws.
  const Tensor& forward(Model& model, const Context& ctx, bool record);
  /// model.backward(ctx, dy) after forward(): replayed, recorded or run as
  /// the forward was. dy must be model.output_grad_buffer(). When recording
  /// backward fails after it gave forward's outputs away, rerun_forward runs
  /// the forward pass again (keeping what it changes besides the outputs, such
  /// as moving statistics) before backward runs. Throws what backward throws.
  void backward(Model& model, const Context& ctx, const Tensor& dy, const std::function<void()>& rerun_forward);
  /// Drops the recorded graphs (and the device memory only they use): the
  /// caller is about to call the model otherwise (validation, predict).
  void drop();
  /// Steps whose forward and backward were replayed so far.
  int64_t replayed_steps() const { return replayed_steps_; }
  /// Why the last recording failed; empty while none has.
  const std::string& failure() const { return failure_; }

 private:
  enum class Step { Run, Record, Replay };
  std::unique_ptr<DeviceGraph> forward_, backward_;
  uint64_t calls_ = 0;              ///< model.calls() after the recorded backward.
  const void* input_ = nullptr;     ///< The recorded input buffer's storage.
  int batch_ = -1;                  ///< Its samples.
  Step step_ = Step::Run;
  int64_t replayed_steps_ = 0;
  int failures_ = 0;
  std::string failure_;
  /// Drops the graphs after a failed recording, logging why.
  void fail(const std::string& why);
};

}  // namespace trainer
