#pragma once
// The NCCL stand-in's shared parts (tests only; README.md beside this file):
// the knobs read from the environment, the state of one communicator clique
// (a World: every rank created from one ncclUniqueId) and the collective
// kernel's launch. Internal to tests/nccl_standin.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace standin {

/// The environment's knobs (TRAINER_NCCL_STANDIN_*), read when a World is made.
struct Knobs {
  double delay_us = 0;        ///< DELAY_US: each rank's kernel spins up to this long (random) before it arrives.
  double bus_gbps = 0;        ///< BUS_GBPS: with it, every collective takes NCCL's ring time after the last arrival.
  double latency_us = 0;      ///< LATENCY_US: added to the ring time.
  int model_ranks = 0;        ///< MODEL_RANKS: the N of the ring time (default: the clique's ranks).
  std::string report;         ///< REPORT: a file the last rank to leave appends the modeled all-reduce time to.
  int in_progress = 0;        ///< IN_PROGRESS: calls return ncclInProgress, and the async state says so k times.
  long error_after = -1;      ///< ERROR_AFTER: from the k-th collective on, ncclRemoteError and rank 0 launches none.
  int absent_rank = -1;       ///< ABSENT=r[,k]: rank r launches none of its collectives from the k-th on.
  long absent_after = 0;
  uint64_t seed = 1;          ///< SEED: of the random delays.
};

/// Reads the knobs; bad text is reported on stderr and the knob left off.
Knobs read_knobs();

/// A collective as the sequences record it.
struct Record {
  std::string op;    ///< "AllReduce" or "Broadcast".
  int type = 0;      ///< ncclDataType_t.
  size_t count = 0;
  int root = -1;
  bool operator==(const Record& o) const { return op == o.op && type == o.type && count == o.count && root == o.root; }
  std::string text() const;
};

/// Slots of the device's pointer table (a rank's k-th collective uses slot k % kSlots).
constexpr int kSlots = 4;
/// Blocks of each rank's collective kernel (all ranks' blocks must be resident together).
constexpr int kBlocks = 4;
/// Most ranks of one World.
constexpr int kMaxRanks = 16;

/// The device state of a World, on its one GPU.
struct DeviceState {
  unsigned long long* counter = nullptr;  ///< Barrier arrivals (device memory).
  const void** table = nullptr;           ///< [kSlots][kMaxRanks][2]: each rank's send and recv buffers.
  volatile int* abort_host = nullptr;     ///< Set by ncclCommAbort (pinned, mapped).
  volatile int* abort_device = nullptr;   ///< Its device address.
};

/// One clique of ranks (one unique id).
struct World {
  std::mutex mu;
  int nranks = 0;
  int device = 0;
  Knobs knobs;
  std::mt19937_64 random;
  DeviceState dev;
  std::vector<bool> joined, gone;
  std::vector<std::vector<Record>> sequences;  ///< Per rank, every collective it called.
  ncclResult_t error = ncclSuccess;            ///< Reported by every rank's ncclCommGetAsyncError.
  double allreduce_ring_ns = 0;                ///< Rank 0's all-reduces' modeled ring time (BUS_GBPS).
  long allreduces = 0;                         ///< Rank 0's all-reduces.
  std::string last_error;
};

/// What one rank's kernel does for one collective.
struct Launch {
  DeviceState dev;
  int rank = 0, nranks = 0;
  int slot = 0;
  unsigned long long barrier_base = 0;  ///< Global index of the collective's first of 3 barriers.
  bool broadcast = false;
  int root = 0;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  uint64_t pre_delay_ns = 0;            ///< Before arriving.
  uint64_t ring_ns = 0;                 ///< After every rank has arrived.
};

/// Queues rank's kernel on stream for elements of type (ncclFloat or ncclDouble).
cudaError_t launch_collective(const Launch& l, ncclDataType_t type, cudaStream_t stream);

}  // namespace standin

/// The communicator handle nccl.h declares opaque.
struct ncclComm {
  standin::World* world = nullptr;
  int rank = 0;
  bool blocking = true;
  long calls = 0;            ///< Collectives this rank has called.
  int in_progress_left = 0;  ///< Async-state polls still to answer ncclInProgress.
};
