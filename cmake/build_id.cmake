# Run at every build (cmake -P, from the trainer_build_id target): writes OUT,
# the definition of trainer::build_id() (lib/core/build_id.h), e.g.
# "0.1.0 (git 1a2b3c4d5e6f, sources 9f8e7d6c5b4a)":
# - VERSION, the project's version;
# - the git commit SOURCE_DIR is checked out at, with ", modified" when its
#   tracked files differ from it; left out when SOURCE_DIR is not the top of a
#   git checkout that GIT (the git program; empty: none) can read (an exported
#   copy, or a checkout git refuses to read as another user's);
# - the first 12 hex digits of a SHA-256 over the sources compiled into
#   trainer (CMakeLists.txt, cmake/, apps/, lib/: each file's path and
#   contents), which tells apart builds that the commit does not: other local
#   changes, new files git does not track, no git at all.
# OUT is rewritten only when its text changes, so a build of the same sources
# recompiles nothing.
set(commit "")
if(GIT)
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --show-toplevel HEAD
                  OUTPUT_VARIABLE lines RESULT_VARIABLE failed OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT failed)
    string(REPLACE "\n" ";" lines "${lines}")
    list(GET lines 0 top)
    list(GET lines 1 head)
    file(REAL_PATH "${SOURCE_DIR}" source)
    file(REAL_PATH "${top}" top)
    if(top STREQUAL source)  # not a copy inside another project's checkout
      execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                      OUTPUT_VARIABLE changes RESULT_VARIABLE failed ERROR_QUIET)
      if(NOT failed)
        string(SUBSTRING "${head}" 0 12 commit)
        if(NOT changes STREQUAL "")
          string(APPEND commit ", modified")
        endif()
      endif()
    endif()
  endif()
endif()

file(GLOB_RECURSE sources RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/apps/*" "${SOURCE_DIR}/lib/*"
     "${SOURCE_DIR}/cmake/*")
list(APPEND sources CMakeLists.txt)
list(SORT sources)
set(digests "")
foreach(f IN LISTS sources)
  file(SHA256 "${SOURCE_DIR}/${f}" digest)
  string(APPEND digests "${f} ${digest}\n")
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
