// CudaContext's recording of its compute stream into CUDA graphs
// (core/device.h: DeviceGraph, begin_recording, end_recording).
//
// Recording is CUDA stream capture in thread-local mode: only this thread's
// calls that would wait for the device, or that capture forbids, end it in
// failure; the other towers' threads and the input pipeline go on. The graph
// keeps the addresses it was recorded with, so every block it touches must
// stay allocated and never be lent to other work while it lives: the blocks
// of tensors (their owners keep them; the caller replays only while nothing
// else has run on them), and the blocks freed while recording, which go to
// the graphs' pool (graph_free_) instead of the cache. Other work never takes
// from that pool; when the context's last graph goes, it returns to the cache.
// A replay is one cudaGraphLaunch on the compute stream.
#include "backend/cuda/cuda_context.h"

#include "core/error.h"

namespace trainer::cuda {

/// A recorded graph of one CudaContext (see the file comment).
class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(CudaContext& ctx, cudaGraphExec_t exec) : ctx_(ctx), exec_(exec) { ++ctx_.graphs_; }
  ~CudaGraph() override {
    // Errors are ignored (destructor): the graph's launches are stream work that completes either way.
    cudaSetDevice(ctx_.device_);
    cudaGraphExecDestroy(exec_);
    ctx_.graph_destroyed();
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay() override { TRAINER_CUDA_CHECK(ctx_, cudaGraphLaunch(exec_, ctx_.compute_)); }

 private:
  CudaContext& ctx_;
  cudaGraphExec_t exec_;
};

bool CudaContext::begin_recording() {
  if (recording_) throw InternalError("CudaContext::begin_recording: cuda:" + std::to_string(device_) +
                                      " is recording already");
  TRAINER_CUDA_CHECK(*this, cudaSetDevice(device_));
  TRAINER_CUDA_CHECK(*this, cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
  recording_ = true;
  return true;
}

std::unique_ptr<DeviceGraph> CudaContext::end_recording(std::string& why) {
  if (!recording_) throw InternalError("CudaContext::end_recording: cuda:" + std::to_string(device_) +
                                       " is not recording");
  recording_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(compute_, &graph);
  if (ended != cudaSuccess || !graph) {
    cudaGetLastError();  // the failed capture's error is reported here, not by the next call
    why = "cudaStreamEndCapture: " + status_string(ended);
    if (graph) cudaGraphDestroy(graph);
    return_graph_pool();
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph holds its own copy
  if (made != cudaSuccess) {
    cudaGetLastError();
    why = "cudaGraphInstantiate: " + status_string(made);
    return_graph_pool();
    return nullptr;
  }
  return std::make_unique<CudaGraph>(*this, exec);
}

void CudaContext::graph_destroyed() noexcept {
  --graphs_;
  return_graph_pool();
}

void CudaContext::return_graph_pool() noexcept {
  // A failed recording's work never runs, so its blocks are free for anything once no graph lives.
  if (graphs_ > 0 || recording_) return;
  free_.insert(graph_free_.begin(), graph_free_.end());
  graph_free_.clear();
}

}  // namespace trainer::cuda
