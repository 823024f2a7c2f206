#!/usr/bin/env bash
# CI's second build: the library, trainer and unit tests built by clang with
# AddressSanitizer and UndefinedBehaviorSanitizer on the CPU backend
# (build-san; cmake/sanitize.cmake), all the unit tests run there (about
# 5 minutes on 2 cores), then the config and image/mask fuzz harnesses for
# FUZZ_SECONDS (default 60) each from their seeds, and the checkpoint
# harness on its seeds alone (tests/fuzz/README.md). Any finding fails it.
#   bash scripts/sanitizers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# GNU OpenMP, as gcc's build and Debian's oneDNN use (clang's own runtime would be a second one in the process).
gomp=$(gcc -print-file-name=libgomp.so)
CC=clang CXX=clang++ cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=OFF -DTRAINER_MPI=OFF \
  -DTRAINER_SANITIZE=ON -DTRAINER_FUZZ=ON -DOpenMP_C_FLAGS=-fopenmp=libgomp -DOpenMP_CXX_FLAGS=-fopenmp=libgomp \
  -DOpenMP_C_LIB_NAMES=gomp -DOpenMP_CXX_LIB_NAMES=gomp -DOpenMP_gomp_LIBRARY="$gomp"
cmake --build build-san -j "$(nproc)"
# A leak, a memory error or undefined behaviour ends the process with an error (the test then fails); the
# suppressions name leaks of the libraries underneath.
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-san --output-on-failure -j "$(nproc)"
for harness in config image_pair; do
  bash tests/fuzz/run.sh "$harness" "${FUZZ_SECONDS:-60}" build-san
done
# The checkpoint reader's seeds and past findings only: mutated HDF5 files still reach memory errors inside
# libhdf5 1.10 itself (tests/fuzz/README.md, "Known findings"), which a minute of fuzzing finds.
bash tests/fuzz/run.sh checkpoint 0 build-san
