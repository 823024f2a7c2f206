# Decides TRAINER_WITH_CUDA from TRAINER_CUDA (AUTO/ON/OFF) and, when on,
# enables CUDA; each folder of lib/ then compiles its cuda/ sources
# (lib/CMakeLists.txt).
set(TRAINER_WITH_CUDA OFF)
if(NOT TRAINER_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  find_package(CUDAToolkit QUIET)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND CUDNN_LIBRARY AND CUDNN_INCLUDE_DIR
     AND NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
    set(TRAINER_WITH_CUDA ON)
  elseif(TRAINER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TRAINER_CUDA=ON but the CUDA toolkit, cuDNN or NCCL was not found "
                        "(nvcc: '${CMAKE_CUDA_COMPILER}', cudnn: '${CUDNN_LIBRARY}', nccl: '${NCCL_LIBRARY}')")
  endif()
endif()
message(STATUS "trainer: CUDA backend ${TRAINER_WITH_CUDA}")

if(TRAINER_WITH_CUDA)
  # Before enable_language(CUDA), which would otherwise pick nvcc's default (sm_75).
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
endif()
