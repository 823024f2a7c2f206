#!/usr/bin/env bash
# Runs one fuzz harness for a number of seconds from its seed corpus and
# prints what it did (tests/fuzz/README.md):
#   bash tests/fuzz/run.sh <config|checkpoint|image_pair> <seconds> [build folder, default build-fuzz]
# 0 seconds runs the seeds (and past findings kept with them) once each, without fuzzing.
# The inputs it finds go to a work folder ($FUZZ_WORK/<harness>, else a new
# one under /tmp), apart from the seeds: findings (crashes, leaks, timeouts, inputs
# past the memory limit) to <work>/findings, its log to <work>/log.txt.
# Exits 1 when anything was found.
set -euo pipefail
name=$1 seconds=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${3:-$root/build-fuzz}
harness=$build/tests/fuzz/fuzz_$name
[ -x "$harness" ] || { echo "error: no harness $harness; build it first (tests/fuzz/README.md)" >&2; exit 2; }
work=${FUZZ_WORK:+$FUZZ_WORK/$name}
work=${work:-$(mktemp -d "/tmp/trainer-fuzz-$name.XXXXXX")}
mkdir -p "$work/corpus" "$work/findings"
seeds=("$root/tests/fuzz/corpus/$name")
[ "$name" = config ] && seeds+=("$root/configs")
export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# An allocation that cannot be made returns null, as glibc's malloc does (C++'s new then throws bad_alloc, a
# finding here); memory is bounded by what the process holds (-rss_limit_mb, 2 GiB), not by what it asks for
# (-malloc_limit_mb, any size: an address range never touched costs nothing). -timeout: an input taking 10 s
# is a hang; 30 s for a checkpoint, whose reading process is stopped at 10 s of processor time (docs/checkpoint.md).
export ASAN_OPTIONS="allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
status=0
start=$SECONDS
limit=(-max_total_time="$seconds")
[ "$seconds" -eq 0 ] && limit=(-runs=0)
timeout=10
[ "$name" = checkpoint ] && timeout=30
"$harness" "$work/corpus" "${seeds[@]}" "${limit[@]}" -timeout="$timeout" -rss_limit_mb=2048 -malloc_limit_mb=1048576 \
  -artifact_prefix="$work/findings/" -print_final_stats=1 > "$work/log.txt" 2>&1 || status=$?
elapsed=$((SECONDS - start))
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt" | tail -n 1)
seed_count=$(find "${seeds[@]}" -type f | wc -l)
corpus=$(find "$work/corpus" -type f | wc -l)
findings=$(find "$work/findings" -type f | wc -l)
echo "fuzz_$name: ${runs:-0} inputs run in ${elapsed} s from ${seed_count} seeds; corpus now ${corpus} inputs" \
     "beyond the seeds; ${findings} finding(s) (work folder $work)"
if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
  echo "error: fuzz_$name found a problem (exit $status); the end of its log:" >&2
  tail -n 40 "$work/log.txt" >&2
  exit 1
fi
