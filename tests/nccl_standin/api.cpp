// The NCCL entry points trainer calls (lib/dist/cuda/nccl_communicator.cpp),
// for the stand-in (README.md beside this file): communicators keyed by the
// unique id, all ranks of one on one GPU, each collective a kernel on the
// caller's stream (kernels.cu), every rank's sequence of collectives recorded
// and compared, and the fault knobs of standin.h.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include <unistd.h>

#include "standin.h"

namespace standin {

namespace {

std::mutex g_mu;                                      // guards g_worlds and g_ids
std::map<std::string, std::unique_ptr<World>> g_worlds;  // by unique id
unsigned long g_ids = 0;

/// A knob as a number; `fallback` when unset, reported on stderr when not a number.
double knob(const char* name, double fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || (*end && *end != ',')) {
    std::fprintf(stderr, "nccl stand-in: %s='%s' is not a number; ignored\n", name, text);
    return fallback;
  }
  return v;
}

const char* type_name(int type) { return type == ncclDouble ? "double" : type == ncclFloat ? "float" : "other"; }

/// The World of comm, or null for a handle that is no communicator.
World* world_of(ncclComm_t comm) { return comm ? comm->world : nullptr; }

/// Sets w's error (the first one stays) and prints it once (w->mu held).
ncclResult_t fail(World& w, ncclResult_t error, const std::string& text) {
  if (w.error == ncclSuccess) {
    w.error = error;
    w.last_error = "nccl stand-in: " + text;
    std::fprintf(stderr, "%s\n", w.last_error.c_str());
  }
  return error;
}

ncclResult_t make_device_state(World& w) {
  DeviceState& d = w.dev;
  if (cudaMalloc(&d.counter, sizeof(unsigned long long)) != cudaSuccess ||
      cudaMemset(d.counter, 0, sizeof(unsigned long long)) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&d.table), sizeof(void*) * kSlots * kMaxRanks * 2) != cudaSuccess ||
      cudaHostAlloc(const_cast<int**>(&d.abort_host), sizeof(int), cudaHostAllocMapped) != cudaSuccess ||
      cudaHostGetDevicePointer(const_cast<int**>(&d.abort_device), const_cast<int*>(d.abort_host), 0) != cudaSuccess)
    return ncclUnhandledCudaError;
  *d.abort_host = 0;
  return ncclSuccess;
}

void free_device_state(DeviceState& d) {
  cudaFree(d.counter);
  cudaFree(d.table);
  cudaFreeHost(const_cast<int*>(d.abort_host));
  d = DeviceState{};
}

/// Records rank's collective and compares it with the other ranks' at the same place (w.mu held).
ncclResult_t record(World& w, int rank, const Record& r) {
  std::vector<Record>& mine = w.sequences[size_t(rank)];
  const size_t k = mine.size();
  mine.push_back(r);
  for (int q = 0; q < w.nranks; ++q) {
    const std::vector<Record>& other = w.sequences[size_t(q)];
    if (q != rank && other.size() > k && !(other[k] == r))
      return fail(w, ncclInvalidUsage, "collective " + std::to_string(k) + " differs between ranks: rank " +
                                           std::to_string(q) + " called " + other[k].text() + ", rank " +
                                           std::to_string(rank) + " " + r.text());
  }
  return ncclSuccess;
}

