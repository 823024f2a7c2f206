#pragma once
// The Communicator of GPU towers through NCCL: one NCCL rank per tower, all in
// this process, every tower on its own GPU (NCCL forbids two ranks of one
// communicator on one GPU; towers sharing a GPU, --gpus 0,0, reduce through
// the in-process LocalCommunicator instead). No CUDA include here: builds
// without CUDA link lib/dist/nccl_communicator_none.cpp.
//
// Threads: the constructing thread creates every rank's NCCL communicator;
// afterwards each tower's host thread (train/tower_pool.h) issues only its own
// rank's calls, every rank the same collectives in the same order.
//
// Streams: a collective of rank r waits for the work queued so far on r's
// compute stream and the compute stream's later work sees its result
// (all_reduce_sum, broadcast: at once; start_all_reduce_sum: after wait or
// wait_all). Started reductions (gradient buckets) run on r's communication
// stream (CudaContext::comm_stream) through one NCCL communicator; the others
// through a second one on CudaContext::urgent_comm_stream, so that a small
// reduction the compute stream waits for never queues behind a bucket (with
// NCCL_LAUNCH_ORDER_IMPLICIT=1 in the environment it waits for the queued
// buckets to start). The data must stay allocated, and untouched by other
// work, until then. Callers issue both kinds in the same interleaved order on
// every rank.
//
// Failures: NCCL errors, CUDA errors on the communication stream and
// collectives still running timeout_seconds after they were queued are found
// by wait, wait_all and synchronize (synchronize waits for completion; the
// others only look). The finder aborts every rank's NCCL communicator and
// throws InternalError naming rank, device, collective and cause ("timed out
// after N s" or NCCL's error string); the other ranks' next calls throw
// InternalError "... aborted: <that message>". Destroy the communicator before
// the towers' device contexts.
#include <memory>
#include <vector>

#include "core/device.h"
#include "dist/communicator.h"
#include "dist/process_group.h"

namespace trainer {

/// Whether the NCCL library in use lets two ranks of a communicator share a
/// GPU: only the tests' stand-in (tests/nccl_standin), loaded in place of
/// libnccl, does; never the product's. Towers sharing a GPU (--gpus 0,0,0,0)
/// then reduce through NCCL as towers on distinct GPUs do.
bool nccl_allows_shared_gpus();

/// NCCL communicator over devices (rank i = devices[i]; each CUDA, with its
/// context, on a distinct GPU ordinal unless nccl_allows_shared_gpus()). timeout_seconds > 0: how long a queued
/// collective may take before it counts as stuck. Throws InternalError when a
/// device is not a GPU, when two share an ordinal, when the build has no CUDA,
/// or when NCCL cannot create the communicator (with NCCL's error string).
std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices, double timeout_seconds);

/// The NCCL communicator's place in a run of several processes: its ranks are
/// world ranks first_rank .. first_rank + devices.size() - 1 of `ranks` in all,
/// and process 0 makes NCCL's unique id and broadcasts it over group.
struct NcclWorld {
  ProcessGroup* group = nullptr;
  int first_rank = 0;
  int ranks = 0;
};

/// As above, one NCCL communicator over every GPU tower of world's processes
/// (each process passes its own towers; rank i of this process is world rank
/// world.first_rank + i). Broadcast roots are world ranks. Also throws
/// InternalError when NCCL cannot create it, e.g. when two processes' towers
/// share a GPU.
std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<Device>& devices, double timeout_seconds,
                                                     const NcclWorld& world);

}  // namespace trainer
