# The checks' builds (scripts/sanitizers.sh, tests/fuzz/README.md); both off by default.
#
# TRAINER_SANITIZE=ON: every target is compiled and linked with AddressSanitizer
# and UndefinedBehaviorSanitizer, at -O1 with frame pointers for their stack
# traces; an undefined operation ends the process (no recovery), as a memory
# error does. Meant for the CPU backend (TRAINER_CUDA=OFF): CUDA's runtime
# and nvcc's objects are not instrumented.
option(TRAINER_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
# TRAINER_FUZZ=ON (clang): every target is compiled with libFuzzer's coverage
# instrumentation, and the harnesses of tests/fuzz are built.
option(TRAINER_FUZZ "Build the libFuzzer harnesses of tests/fuzz (clang)" OFF)

if(TRAINER_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=address,undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-sanitize-recover=undefined>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-O1>
                      $<$<COMPILE_LANGUAGE:C,CXX>:-g>
                      # clang at -O1 says of each OpenMP simd loop that it was not vectorized.
                      $<$<CXX_COMPILER_ID:Clang>:-Wno-pass-failed>)
  add_link_options(-fsanitize=address,undefined)
endif()
if(TRAINER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TRAINER_FUZZ needs clang's libFuzzer: configure with CC=clang CXX=clang++ "
                        "(Debian: apt-get install clang libclang-rt-dev)")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>)
endif()
message(STATUS "trainer: sanitizers ${TRAINER_SANITIZE}, fuzz harnesses ${TRAINER_FUZZ}")
