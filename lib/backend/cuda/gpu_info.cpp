// list_gpus() through the CUDA runtime; make_gpu_context() makes a CudaContext.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backend/cuda/cuda_context.h"
#include "backend/gpu_info.h"

namespace trainer {

namespace {

/// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints a UUID.
std::string uuid_text(const cudaUUID_t& id) {
  static const char* hex = "0123456789abcdef";
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += hex[uint8_t(id.bytes[i]) >> 4];
    out += hex[uint8_t(id.bytes[i]) & 15];
  }
  return out;
}

}  // namespace

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
    out.push_back(GpuInfo{i, prop.name, prop.totalGlobalMem, uuid_text(prop.uuid)});
  }
  return out;
}

std::unique_ptr<DeviceContext> make_gpu_context(int device, Precision precision) {
  return std::make_unique<cuda::CudaContext>(device, precision);
}

}  // namespace trainer
