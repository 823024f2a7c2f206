# Run at every build (cmake -P, from the trainer_build_id target): writes OUT,
# the definition of trainer::build_id() (lib/core/build_id.h), e.g.
# "0.1.0 (git 1a2b3c4d5e6f; sources 9f8e7d6c5b4a)":
# - VERSION, the project's version;
# - the git commit SOURCE_DIR is checked out at (", modified" when its tracked
#   files differ from it); left out when SOURCE_DIR is not the top of a git
#   checkout that GIT, the git program, can read (an exported copy, or a
#   checkout git refuses as another user's);
# - the sources hash: the first 12 hex digits of a SHA-256 over the files the
#   build compiles or reads (CMakeLists.txt, lib/CMakeLists.txt, which holds
#   the libraries' compile flags, cmake/*.cmake, and the .cpp, .h,
#   .inc (the backend's op lists), .cu, .cuh and .proto files under apps/ and lib/, hidden ones aside, as the build
#   leaves them out: editors' lock and swap files), each file's path and
#   contents. It tells apart builds that the commit does not (local changes,
#   new files git does not track, no git), and is the same for the same
#   sources in any folder, with or without git.
# OUT is rewritten only when its text changes, so a build of the same sources
# recompiles nothing.
cmake_minimum_required(VERSION 3.20)  # its policies: GLOB_RECURSE follows no directory symlink (CMP0009)

set(commit "")
if(GIT)
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  OUTPUT_VARIABLE top RESULT_VARIABLE failed OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT failed)
    file(REAL_PATH "${SOURCE_DIR}" source)
    file(REAL_PATH "${top}" top)
    if(top STREQUAL source)  # not a copy inside another project's checkout
      execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse HEAD
                      OUTPUT_VARIABLE head RESULT_VARIABLE failed OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      execute_process(COMMAND "${GIT}" --no-optional-locks -C "${SOURCE_DIR}" status --porcelain
                              --untracked-files=no
                      OUTPUT_VARIABLE changes RESULT_VARIABLE status_failed ERROR_QUIET)
      if(NOT failed AND NOT status_failed)
        string(SUBSTRING "${head}" 0 12 commit)
        if(NOT changes STREQUAL "")
          string(APPEND commit ", modified")
        endif()
      endif()
    endif()
  endif()
endif()

file(GLOB_RECURSE sources LIST_DIRECTORIES false RELATIVE "${SOURCE_DIR}"
     "${SOURCE_DIR}/apps/*.cpp" "${SOURCE_DIR}/apps/*.h" "${SOURCE_DIR}/lib/*.cpp" "${SOURCE_DIR}/lib/*.h"
     "${SOURCE_DIR}/lib/*.inc" "${SOURCE_DIR}/lib/*.cu" "${SOURCE_DIR}/lib/*.cuh" "${SOURCE_DIR}/lib/*.proto"
     "${SOURCE_DIR}/cmake/*.cmake" "${SOURCE_DIR}/lib/CMakeLists.txt")
list(APPEND sources CMakeLists.txt)
list(FILTER sources EXCLUDE REGEX "(^|/)\\.")  # hidden files: an editor's .#name lock or .name.swp
list(SORT sources)
set(digests "")
foreach(f IN LISTS sources)
  if(EXISTS "${SOURCE_DIR}/${f}")  # not a dangling link
    file(SHA256 "${SOURCE_DIR}/${f}" digest)
    string(APPEND digests "${f} ${digest}\n")
  endif()
endforeach()
string(SHA256 all "${digests}")
string(SUBSTRING "${all}" 0 12 all)

if(commit STREQUAL "")
  set(id "${VERSION} (sources ${all})")
else()
  set(id "${VERSION} (git ${commit}; sources ${all})")
endif()
set(text "// Written by cmake/build_id.cmake at build time.\n#include \"core/build_id.h\"\n\nnamespace trainer {\n\nconst char* build_id() { return \"${id}\"; }\n\n}  // namespace trainer\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
