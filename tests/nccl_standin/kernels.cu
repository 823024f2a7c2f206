// The NCCL stand-in's collective kernel: each rank's call queues one kernel
// of kBlocks blocks on its own stream, and the ranks' kernels, resident
// together on the one GPU, meet at three barriers (a counter in device memory
// that every block adds to; barrier j is passed once it reaches
// (j + 1) * ranks * kBlocks):
//   arrive   each rank publishes its buffers in the pointer table: its input
//            is ready, since the kernel runs after the work queued before it
//            on the rank's stream (the trainer's event from its compute stream)
//   reduce   all-reduce: rank r sums its part [r n / N, (r + 1) n / N) of every
//            rank's input, in rank order, into its own output (the other ranks
//            read only their own parts of it). Broadcast: the ranks copy the
//            root's buffer
//   gather   all-reduce: rank r copies the other parts from their owners'
//            outputs; the third barrier keeps every output in place until all
//            ranks have read it
// Peers' memory is read through L2 (__ldcg): it is written by other kernels
// while this one runs. A block spinning at a barrier quits when the
// communicator is aborted (a flag in mapped host memory), so an abort ends
// kernels whose peer never came.
#include "standin.h"

namespace standin {

namespace {

constexpr unsigned kThreads = 256;

__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// Spins this block for ns nanoseconds (or until aborted).
__device__ void spin_for(uint64_t ns, volatile int* aborted) {
  if (ns == 0) return;
  const uint64_t end = now_ns() + ns;
  while (now_ns() < end && !*aborted) __nanosleep(1000);
}

/// Barrier `index` of every rank's blocks; false when the communicator was aborted meanwhile.
__device__ bool barrier(const Launch& l, unsigned long long index) {
  __shared__ int ok;
  __syncthreads();  // every thread of the block is done with the phase (and with the last barrier's `ok`)
  if (threadIdx.x == 0) {
    __threadfence();  // the block's writes (table, outputs), ordered by the __syncthreads, before its arrival
    const unsigned long long target = (index + 1) * (unsigned long long)(l.nranks) * kBlocks;
    atomicAdd(l.dev.counter, 1ull);
    ok = 1;
    while (*(volatile unsigned long long*)l.dev.counter < target) {
      if (*l.dev.abort_device) {
        ok = 0;
        break;
      }
      __nanosleep(200);
    }
    __threadfence();
  }
  __syncthreads();
  return ok != 0;
}

/// Rank q's send (side 0) or recv (side 1) buffer of this collective, from the table.
__device__ const void* peer(const Launch& l, int q, int side) {
  const void* const* entry = l.dev.table + (size_t(l.slot) * kMaxRanks + size_t(q)) * 2 + side;
  return (const void*)__ldcg((const unsigned long long*)entry);
}

template <class T>
__global__ void collective_kernel(Launch l) {
  spin_for(l.pre_delay_ns, l.dev.abort_device);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const void** entry = l.dev.table + (size_t(l.slot) * kMaxRanks + size_t(l.rank)) * 2;
    entry[0] = l.send;
    entry[1] = l.recv;
  }
  if (!barrier(l, l.barrier_base)) return;
  spin_for(l.ring_ns, l.dev.abort_device);
  T* out = static_cast<T*>(l.recv);
  const size_t stride = size_t(gridDim.x) * blockDim.x, first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const auto part = [&](int q, size_t& lo, size_t& hi) {
    lo = l.count * size_t(q) / size_t(l.nranks);
    hi = l.count * size_t(q + 1) / size_t(l.nranks);
  };
  if (l.broadcast) {  // every rank, the root too when out of place, copies the root's send buffer
    const T* src = static_cast<const T*>(peer(l, l.root, 0));
    if (src != out)
      for (size_t i = first; i < l.count; i += stride) out[i] = __ldcg(src + i);
  } else {
    size_t lo, hi;
    part(l.rank, lo, hi);
    for (size_t i = lo + first; i < hi; i += stride) {
      T sum = __ldcg(static_cast<const T*>(peer(l, 0, 0)) + i);
      for (int q = 1; q < l.nranks; ++q) sum += __ldcg(static_cast<const T*>(peer(l, q, 0)) + i);
      out[i] = sum;
    }
  }
  if (!barrier(l, l.barrier_base + 1)) return;
  if (!l.broadcast)
    for (int q = 0; q < l.nranks; ++q) {
      if (q == l.rank) continue;
      size_t lo, hi;
      part(q, lo, hi);
      const T* owner = static_cast<const T*>(peer(l, q, 1));
      for (size_t i = lo + first; i < hi; i += stride) out[i] = __ldcg(owner + i);
    }
  barrier(l, l.barrier_base + 2);
}

}  // namespace

cudaError_t launch_collective(const Launch& l, ncclDataType_t type, cudaStream_t stream) {
  if (type == ncclDouble) collective_kernel<double><<<kBlocks, kThreads, 0, stream>>>(l);
  else collective_kernel<float><<<kBlocks, kThreads, 0, stream>>>(l);
  return cudaGetLastError();
}

}  // namespace standin
