# Run at every build (cmake -P, from the trainer_build_id target): writes OUT,
# the definition of trainer::build_id() (lib/core/build_id.h), from VERSION and
# the git commit of SOURCE_DIR: "0.1.0 (git 1a2b3c4d5e6f)", with ", modified"
# when tracked files differ from the commit, or "0.1.0 (no git)" outside a git
# checkout. OUT is rewritten only when its text changes, so a build at the same
# commit recompiles nothing.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit RESULT_VARIABLE failed OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(failed OR commit STREQUAL "")
  set(id "${VERSION} (no git)")
else()
  execute_process(COMMAND git -C "${SOURCE_DIR}" status --porcelain --untracked-files=no
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes STREQUAL "")
    set(id "${VERSION} (git ${commit})")
  else()
    set(id "${VERSION} (git ${commit}, modified)")
  endif()
endif()
set(text "// Written by cmake/build_id.cmake at build time.\n#include \"core/build_id.h\"\n\nnamespace trainer {\n\nconst char* build_id() { return \"${id}\"; }\n\n}  // namespace trainer\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
