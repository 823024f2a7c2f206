#!/usr/bin/env bash
# Prepares the GPU check on the development machine (no GPU needed): builds
# trainer, unit_tests, unet_throughput and the tests' NCCL stand-in in a Release CUDA
# build (build-gpu/, for sm_90), packs them with the libraries they need and
# the PyTorch peer (../shared/bench/torch_unet.py) into .devbundle/ through
# ../shared/tools/device-bundle, and prints the device tool's `run` call that
# runs bench/gpu_check_device.sh on the GPU machine (under 6 minutes; see
# that script for the steps and what comes back in $OUT).
#   bash bench/gpu_check.sh            (JOBS=N to change make's -j2)
# The tree that travels is this checkout plus .devbundle/, capped at 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-2}
bundle_tool=../shared/tools/device-bundle
peer=../shared/bench/torch_unet.py
# The device tool sends the session's own checkout (not a worktree of it), and
# device-bundle writes .git/info/exclude, which a worktree (.git a file) lacks.
if [ ! -d .git ]; then
  echo "gpu_check: run this from the session's main checkout, not a git worktree" >&2
  exit 2
fi
for f in "$bundle_tool" "$peer"; do
  [ -f "$f" ] || { echo "gpu_check: $f not found (run from a checkout beside ../shared)" >&2; exit 2; }
done

cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=ON
make -C build-gpu -j"$jobs" trainer unit_tests unet_throughput nccl_standin

# Binaries as this CMake project places them (add_executable at the top level,
# in tests/ and in bench/).
binaries=(build-gpu/trainer build-gpu/tests/unit_tests build-gpu/bench/unet_throughput build-gpu/tests/libnccl_standin.so)
for b in "${binaries[@]}"; do
  [ -f "$b" ] || { echo "gpu_check: $b was not built" >&2; exit 1; }
done
# The bundle tool appends /.devbundle/ to .git/info/exclude, which a freshly
# laid checkout may lack.
mkdir -p .git/info && touch .git/info/exclude
"$bundle_tool" "${binaries[@]}" "$peer"
# unit_tests looks for data under the source path compiled into it: the
# device script links that path to the tree it runs in.
pwd > .devbundle/source_dir
# What the binaries were built from (their build id: commit and sources), for
# the device summary (a bundle older than the tree it travels with would test
# old code).
build-gpu/trainer --version > .devbundle/built_from

bash -n bench/gpu_check_device.sh
if [ ! -f configs/unet.yaml ] || [ ! -d data/sample/images ]; then
  echo "gpu_check: configs/unet.yaml or data/sample is missing" >&2
  exit 1
fi
size=$(du -sm .devbundle | cut -f1)
tree=$(git ls-files -co --exclude-standard -z | du -cm --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
echo
echo "gpu_check: .devbundle/ is ${size} MiB; the rest of the travelling tree about ${tree} MiB (cap: 64 MiB together)"
echo "gpu_check: run on the GPU machine with the device tool (from a session whose checkout is this tree):"
echo "  run(command=\"bash bench/gpu_check_device.sh\", carry=[\".devbundle\"], timeout_s=420)"
echo "  results: \$OUT/summary.txt (printed at the end), gpu_tests.txt, train_sample.txt, throughput.txt,"
echo "           smi_samples.csv, nvidia_smi.txt, all_logs.tar.gz"
