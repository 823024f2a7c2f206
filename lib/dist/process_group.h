#pragma once
// ProcessGroup: the processes of one run started together by an MPI launcher
// (`mpirun -np 16 -H node1:8,node2:8 trainer ...`, or `srun --mpi=pmix` under
// Slurm), each driving its own towers; docs/multi_node.md. The launcher and
// Open MPI do the rendezvous and the transport: this is a thin face over MPI's
// collectives, used between the towers' own reductions (dist/world_communicator.h),
// to share NCCL's unique id, and for the run's decisions (a stop request).
//
// Every process calls the collectives in the same order with the same sizes.
// A collective that fails, or has not completed within the group's timeout
// (another process died or hangs), throws InternalError naming this process's
// rank and host; the process then ends without MPI_Finalize, and the launcher
// ends the others (Open MPI aborts a job whose process exits without it).
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace trainer {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  /// This process's world rank in [0, size()), and the number of processes.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// This process's rank among the processes on its host, and their number
  /// (MPI_COMM_TYPE_SHARED): `--gpus local` takes GPU local_rank().
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  /// This host's name (MPI_Get_processor_name).
  virtual const std::string& host() const = 0;
  /// In place, data[i] <- the sum over processes of data[i]; n elements.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  virtual void all_reduce_sum(double* data, size_t n) = 0;
  /// In place, data[i] <- the largest data[i] of any process.
  virtual void all_reduce_max(double* data, size_t n) = 0;
  /// root's `bytes` bytes at data to every process's data.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  /// Every process's text, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& text) = 0;
  /// After a collective of another transport (NCCL) timed out: the processes
  /// that do not answer this one within a grace period, e.g. "rank 1 (host b)
  /// did not answer within 10 s: hung, died, or busy outside MPI"; "" where
  /// the group cannot tell. The group takes no collective afterwards. Safe
  /// to call from several threads (each gets the first call's text).
  virtual std::string unanswered() { return ""; }
};

/// The process group of a launch of one process (mpirun -np 1), without MPI:
/// every collective is the identity, as MPI's are over one process. Lets a
/// plain process take the paths of a launched run (NCCL over a world of one:
/// bench/unet_throughput --nccl-alone, tests).
class LoneProcessGroup : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  const std::string& host() const override { return host_; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  void all_reduce_max(double*, size_t) override {}
  void broadcast(void*, size_t, int) override {}
  std::vector<std::string> all_gather(const std::string& text) override { return {text}; }

 private:
  std::string host_ = "here";
};

/// How errors and checks name a process of a run: "rank 1 (host node2)".
std::string process_name(int rank, const std::string& host);

/// Every process's text after its host and '\n' (gather), read back by rank.
struct Gathered {
  std::vector<std::string> all;
  std::string host(size_t r) const { return all[r].substr(0, all[r].find('\n')); }
  std::string text(size_t r) const { return all[r].substr(all[r].find('\n') + 1); }
  /// process_name of rank r: "rank 1 (host b)".
  std::string process(size_t r) const { return process_name(int(r), host(r)); }
};
/// Every process's text, with its host (a collective: ProcessGroup::all_gather).
Gathered gather(ProcessGroup& world, const std::string& text);

/// Raises the UserError `message` that every process of world raises at the
/// same point with the same text, as one found from values they all reduced
/// (a loss that became NaN). World rank 0 prints it once for the run ("error:
/// <message>", print_run_errors), no process ends before it has printed
/// (mpirun ends the job when the first process exits), and each then throws
/// ReportedUserError, which main prints no more. Without a world of several
/// (nullptr, or one process): throws UserError(message).
[[noreturn]] void throw_alike(ProcessGroup* world, const std::string& message);

/// Runs check on every process of world at the same point: a collective, for
/// a check whose outcome may differ between processes (a config or file of
/// their own). Returns when it passed everywhere. Else world rank 0 prints the
/// errors for the run: once, as throw_alike does, when every process raised
/// the same UserError; else each failed process's, after its rank and host.
/// Every process then throws ReportedUserError once rank 0 has printed.
/// Exceptions other than UserError pass through (the process ends, and the
/// launcher ends the others). check must not run collectives itself (one
/// process could throw before one that the others enter). Without a world of
/// several: check() alone.
void check_together(ProcessGroup* world, const std::function<void()>& check);

/// How this process was started: by an MPI launcher (mpirun, or srun) or not.
struct Launch {
  bool by_launcher = false;  ///< An MPI launcher's variables are set.
  int size = 1;              ///< The processes it says it started (1 when it does not say).
  int rank = 0;              ///< This process's rank among them, as the launcher says (0 when it does not).
  std::string source;        ///< The variable that said so, e.g. "OMPI_COMM_WORLD_SIZE=2".
};

/// Reads the launcher's environment: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE),
/// PMI (PMI_SIZE), PMIx (PMIX_RANK; the size from srun's SLURM_STEP_NUM_TASKS
/// when set), Slurm's srun (SLURM_STEP_NUM_TASKS > 1; sbatch's own shell, with
/// no job step, is a plain run). `env` looks a name up (getenv by default;
/// tests pass their own).
Launch detect_launch(const char* (*env)(const char*) = nullptr);

/// The run's process group when this process was started by an MPI launcher,
/// else nullptr (a plain launch: one process, nothing changes). timeout_s > 0
/// bounds each collective. Throws UserError when a launcher started several
/// processes but this build has no MPI (the message says how to build it), and
/// when srun started several tasks that MPI sees as worlds of one (srun
/// without --mpi=pmix), which would each train alone into the same folder.
std::unique_ptr<ProcessGroup> join_world(double timeout_s);

/// Whether this build has MPI (configured with Open MPI found, TRAINER_MPI).
bool mpi_built();

}  // namespace trainer
