# Adding a mixer, proved (docs/ARCHITECTURE.md, "Adding a mixer"): the steps the document gives,
# applied to copies in the build tree, with tests/c/add_mixer/mixer_dummy.c as the new file (it
# declares an option of its own, dummy_gain, which nothing else names):
#   src/nn/mixers.c             the descriptor's name in the extern line and in registry[]
#   tests/c/test_mixers.c       its row in variants[]
#   tests/lua/test_mixers.lua   its row in nope
# The copies and the new file build a test binary and a mechlab with one more mixer; the mixer
# tests pass there with nothing else changed; without its row, the Lua test fails naming the row.
# Included from CMakeLists.txt; a pattern that no longer matches fails c.test_add_mixer.
set(ADD_MIXER_DIR ${CMAKE_BINARY_DIR}/add_mixer)
set(ADD_MIXER_FILE ${CMAKE_SOURCE_DIR}/tests/c/add_mixer/mixer_dummy.c)

# Writes SRC with PATTERN replaced by REPLACEMENT to DST; OK_VAR is false when nothing matched.
function(add_mixer_edit SRC DST PATTERN REPLACEMENT OK_VAR)
  file(READ ${SRC} text)
  string(REGEX REPLACE "${PATTERN}" "${REPLACEMENT}" edited "${text}")
  file(WRITE ${DST} "${edited}")
  if(edited STREQUAL text)
    set(${OK_VAR} FALSE PARENT_SCOPE)
  else()
    set(${OK_VAR} TRUE PARENT_SCOPE)
  endif()
endfunction()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS src/nn/mixers.c tests/c/test_mixers.c
             tests/lua/test_mixers.lua)

# 1. the registry: the extern declaration and the entry at the end of registry[]
add_mixer_edit(src/nn/mixers.c ${ADD_MIXER_DIR}/mixers.c "\n(static const ml_mixer_type \\*const registry\\[\\] = {[^}]*)}"
               "\nextern const ml_mixer_type ml_mixer_dummy;\n\\1, &ml_mixer_dummy}" registry_ok)
# 2. the rows: attention's parameter counts (the dummy is attention's maths)
add_mixer_edit(tests/c/test_mixers.c ${ADD_MIXER_DIR}/test_mixers.c "(static const variant variants\\[\\] = {)"
               "\\1\n    {\"dummy\", \"dummy\", -1, false, false, 689792, 624256}," variants_ok)
add_mixer_edit(tests/lua/test_mixers.lua ${ADD_MIXER_DIR}/test_mixers.lua "(local nope = {)" "\\1 dummy = 624256,"
               nope_ok)

if(registry_ok AND variants_ok AND nope_ok)
  # the C mixer tests with the dummy: the registry-wide checks over every mixer, the per-architecture
  # ones (gradients, recurrent = parallel, hooks, learning) over the dummy (c.test_mixers has the rest)
  add_executable(test_add_mixer ${ADD_MIXER_DIR}/test_mixers.c ${ADD_MIXER_DIR}/mixers.c ${ADD_MIXER_FILE}
                 tests/c/testutil.c)
  target_link_libraries(test_add_mixer PRIVATE mechcore PkgConfig::CHECK)
  target_include_directories(test_add_mixer PRIVATE tests/c)
  target_compile_definitions(test_add_mixer PRIVATE ML_FIXTURES_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures")
  add_test(NAME c.test_add_mixer COMMAND test_add_mixer)
  set_tests_properties(c.test_add_mixer PROPERTIES TIMEOUT 300
                       ENVIRONMENT "${C_TEST_ENV};MECHLAB_TEST_MIXER=dummy")
  # mechlab with the dummy: mech.architectures lists it, and the Lua mixer tests run over it
  add_executable(mechlab_add_mixer ${MECHLAB_HOST_SOURCES} ${ADD_MIXER_DIR}/mixers.c ${ADD_MIXER_FILE})
  target_link_libraries(mechlab_add_mixer PRIVATE ${MECHLAB_HOST_LIBS})
  add_test(NAME lua.test_add_mixer COMMAND mechlab_add_mixer ${ADD_MIXER_DIR}/test_mixers.lua
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  add_test(NAME lua.test_add_mixer_no_row COMMAND mechlab_add_mixer tests/lua/test_mixers.lua
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  # its option of its own, declared in mixer_dummy.c only, reaches keys, config, forward and checkpoints
  add_test(NAME lua.test_add_mixer_option COMMAND mechlab_add_mixer tests/c/add_mixer/test_dummy_option.lua
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(lua.test_add_mixer lua.test_add_mixer_option PROPERTIES ENVIRONMENT "${LUA_TEST_ENV}")
  set_tests_properties(lua.test_add_mixer_no_row PROPERTIES ENVIRONMENT "${LUA_TEST_ENV}"
                       PASS_REGULAR_EXPRESSION "mixer 'dummy' has no row in nope")
else()
  add_test(NAME c.test_add_mixer COMMAND ${CMAKE_COMMAND} -E echo
           "tests/c/add_mixer/add_mixer.cmake: the registry or a test table no longer reads as docs/ARCHITECTURE.md says (registry ${registry_ok}, variants ${variants_ok}, nope ${nope_ok})")
  set_tests_properties(c.test_add_mixer PROPERTIES WILL_FAIL TRUE)
endif()
