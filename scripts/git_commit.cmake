# Writes OUT, a C file naming the commit the build is made from, at every build (the custom target
# git_commit in CMakeLists.txt), and only when the commit changed, so nothing else recompiles:
# a commit read at configure time stayed in the binary through later checkouts and rebuilds, and
# run manifests named it.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                OUTPUT_VARIABLE git OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT git)
  set(git "unknown")
endif()
set(text "/* written by scripts/git_commit.cmake at build time */\nconst char mechlab_git[] = \"${git}\";\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
