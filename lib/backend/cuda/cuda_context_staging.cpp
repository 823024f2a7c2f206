// CudaContext's pinned host memory: the input pipeline (core/device.h:
// pinned_staging, upload_staged, input_consumed, take_input_wait_seconds), the
// read-back of results the host needs (read_back, read_back_then and the
// deferred read-backs), and make_current.
//
// One pinned host buffer per tower: the tower's thread gathers its next shard
// into it while the GPU still runs the previous step, then upload_staged
// queues the host-to-device copy on the copy stream. The copy first waits for
// the `consumed_` event (the compute stream has read the previous input), and
// the compute stream waits for the copy's `uploaded_` event. Two timing events
// around that wait measure how long the compute stream stalled for input: the
// time each tower waited for data.
//
// Read-backs land in a second pinned buffer, one slot each. While they are
// deferred, each copy takes the slot after the undelivered ones and records
// `read_backs_done_` after it; finish_read_backs waits for that event once
// and hands each slot to its delivery in the order queued.
#include "backend/cuda/cuda_context.h"

#include <algorithm>
#include <cstring>

namespace trainer::cuda {

namespace {

/// The smallest read-back buffer: the loss and metric sums of a step fit (a confusion table of 256 classes does not).
constexpr size_t kMinReadBackBytes = 64 << 10;

}  // namespace

void CudaContext::make_current() { TRAINER_CUDA_CHECK(*this, cudaSetDevice(device_)); }

void* CudaContext::pinned_staging(size_t bytes) {
  TRAINER_CUDA_CHECK(*this, cudaSetDevice(device_));
  if (!uploaded_) {
    TRAINER_CUDA_CHECK(*this, cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
    TRAINER_CUDA_CHECK(*this, cudaEventCreateWithFlags(&consumed_, cudaEventDisableTiming));
  }
  // The previous upload must have finished reading the buffer before it is refilled.
  if (uploading_) TRAINER_CUDA_CHECK(*this, cudaEventSynchronize(uploaded_));
  if (bytes > pinned_bytes_) {
    if (pinned_) TRAINER_CUDA_CHECK(*this, cudaFreeHost(pinned_));
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    TRAINER_CUDA_CHECK(*this, cudaHostAlloc(&pinned_, bytes, cudaHostAllocDefault));
    pinned_bytes_ = bytes;
  }
  return pinned_;
}

void CudaContext::upload_staged(void* dst, size_t bytes) {
  if (!bytes) return;
  TRAINER_CUDA_CHECK(*this, cudaStreamWaitEvent(copy_, consumed_, 0));
  TRAINER_CUDA_CHECK(*this, cudaMemcpyAsync(dst, pinned_, bytes, cudaMemcpyHostToDevice, copy_));
  TRAINER_CUDA_CHECK(*this, cudaEventRecord(uploaded_, copy_));
  uploading_ = true;
  std::pair<cudaEvent_t, cudaEvent_t> w{};
  if (!spare_waits_.empty()) {
    w = spare_waits_.back();
    spare_waits_.pop_back();
  } else {
    TRAINER_CUDA_CHECK(*this, cudaEventCreate(&w.first));
    TRAINER_CUDA_CHECK(*this, cudaEventCreate(&w.second));
  }
  // Runs that never ask for the waits (predict, evaluate) must not pile up events.
  if (waits_.size() >= kMaxPendingWaits) waited_seconds_ += take_input_wait_seconds();
  waits_.push_back(w);
  TRAINER_CUDA_CHECK(*this, cudaEventRecord(w.first, compute_));
  TRAINER_CUDA_CHECK(*this, cudaStreamWaitEvent(compute_, uploaded_, 0));
  TRAINER_CUDA_CHECK(*this, cudaEventRecord(w.second, compute_));
}

void CudaContext::input_consumed() {
  if (consumed_) TRAINER_CUDA_CHECK(*this, cudaEventRecord(consumed_, compute_));
}

double CudaContext::take_input_wait_seconds() {
  double seconds = waited_seconds_;
  waited_seconds_ = 0;
  for (auto& w : waits_) {
    TRAINER_CUDA_CHECK(*this, cudaEventSynchronize(w.second));
    float ms = 0.f;
    TRAINER_CUDA_CHECK(*this, cudaEventElapsedTime(&ms, w.first, w.second));
    seconds += double(ms) / 1000.0;
    spare_waits_.push_back(w);
  }
  waits_.clear();
  return seconds;
}

void* CudaContext::read_back_slot(size_t bytes) {
  const size_t start = (readback_used_ + 15) / 16 * 16;  // 16-byte aligned slots
  if (start + bytes > readback_bytes_) {
    // Kept until the context goes: cudaFreeHost would wait for the whole device, the towers' collectives too;
    // and deferred copies may still land in it.
    if (readback_) retired_readbacks_.push_back(readback_);
    readback_ = nullptr;
    const size_t size = std::max({bytes, 2 * readback_bytes_, kMinReadBackBytes});
    readback_bytes_ = readback_used_ = 0;
    TRAINER_CUDA_CHECK(*this, cudaHostAlloc(&readback_, size, cudaHostAllocDefault));
    readback_bytes_ = size;
    readback_used_ = bytes;
    return readback_;
  }
  readback_used_ = start + bytes;
  return static_cast<char*>(readback_) + start;
}

void CudaContext::read_back(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  void* host = read_back_slot(bytes);
  TRAINER_CUDA_CHECK(*this, cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, compute_));
  TRAINER_CUDA_CHECK(*this, cudaStreamSynchronize(compute_));
  std::memcpy(dst, host, bytes);
  if (pending_.empty()) readback_used_ = 0;
}

void CudaContext::read_back_then(const void* src, size_t bytes, std::function<void(const void*)> deliver) {
  void* host = read_back_slot(bytes);
  TRAINER_CUDA_CHECK(*this, cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, compute_));
  if (!deferring_) {
    TRAINER_CUDA_CHECK(*this, cudaStreamSynchronize(compute_));
    readback_used_ = 0;  // nothing is pending while not deferring
    deliver(host);
    return;
  }
  if (!read_backs_done_)
    TRAINER_CUDA_CHECK(*this, cudaEventCreateWithFlags(&read_backs_done_, cudaEventDisableTiming));
  TRAINER_CUDA_CHECK(*this, cudaEventRecord(read_backs_done_, compute_));
  pending_.push_back({host, std::move(deliver)});
}

