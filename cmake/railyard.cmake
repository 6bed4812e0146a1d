# Helpers shared by every module's CMakeLists.txt.
#
#   railyard_library(NAME SOURCES a.cc b.cc DEPS railyard_base fmt::fmt)
#     One static library per module, target name railyard_<NAME>, include root src/.
#   railyard_test(NAME SOURCES a_test.cc DEPS railyard_base [LABELS root])
#     One gtest executable registered with ctest (gtest_discover_tests would need the
#     binary at configure time under sanitizers; one ctest entry per executable is enough).

function(railyard_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(railyard_${name} STATIC ${ARG_SOURCES})
  target_include_directories(railyard_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(railyard_${name} PUBLIC ${ARG_DEPS})
endfunction()

function(railyard_test name)
  if(NOT RAILYARD_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # ASan/UBSan runs the same work 3-5x slower: the deadlines stay generous guards there too.
  if(RAILYARD_SANITIZE)
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 5")
  endif()
  # A test that cannot run here (no root, no namespaces) calls GTEST_SKIP with the reason;
  # ctest then reports it as skipped instead of passed.
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ARG_TIMEOUT}
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