/// Queues comm's next collective (AllReduce or Broadcast) on stream.
ncclResult_t collective(const char* op, const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  World* w = world_of(comm);
  if (!w) return ncclInvalidArgument;
  if (type != ncclFloat && type != ncclDouble) return ncclInvalidArgument;
  std::unique_lock<std::mutex> lock(w->mu);  // released before the launch, which may block
  if (w->error != ncclSuccess) return w->error;
  const Record r{op, int(type), count, root};
  if (const ncclResult_t res = record(*w, comm->rank, r); res != ncclSuccess) return res;
  const long k = comm->calls++;
  const Knobs& kn = w->knobs;
  if (kn.error_after >= 0 && k >= kn.error_after) {
    fail(*w, ncclRemoteError, "fault knob: a remote rank failed after " + std::to_string(kn.error_after) +
                                  " collectives (TRAINER_NCCL_STANDIN_ERROR_AFTER)");
    if (comm->rank == 0) return ncclSuccess;  // as if its kernel never ran: the others wait for it
  }
  if (comm->rank == kn.absent_rank && k >= kn.absent_after) return ncclSuccess;  // never arrives
  Launch l;
  l.dev = w->dev;
  l.rank = comm->rank;
  l.nranks = w->nranks;
  l.slot = int(k % kSlots);
  l.barrier_base = 3ull * (unsigned long long)k;
  l.broadcast = std::strcmp(op, "Broadcast") == 0;
  l.root = root;
  l.send = send;
  l.recv = recv;
  l.count = count;
  if (kn.delay_us > 0)
    l.pre_delay_ns = uint64_t(std::uniform_real_distribution<double>(0, kn.delay_us * 1e3)(w->random));
  if (kn.bus_gbps > 0) {  // NCCL's ring: an all-reduce moves 2 (N-1)/N of the bytes over each link, a broadcast them once
    const double bytes = double(count) * (type == ncclDouble ? 8 : 4), n = kn.model_ranks > 0 ? kn.model_ranks : w->nranks;
    const double moved = l.broadcast ? bytes : bytes * 2.0 * (n - 1) / n;
    l.ring_ns = uint64_t(moved / kn.bus_gbps + kn.latency_us * 1e3);  // bytes / (GB/s) = ns
    if (!l.broadcast && comm->rank == 0) w->allreduce_ring_ns += double(l.ring_ns), ++w->allreduces;
  }
  const bool in_progress = !comm->blocking && kn.in_progress > 0;
  if (in_progress) comm->in_progress_left = kn.in_progress;
  lock.unlock();
  if (launch_collective(l, type, stream) != cudaSuccess) {
    lock.lock();
    return fail(*w, ncclUnhandledCudaError, "the collective kernel did not launch");
  }
  return in_progress ? ncclInProgress : ncclSuccess;
}

/// Marks comm's rank gone and deletes comm; frees the World once every rank that joined is gone.
void leave(ncclComm_t comm) {
  std::unique_ptr<World> last;
  {
    std::lock_guard<std::mutex> global(g_mu);
    World* w = comm->world;
    bool all_gone = true;
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->gone[size_t(comm->rank)] = true;
      for (int q = 0; q < w->nranks; ++q) all_gone = all_gone && (w->gone[size_t(q)] || !w->joined[size_t(q)]);
    }
    if (all_gone)
      for (auto it = g_worlds.begin(); it != g_worlds.end(); ++it)
        if (it->second.get() == w) {
          last = std::move(it->second);
          g_worlds.erase(it);
          break;
        }
  }
  delete comm;
  if (!last) return;
  if (!last->knobs.report.empty())
    if (std::FILE* f = std::fopen(last->knobs.report.c_str(), "a")) {
      std::fprintf(f, "allreduces %ld ring_ms %.3f\n", last->allreduces, last->allreduce_ring_ns / 1e6);
      std::fclose(f);
    }
  cudaSetDevice(last->device);
  cudaDeviceSynchronize();  // kernels quitting after an abort still read the state
  free_device_state(last->dev);
}

}  // namespace

std::string Record::text() const {
  std::string s = op + " of " + std::to_string(count) + " " + type_name(type) + (count == 1 ? "" : "s");
  if (root >= 0) s += " from rank " + std::to_string(root);
  return s;
}

Knobs read_knobs() {
  Knobs k;
  k.delay_us = knob("TRAINER_NCCL_STANDIN_DELAY_US", 0);
  k.bus_gbps = knob("TRAINER_NCCL_STANDIN_BUS_GBPS", 0);
  k.latency_us = knob("TRAINER_NCCL_STANDIN_LATENCY_US", 0);
  k.in_progress = int(knob("TRAINER_NCCL_STANDIN_IN_PROGRESS", 0));
  k.error_after = long(knob("TRAINER_NCCL_STANDIN_ERROR_AFTER", -1));
  k.absent_rank = int(knob("TRAINER_NCCL_STANDIN_ABSENT", -1));
  if (const char* a = std::getenv("TRAINER_NCCL_STANDIN_ABSENT"); a && std::strchr(a, ','))
    k.absent_after = std::strtol(std::strchr(a, ',') + 1, nullptr, 10);
  k.seed = uint64_t(knob("TRAINER_NCCL_STANDIN_SEED", 1));
  k.model_ranks = int(knob("TRAINER_NCCL_STANDIN_MODEL_RANKS", 0));
  if (const char* r = std::getenv("TRAINER_NCCL_STANDIN_REPORT")) k.report = r;
  return k;
}

}  // namespace standin

using standin::World;

