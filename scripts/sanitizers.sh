#!/usr/bin/env bash
# CI's second build: the library, trainer and unit tests built by clang with
# AddressSanitizer and UndefinedBehaviorSanitizer on the CPU backend
# (build-san; cmake/sanitize.cmake), all the unit tests run there (about
# 5 minutes on 2 cores), then the config, checkpoint and image/mask fuzz
# harnesses for FUZZ_SECONDS (default 60) each from their seeds
# (tests/fuzz/README.md). Any finding fails it.
#   bash scripts/sanitizers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# libomp-dev: clang's OpenMP runtime and its omp.h (a second runtime beside oneDNN's GNU one, in this build only).
bash scripts/apt_install.sh clang libclang-rt-dev libomp-dev
# Debug: asserts on (no NDEBUG); cmake/sanitize.cmake adds -O1.
CC=clang CXX=clang++ cmake -S . -B build-san -DCMAKE_BUILD_TYPE=Debug -DTRAINER_CUDA=OFF -DTRAINER_MPI=OFF \
  -DTRAINER_SANITIZE=ON -DTRAINER_FUZZ=ON
cmake --build build-san -j "$(nproc)"
# A leak, a memory error or undefined behaviour ends the process with an error (the test then fails); the
# suppressions name leaks of the libraries underneath.
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir build-san --output-on-failure -j "$(nproc)"
for harness in config checkpoint image_pair; do
  bash tests/fuzz/run.sh "$harness" "${FUZZ_SECONDS:-60}" build-san
done
