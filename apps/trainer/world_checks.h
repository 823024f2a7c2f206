#pragma once
// What every process of a run of several (an MPI launch) must share before
// it trains: its build, the settings of its config and flags, and the bytes
// of the checkpoints it reads (docs/multi_node.md). Each check is a
// collective: every process calls it at the same point; a difference is
// refused on every process, printed once by rank 0 (throw_alike), naming the
// first process that differs from rank 0 and its host.
#include <string>

#include "config/config.h"
#include "dist/process_group.h"

namespace trainer::cli {

/// Every process must run a build of the same sources (the version and the
/// sources hash of build_id; the commit may differ): else refused, naming the
/// first process whose build differs from rank 0's, its host and both builds.
/// Other builds may run other collectives, and wait for each other forever.
/// Then every process must run the same command (command: "trainer" for
/// training, "trainer summary"; "" for a process that could not read its
/// command line, which is not compared): else refused, naming both.
void require_same_build(ProcessGroup& world, const std::string& command);

/// Every process's shared_settings must be the same: else a UserError naming
/// the first setting that differs between rank 0 and the first process that
/// differs, e.g. "training.epochs is 3 on rank 1 (host b), 1 on rank 0 (host
/// a)". Settings that differed would make the processes train differently or
/// wait for each other forever.
void require_same_settings(ProcessGroup& world, const Config& config, bool resumes);

/// Every process must read the same bytes at its path (a checkpoint that
/// `what` names, e.g. "--resume", which each has read already): else a
/// UserError naming the first process whose file differs from rank 0's, its
/// host and both paths. Compares the size and an FNV-1a hash of the contents.
void require_same_file(ProcessGroup& world, const std::string& path, const std::string& what);

}  // namespace trainer::cli
