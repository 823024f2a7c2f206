// CudaContext: streams, library handles and the caching allocator of one tower
// on one GPU (see cuda_context.h).
//
// Allocator: requests are rounded up to 512 bytes; a freed block goes back to
// a size-ordered cache and is handed out again for any later request of
// between half its size and its size (the smallest such block first). A block
// is reused as soon as it is freed, without waiting for the GPU: every user of
// the tower's memory queues its work on the compute stream, so work queued
// after the reuse runs after the work queued before the free (stream order).
// Memory that another stream (copy or communication) touches must be kept
// alive by its owner until that stream's work is ordered before the compute
// stream again (an event), as the input staging and the all-reduce do.
// While recording a graph, freed blocks go to the graphs' pool instead, which
// only recordings take from (cuda_graph.cpp). Bookkeeping: in_use_ counts
// handed-out blocks at their rounded sizes (the workspace included), peak_ is
// its maximum.
// Not thread-safe: one thread uses a context at a time. allocate (when it
// calls cudaMalloc), copy and zero make the context's device current for the
// calling thread; threads queuing ops on the context must have made it
// current themselves (cudaSetDevice), as cuDNN and kernel launches need.
#include "backend/cuda/cuda_context.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace trainer::cuda {

namespace {

constexpr size_t kGranularity = 512;  ///< Allocation sizes are multiples of this (bytes).

/// bytes in MiB with one decimal, e.g. "12.5".
std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", double(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

CudaContext::CudaContext(int device, Precision precision) : device_(device), precision_(precision) {
  try {
    TRAINER_CUDA_CHECK(*this, cudaSetDevice(device_));
    TRAINER_CUDA_CHECK(*this, cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    TRAINER_CUDA_CHECK(*this, cudaStreamCreateWithFlags(&copy_, cudaStreamNonBlocking));
    TRAINER_CUDA_CHECK(*this, cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
    int lowest = 0, highest = 0;  // numerically: the greatest priority is the least number
    TRAINER_CUDA_CHECK(*this, cudaDeviceGetStreamPriorityRange(&lowest, &highest));
    TRAINER_CUDA_CHECK(*this, cudaStreamCreateWithPriority(&urgent_, cudaStreamNonBlocking, highest));
    TRAINER_CUDA_CHECK(*this, cudnnCreate(&cudnn_));
    TRAINER_CUDA_CHECK(*this, cudnnSetStream(cudnn_, compute_));
  } catch (...) {
    release();
    throw;
  }
}

CudaContext::~CudaContext() { release(); }

void CudaContext::release() noexcept {
  // Errors are ignored: this runs in the destructor, also after a device fault.
  cudaSetDevice(device_);
  for (cudaStream_t s : {compute_, copy_, comm_, urgent_})
    if (s) cudaStreamSynchronize(s);
  for (auto& block : free_) cudaFree(block.second);
  for (auto& block : graph_free_) cudaFree(block.second);
  for (auto& block : live_) cudaFree(block.first);
  free_.clear();
  graph_free_.clear();
  live_.clear();
  workspace_ = nullptr;
  workspace_bytes_ = in_use_ = 0;
  release_staging();
  if (cudnn_) cudnnDestroy(cudnn_);
  for (cudaStream_t s : {compute_, copy_, comm_, urgent_})
    if (s) cudaStreamDestroy(s);
  cudnn_ = nullptr;
  compute_ = copy_ = comm_ = urgent_ = nullptr;
  cudaGetLastError();  // leave no error behind for the thread's next CUDA call
}

void* CudaContext::take_cached(std::multimap<size_t, void*>& cache, size_t size, size_t& block) {
  auto it = cache.lower_bound(size);
  if (it == cache.end() || it->first - size > size) return nullptr;  // size <= block <= 2*size
  block = it->first;
  void* p = it->second;
  cache.erase(it);
  return p;
}

void* CudaContext::allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  if (bytes > SIZE_MAX / 2) throw DeviceOutOfMemory(out_of_memory_message(bytes), bytes, in_use_);
  const size_t size = (bytes + kGranularity - 1) / kGranularity * kGranularity;
  size_t block = size;
  void* p = recording_ ? take_cached(graph_free_, size, block) : nullptr;
  if (!p) p = take_cached(free_, size, block);
  if (!p) {
    block = size;
    p = device_malloc(size);
  }
  live_.emplace(p, block);
  in_use_ += block;
  if (in_use_ > peak_) peak_ = in_use_;
  return p;
}

void CudaContext::deallocate(void* p, size_t bytes) noexcept {
  (void)bytes;  // the block's real size (it may be larger) is in live_
  release_block(p, recording_ ? graph_free_ : free_);
}

void CudaContext::release_block(void* p, std::multimap<size_t, void*>& cache) noexcept {
  if (!p) return;
  auto it = live_.find(p);
  if (it == live_.end()) {
    // A pointer this allocator did not hand out (or a double free): the tower's
    // memory bookkeeping is broken, and continuing could corrupt tensors.
    std::fprintf(stderr, "trainer: internal error: cuda:%d freed a block it does not own\n", device_);
    std::abort();
  }
  const size_t block = it->second;
  live_.erase(it);
  in_use_ -= block;
  cache.emplace(block, p);
}

void* CudaContext::device_malloc(size_t bytes) {
  TRAINER_CUDA_CHECK(*this, cudaSetDevice(device_));
  void* p = nullptr;
  // cudaMalloc is no stream work, but capture's default mode refuses it: allowed for this call.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (recording_) TRAINER_CUDA_CHECK(*this, cudaThreadExchangeStreamCaptureMode(&mode));
  cudaError_t e = cudaMalloc(&p, bytes);
  if (recording_) TRAINER_CUDA_CHECK(*this, cudaThreadExchangeStreamCaptureMode(&mode));
  // The retry waits for the device, which a recording cannot: it fails, and the step runs unrecorded.
  if (e == cudaErrorMemoryAllocation && !free_.empty() && !recording_) {
    cudaGetLastError();  // clear the failed allocation's error
    synchronize();
    free_cached();
    e = cudaMalloc(&p, bytes);
  }
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw DeviceOutOfMemory(out_of_memory_message(bytes), bytes, in_use_);
  }
  if (e != cudaSuccess) fail("cudaMalloc(&p, bytes)", status_string(e));
  return p;
}

void CudaContext::free_cached() {
  while (!free_.empty()) {
    auto it = free_.begin();
    void* p = it->second;
    free_.erase(it);
    TRAINER_CUDA_CHECK(*this, cudaFree(p));
  }
}

std::string CudaContext::out_of_memory_message(size_t bytes) const {
  size_t free_bytes = 0, total_bytes = 0;
  TRAINER_CUDA_CHECK(*this, cudaMemGetInfo(&free_bytes, &total_bytes));
  // What the device holds besides this tower's blocks: other towers and processes, the CUDA and cuDNN
  // libraries, and NCCL's buffers (hundreds of MiB to over 1 GiB per GPU with NVLink or NVSwitch).
  const size_t held = total_bytes - free_bytes, others = held > in_use_ ? held - in_use_ : 0;
  std::string msg = "cuda:" + std::to_string(device_) + " out of memory allocating " + mib(bytes) + " MiB (" +
                    mib(in_use_) + " MiB in use by this tower, " + mib(others) +
                    " MiB by the rest: other towers and processes, CUDA, cuDNN and NCCL's buffers; " +
                    std::to_string(free_bytes >> 20) + "/" + std::to_string(total_bytes >> 20) +
                    " MiB free on the device)";
  if (!layer_.empty()) msg += " in layer '" + layer_ + "'";
  return msg;
}

void CudaContext::copy(void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  TRAINER_CUDA_CHECK(*this, cudaSetDevice(device_));  // callers may run on any thread
  cudaPointerAttributes dst_attr{}, src_attr{};
  TRAINER_CUDA_CHECK(*this, cudaPointerGetAttributes(&dst_attr, dst));
  TRAINER_CUDA_CHECK(*this, cudaPointerGetAttributes(&src_attr, src));
  TRAINER_CUDA_CHECK(*this, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, compute_));
  // A host destination must hold the data on return; a pageable (unregistered)
  // host source may be freed by the caller right after the call.
  const bool host_dst = dst_attr.type == cudaMemoryTypeUnregistered || dst_attr.type == cudaMemoryTypeHost;
  const bool pageable_src = src_attr.type == cudaMemoryTypeUnregistered;
  if (host_dst || pageable_src) TRAINER_CUDA_CHECK(*this, cudaStreamSynchronize(compute_));
}

