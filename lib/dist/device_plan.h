#pragma once
// Which devices the towers run on, from the --gpus flag:
//   all      every visible GPU, one tower each; without one, one CPU tower
//            (with a warning). Under an MPI launch with several processes on
//            a host that see the same GPUs, the host's GPUs split among them
//            in contiguous blocks
//   local    the GPU whose index is this process's rank among its host's
//            processes (an MPI launch: one process per GPU); GPU 0 alone;
//            without a GPU (or CUDA) an error, not the CPU
// Where the launcher binds GPUs to processes, so that the processes of a host
// see disjoint sets (srun --gpus-per-task=2, a CUDA_VISIBLE_DEVICES per rank),
// `all` and `local` both take every GPU the process sees.
//   0,2,5    one tower on each of those GPUs; `--gpus 2` is the GPU with index
//            2, not two GPUs: indices (CUDA ordinals), as Caffe and Darknet
//            read them, not a count as Keras's multi_gpu_model(gpus=8) was
//   0,0      repeats are allowed: two towers share GPU 0 (each with its own
//            streams and memory); such towers reduce through the in-process
//            communicator, since NCCL needs one rank per GPU
//   cpu      one CPU tower;  cpu:N  N CPU towers (exercises the multi-tower
//            engine without GPUs; N in [1, 64])
// "Visible" is what the CUDA runtime enumerates: CUDA_VISIBLE_DEVICES=2,3
// makes physical GPUs 2 and 3 the indices 0 and 1.
#include <string>
#include <vector>

#include "backend/gpu_info.h"
#include "dist/process_group.h"

namespace trainer {

/// This process's place among the processes of its host (an MPI launch; a
/// process alone is rank 0 of 1).
struct HostProcesses {
  int rank = 0;  ///< ProcessGroup::local_rank
  int size = 1;  ///< ProcessGroup::local_size
  /// The host has several processes and each sees GPUs (by UUID) that no
  /// other process of the host sees: the launcher bound GPUs to processes.
  bool own_gpus = false;
};

/// How the processes of this host see the GPUs, from every process's visible
/// GPUs (gpus: this process's, list_gpus()). A collective over world that
/// every process calls at the same point (ProcessGroup::all_gather); nullptr:
/// a process alone. Throws what the group's collectives throw.
HostProcesses host_processes(ProcessGroup* world, const std::vector<GpuInfo>& gpus);

struct DevicePlan {
  int cpu_towers = 0;            ///< Number of CPU towers (0 when GPUs are used).
  std::vector<int> gpus;         ///< GPU ordinals, one tower each (repeats allowed).
  std::vector<std::string> gpu_ids;  ///< gpus' GpuInfo::uuid, in the same order.
  std::vector<std::string> warnings;
  int towers() const { return cpu_towers + int(gpus.size()); }
  /// True when no GPU appears twice in gpus, so that the towers can reduce
  /// through NCCL (one rank per GPU); vacuously true for CPU plans.
  bool gpus_distinct() const;
  /// "2 CPU towers" or "GPUs 0, 1".
  std::string describe() const;
};

/// Resolves spec against the visible gpus (list_gpus()) for the process
/// `host` describes (host_processes; the default: a process alone). cuda_training:
/// whether this build can train on GPUs (true when built with CUDA); when it
/// cannot, `all` falls back to the CPU with a warning and explicit GPU indices
/// are a UserError. Throws UserError for bad syntax and for GPU indices that
/// do not exist (listing the GPUs found: index, name, memory in GiB, or saying
/// that none was found), and when `local` finds no GPU or, on a host whose
/// processes share their GPUs, `local` or `all` too few for its processes.
DevicePlan plan_devices(const std::string& spec, const std::vector<GpuInfo>& gpus, bool cuda_training,
                        const HostProcesses& host = {});

}  // namespace trainer
