// list_gpus() through the CUDA runtime; make_gpu_context() makes a CudaContext.
#include <cuda_runtime.h>

#include "backend/cuda/cuda_context.h"
#include "backend/gpu_info.h"

namespace trainer {

std::vector<GpuInfo> list_gpus() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" error
    return {};
  }
  std::vector<GpuInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    out.push_back(GpuInfo{i, prop.name, prop.totalGlobalMem});
  }
  return out;
}

std::unique_ptr<DeviceContext> make_gpu_context(int device, Precision precision) {
  return std::make_unique<cuda::CudaContext>(device, precision);
}

}  // namespace trainer