void CudaContext::zero(void* p, size_t bytes) {
  if (!bytes) return;
  TRAINER_CUDA_CHECK(*this, cudaSetDevice(device_));
  TRAINER_CUDA_CHECK(*this, cudaMemsetAsync(p, 0, bytes, compute_));
}

void CudaContext::synchronize() {
  TRAINER_CUDA_CHECK(*this, cudaStreamSynchronize(compute_));
  TRAINER_CUDA_CHECK(*this, cudaStreamSynchronize(copy_));
  TRAINER_CUDA_CHECK(*this, cudaStreamSynchronize(comm_));
  TRAINER_CUDA_CHECK(*this, cudaStreamSynchronize(urgent_));
}

void* CudaContext::workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    // The old block goes back to the cache first (work queued on it still runs
    // before anything queued later), so a failed allocation can reclaim it;
    // to the graphs' pool while graphs that use it live.
    release_block(workspace_, recording_ || graphs_ > 0 ? graph_free_ : free_);
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    workspace_ = allocate(bytes);
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

void CudaContext::fail(const char* call, const std::string& status) const {
  std::string msg = std::string(call) + " failed on cuda:" + std::to_string(device_);
  if (!layer_.empty()) msg += " (layer '" + layer_ + "')";
  throw InternalError(msg + ": " + status);
}

std::string status_string(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

std::string status_string(cudnnStatus_t e) { return cudnnGetErrorString(e); }


}  // namespace trainer::cuda
