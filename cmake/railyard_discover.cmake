# Run by ctest, not by cmake: lists one test binary's gtest cases and registers each as its
# own ctest test (see railyard_test in railyard.cmake, which generates the caller).
#
# Why not GoogleTest.cmake's gtest_discover_tests: it gives every case the property
# SKIP_REGULAR_EXPRESSION "[  SKIPPED ]", and ctest lets that regex win over the exit code, so
# a failing case whose output contains the text (a child process's log, a quoted message) is
# reported as skipped. Here a skip is only ever the exit code of tests/gtest_main.cc.

# Writes `tests_file`: add_test() for every case `exe --gtest_list_tests` names, and
# set(railyard_discovered <names>). Kept while it is newer than the binary. When the binary
# cannot list its tests, registers one failing test `<prefix>LIST_FAILED` that shows why,
# instead of silently registering nothing.
function(railyard_discover_gtests exe tests_file prefix filter workdir)
  if(EXISTS "${tests_file}" AND "${tests_file}" IS_NEWER_THAN "${exe}")
    return()
  endif()
  set(filter_arg "")
  if(filter)
    set(filter_arg "--gtest_filter=${filter}")
  endif()
  execute_process(COMMAND "${exe}" --gtest_list_tests ${filter_arg}
                  WORKING_DIRECTORY "${workdir}" TIMEOUT 120
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    file(REMOVE "${tests_file}")
    add_test("${prefix}LIST_FAILED" "${exe}" --gtest_list_tests ${filter_arg})
    return()
  endif()
  string(REPLACE "\n" ";" lines "${out}")
  set(suite "")
  set(names "")
  set(script "")
  foreach(line IN LISTS lines)
    # "  Case/1  # GetParam() = 9" -> "  Case/1"; "Suite/0.  # TypeParam = int" -> "Suite/0."
    string(REGEX REPLACE " *#.*$" "" line "${line}")
    if(line MATCHES "^  +([A-Za-z0-9_/]+)$")
      set(case "${suite}${CMAKE_MATCH_1}")
      set(name "${prefix}${case}")
      string(APPEND script "add_test([==[${name}]==] [==[${exe}]==] [==[--gtest_filter=${case}]==])\n")
      if(case MATCHES "(^|[./])DISABLED_")
        string(APPEND script "set_tests_properties([==[${name}]==] PROPERTIES DISABLED TRUE)\n")
      endif()
      list(APPEND names "${name}")
    elseif(line MATCHES "^([A-Za-z0-9_/]+\\.)$")
      set(suite "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  string(APPEND script "set(railyard_discovered [==[${names}]==])\n")
  file(WRITE "${tests_file}" "${script}")
endfunction()
