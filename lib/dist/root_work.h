#pragma once
// Work that world rank 0 alone does (writing a checkpoint) while the others
// wait for it, without that time counting against the collective timeout.
#include <functional>

#include "dist/process_group.h"

namespace trainer {

/// Runs work on world rank 0 alone, on a thread of its own, while every
/// process of world takes part in a one-value all-reduce about once a second
/// (kRootHeartbeatSeconds) until work ends on rank 0. Each of these is
/// bounded by the group's timeout (training.collective_timeout), so a process
/// that hangs or dies still ends the run in that time, while rank 0's disk
/// may take as long as it takes: a checkpoint of hundreds of MB on a slow
/// file system no longer makes the others end the run as if rank 0 hung.
/// Then a UserError of work is raised on every process alike, printed once
/// (check_together); other exceptions of work pass through on rank 0. Without
/// a world of several: work() alone.
void run_on_root(ProcessGroup* world, const std::function<void()>& work);

/// Seconds between run_on_root's all-reduces, at most.
inline constexpr double kRootHeartbeatSeconds = 1.0;

}  // namespace trainer
