#!/usr/bin/env bash
# Installs the build dependencies (Debian 12 packages) and builds trainer in
# ./build. The CUDA backend is built when the CUDA toolkit with cuDNN and NCCL
# is found (TRAINER_CUDA=AUTO); pass -DTRAINER_CUDA=OFF via CMAKE_ARGS to skip it.
# Runs of several processes (mpirun, srun) are built with Open MPI (TRAINER_MPI=AUTO).
#   bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# ocl-icd-opencl-dev: Debian's oneDNN CMake config (dnnl-config.cmake) calls
# find_package(OpenCL REQUIRED) for its OpenCL GPU runtime, while libdnnl-dev
# only recommends the OpenCL headers and loader; without them CMake fails.
# protobuf-compiler, libboost-dev: the TensorBoard callback's event files (protoc, Boost.CRC).
# nlohmann-json3-dev, libzip-dev: trainer import and export --format keras (Keras's JSON configs, .keras zips).
# libopenmpi-dev, openmpi-bin: runs of several processes under mpirun (TRAINER_MPI=AUTO; docs/multi_node.md).
packages=(build-essential cmake pkg-config libyaml-cpp-dev libcli11-dev libopencv-dev
          libspdlog-dev catch2 libdnnl-dev ocl-icd-opencl-dev libhdf5-dev libonnx-dev libprotobuf-dev
          protobuf-compiler libboost-dev libopenmpi-dev openmpi-bin
          nlohmann-json3-dev libzip-dev)
bash "$(dirname "$0")/apt_install.sh" "${packages[@]}"
export PATH="$PATH:/usr/local/cuda/bin"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build build -j "$(nproc)"