namespace {

/// At load, before any CUDA context exists: up to 32 hardware queues per GPU (CUDA's default is 8), so that
/// the four streams of each of 8 towers sharing the GPU get queues of their own. With shared queues a compute
/// stream waiting for its bucket's reduction could block another tower's collective queued behind it on the
/// same hardware queue, which the reduction needs: a hang that real NCCL, one rank per GPU, never meets.
__attribute__((constructor)) void more_hardware_queues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }

}  // namespace

extern "C" {

/// Present only in the stand-in: trainer's NCCL communicator looks it up to allow ranks sharing a GPU.
int trainerNcclStandin() { return 1; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(standin::g_mu);
  std::memset(id->internal, 0, sizeof id->internal);
  std::snprintf(id->internal, sizeof id->internal, "standin-%ld-%lu", long(getpid()), ++standin::g_ids);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
  if (!comm || nranks < 1 || nranks > standin::kMaxRanks || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return ncclUnhandledCudaError;
  std::lock_guard<std::mutex> global(standin::g_mu);
  std::unique_ptr<World>& slot = standin::g_worlds[std::string(id.internal, sizeof id.internal)];
  if (!slot) {
    slot = std::make_unique<World>();
    World& w = *slot;
    w.nranks = nranks;
    w.device = device;
    w.knobs = standin::read_knobs();
    w.random.seed(w.knobs.seed);
    w.joined.assign(size_t(nranks), false);
    w.gone.assign(size_t(nranks), false);
    w.sequences.resize(size_t(nranks));
    if (const ncclResult_t res = standin::make_device_state(w); res != ncclSuccess) {
      standin::free_device_state(w.dev);
      standin::g_worlds.erase(std::string(id.internal, sizeof id.internal));  // no half-made clique to join
      return res;
    }
  }
  World& w = *slot;
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.nranks != nranks || w.device != device || w.joined[size_t(rank)])
    return standin::fail(w, ncclInvalidUsage, "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                                                  " on GPU " + std::to_string(device) + " does not fit a clique of " +
                                                  std::to_string(w.nranks) + " ranks on GPU " +
                                                  std::to_string(w.device) + " (all ranks must share one GPU)");
  w.joined[size_t(rank)] = true;
  auto* c = new ncclComm;
  c->world = &w;
  c->rank = rank;
  c->blocking = !(config && config->blocking == 0);
  *comm = c;
  if (!c->blocking && w.knobs.in_progress > 0) {
    c->in_progress_left = w.knobs.in_progress;
    return ncclInProgress;
  }
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
  World* w = standin::world_of(comm);
  if (!w || !state) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(w->mu);
  if (w->error != ncclSuccess) *state = w->error;
  else if (comm->in_progress_left > 0) --comm->in_progress_left, *state = ncclInProgress;
  else *state = ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (op != ncclSum) return ncclInvalidArgument;
  return standin::collective("AllReduce", send, recv, count, type, -1, comm, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  World* w = standin::world_of(comm);
  if (!w || root < 0 || root >= w->nranks) return ncclInvalidArgument;
  return standin::collective("Broadcast", send, recv, count, type, root, comm, stream);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  World* w = standin::world_of(comm);
  if (!w) return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(w->mu);
  // Every rank must have called the same collectives: a shorter sequence is one a peer waited for.
  for (int q = 0; q < w->nranks; ++q)
    if (w->sequences[size_t(q)].size() != w->sequences[size_t(comm->rank)].size())
      return standin::fail(*w, ncclInvalidUsage,
                           "rank " + std::to_string(comm->rank) + " called " +
                               std::to_string(w->sequences[size_t(comm->rank)].size()) + " collectives, rank " +
                               std::to_string(q) + " " + std::to_string(w->sequences[size_t(q)].size()));
  return w->error;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!standin::world_of(comm)) return ncclInvalidArgument;
  standin::leave(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  World* w = standin::world_of(comm);
  if (!w) return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(w->mu);
    *w->dev.abort_host = 1;  // every kernel of the clique quits its barrier
  }
  standin::leave(comm);
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (stand-in)";
    case ncclSystemError: return "unhandled system error (stand-in)";
    case ncclInternalError: return "internal error (stand-in)";
    case ncclInvalidArgument: return "invalid argument (stand-in)";
    case ncclInvalidUsage: return "invalid usage (stand-in)";
    case ncclRemoteError: return "remote process exited or there was a network error (stand-in)";
    case ncclInProgress: return "NCCL operation in progress (stand-in)";
    default: return "unknown result code (stand-in)";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  World* w = standin::world_of(comm);
  if (!w) return "";
  std::lock_guard<std::mutex> lock(w->mu);
  return w->last_error.c_str();
}

}  // extern "C"