void CudaContext::finish_read_backs() {
  if (pending_.empty()) return;
  // Emptied (keeping its capacity: no allocation per step), not delivered twice, whatever happens below.
  struct Clear {
    std::vector<PendingReadBack>& pending;
    ~Clear() { pending.clear(); }
  } clear{pending_};
  readback_used_ = 0;
  TRAINER_CUDA_CHECK(*this, cudaEventSynchronize(read_backs_done_));
  for (const PendingReadBack& p : pending_) p.deliver(p.host);
}

void CudaContext::stop_deferring_read_backs() noexcept {
  deferring_ = false;
  pending_.clear();
  readback_used_ = 0;  // copies still in flight land before any later one, in stream order
}

void CudaContext::release_staging() noexcept {
  for (void* p : {pinned_, readback_})
    if (p) cudaFreeHost(p);
  for (void* p : retired_readbacks_) cudaFreeHost(p);
  retired_readbacks_.clear();
  pinned_ = readback_ = nullptr;
  pinned_bytes_ = readback_bytes_ = 0;
  for (cudaEvent_t e : {uploaded_, consumed_, read_backs_done_})
    if (e) cudaEventDestroy(e);
  uploaded_ = consumed_ = read_backs_done_ = nullptr;
  pending_.clear();
  uploading_ = false;
  for (auto* list : {&waits_, &spare_waits_}) {
    for (auto& w : *list) {
      cudaEventDestroy(w.first);
      cudaEventDestroy(w.second);
    }
    list->clear();
  }
}

}  // namespace trainer::cuda
