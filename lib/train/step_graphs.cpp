// StepGraphs (see step_graphs.h).
#include "train/step_graphs.h"

#include <spdlog/spdlog.h>

#include <exception>

namespace trainer {

namespace {

/// Ends d's recording, if one is open, after an exception, dropping whatever it recorded.
void abandon_recording(DeviceContext& d) noexcept {
  try {
    std::string ignored;
    d.end_recording(ignored);
  } catch (const std::exception&) {  // not recording (end_recording itself threw): nothing to end
  }
}

}  // namespace

const Tensor& StepGraphs::forward(Model& model, const Context& ctx, bool record) {
  Tensor& x = model.input_buffer();
  const int n = x.shape().n;
  const void* input = n > 0 ? x.raw() : nullptr;
  if (record && forward_ && backward_ && model.calls() == calls_ && input == input_ && n == batch_) {
    step_ = Step::Replay;
    forward_->replay();
    return model.output();
  }
  drop();
  DeviceContext* d = ctx.device.ctx;
  if (!record || failures_ >= kMaxFailures || n == 0 || !d) return model.forward(ctx, x);
  try {
    if (!d->begin_recording()) return model.forward(ctx, x);
    model.forward(ctx, x);
    std::string why;
    forward_ = d->end_recording(why);
    if (!forward_) fail(why);
  } catch (const std::exception& e) {
    abandon_recording(*d);
    fail(std::string("the forward pass threw: ") + e.what());
  }
  // A failed recording ran nothing: forward runs, from where the recording left the model's storage.
  if (!forward_) return model.forward(ctx, x);
  forward_->replay();
  step_ = Step::Record;
  input_ = input;
  batch_ = n;
  return model.output();
}

void StepGraphs::backward(Model& model, const Context& ctx, const Tensor& dy,
                          const std::function<void()>& rerun_forward) {
  if (step_ == Step::Replay) {
    backward_->replay();
    ++replayed_steps_;
    return;
  }
  if (step_ == Step::Run) return model.backward(ctx, dy);
  DeviceContext& d = *ctx.device.ctx;
  try {
    d.begin_recording();
    model.backward(ctx, dy);
    std::string why;
    backward_ = d.end_recording(why);
    if (!backward_) fail(why);
  } catch (const std::exception& e) {
    abandon_recording(d);
    fail(std::string("the backward pass threw: ") + e.what());
  }
  if (!backward_) {
    // The unrun backward gave storage of forward's outputs away: forward runs again to refill it.
    rerun_forward();
    model.backward(ctx, dy);
    return;
  }
  backward_->replay();
  calls_ = model.calls();
}

void StepGraphs::drop() {
  forward_.reset();
  backward_.reset();
  step_ = Step::Run;
}

void StepGraphs::fail(const std::string& why) {
  drop();
  failure_ = why;
  ++failures_;
  spdlog::warn("training.cuda_graphs: recording a step failed ({}); the step runs unrecorded{}", why,
               failures_ >= kMaxFailures ? ", and so does the rest of the run" : "");
}

}  // namespace trainer
