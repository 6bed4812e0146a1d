# Helpers shared by every module's CMakeLists.txt.
#
#   railyard_library(NAME SOURCES a.cc b.cc DEPS railyard_base fmt::fmt)
#     One static library per module, target name railyard_<NAME>, include root src/.
#   railyard_test(NAME SOURCES a_test.cc DEPS railyard_base [TIMEOUT s] [LABELS l...]
#                 [SERIAL] [RESOURCE_LOCK r...] [LIST_FILTER gtest-filter])
#     One gtest executable; every test case in it is its own ctest test, named
#     NAME.Suite.Case, so that one skip marks one case and any failure fails (docs/testing.md).
#     TIMEOUT (default 120 s, times 5 under RAILYARD_SANITIZE) holds for each case. Labels:
#     "unit" and the module's name for tests beside the sources, "integration" for tests/,
#     plus LABELS. SERIAL: the cases of this binary share something fixed (a name, a port) and
#     run one at a time; RESOURCE_LOCK: named things shared with other binaries' cases.
#     LIST_FILTER: a gtest filter for the cases to register (e.g. to leave out a case that is
#     only ever run as another case's child process).

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
  cmake_parse_arguments(ARG "SERIAL" "TIMEOUT;LIST_FILTER" "SOURCES;DEPS;LABELS;RESOURCE_LOCK"
                        ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  # A test's own sources are compiled at -O1 in Release: they only drive the libraries, which
  # stay at -O3, and -O1 compiles them in about 30% less time than -O3 (the test objects are
  # close to half of a clean build; docs/testing.md).
  target_compile_options(${name} PRIVATE $<$<CONFIG:Release>:-O1>)
  # railyard_gtest_main (tests/gtest_main.cc) exits 77 for a skipped case.
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest railyard_gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  # ASan/UBSan runs the same work 3-5x slower: the deadlines stay generous guards there too.
  if(RAILYARD_SANITIZE)
    math(EXPR ARG_TIMEOUT "${ARG_TIMEOUT} * 5")
  endif()
  if(CMAKE_CURRENT_SOURCE_DIR MATCHES "/src/railyard/([a-z_]+)$")
    set(labels unit ${CMAKE_MATCH_1})
  else()
    set(labels integration)
  endif()
  list(APPEND labels ${ARG_LABELS})
  set(locks ${ARG_RESOURCE_LOCK})
  if(ARG_SERIAL)
    list(APPEND locks ${name})
  endif()
  set(properties "TIMEOUT ${ARG_TIMEOUT} LABELS [==[${labels}]==] SKIP_RETURN_CODE 77")
  if(locks)
    string(APPEND properties " RESOURCE_LOCK [==[${locks}]==]")
  endif()
  # The tests that hold the netns lock run one after another, mostly waiting on shaped links
  # rather than using the CPU: ctest starts them first (highest cost first), so that chain
  # overlaps the CPU-bound tests instead of running alone at the end of a clean run.
  if("netns" IN_LIST ARG_RESOURCE_LOCK)
    string(APPEND properties " COST 1000")
  endif()

  # The cases are listed when ctest runs (the binary need not exist at configure time, and
  # runs as built, sanitizers included): a cached list, redone when the binary changes.
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_tests.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_include.cmake")
  file(GENERATE OUTPUT "${include_file}" CONTENT
"set(exe [==[$<TARGET_FILE:${name}>]==])
if(EXISTS \"\${exe}\")
  include([==[${PROJECT_SOURCE_DIR}/cmake/railyard_discover.cmake]==])
  railyard_discover_gtests(\"\${exe}\" [==[${tests_file}]==] [==[${name}.]==]
                           [==[${ARG_LIST_FILTER}]==] [==[${CMAKE_CURRENT_BINARY_DIR}]==])
  set(railyard_discovered \"\")
  if(EXISTS [==[${tests_file}]==])
    include([==[${tests_file}]==])
  endif()
  if(railyard_discovered)
    set_tests_properties(\${railyard_discovered} PROPERTIES
                         WORKING_DIRECTORY [==[${CMAKE_CURRENT_BINARY_DIR}]==] ${properties})
  endif()
else()
  add_test(${name}_NOT_BUILT ${name}_NOT_BUILT)
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
