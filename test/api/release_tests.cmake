# release_tests.cmake -- the release listener's contract: the allocator
# announces every range before it unmaps, decommits or shrinks it.
#
#   test_release   the release listener, in process (a recording listener)
#   release_trace  the same proof at kernel level: release_trace runs under
#                  strace and release_trace_check.py matches every
#                  munmap/madvise/mremap-shrink with its listener marker

pinheap_add_criterion_test(test_release ${CMAKE_CURRENT_LIST_DIR}/test_release.c)

# ---- kernel-level proof under strace -------------------------------------------
add_executable(release_trace ${CMAKE_CURRENT_LIST_DIR}/release_trace.c)
target_link_libraries(release_trace PRIVATE pinheap)
target_compile_definitions(release_trace PRIVATE _GNU_SOURCE)
target_include_directories(release_trace PRIVATE ${PROJECT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/test/lib)

find_package(Python3 COMPONENTS Interpreter)
find_program(PINHEAP_STRACE strace)
if(NOT PINHEAP_STRACE)
  set(PINHEAP_STRACE strace)   # looked up again on PATH when the test runs
endif()
set(_release_check ${CMAKE_CURRENT_LIST_DIR}/release_trace_check.py)

if(Python3_Interpreter_FOUND)
  # The checker rejects hand-made bad traces (so it is able to fail).
  add_test(NAME release_trace_checker_selftest
    COMMAND ${Python3_EXECUTABLE} ${_release_check} --selftest)
  # The real proof.  A missing strace fails here with a message saying so.
  add_test(NAME release_trace
    COMMAND ${Python3_EXECUTABLE} ${_release_check}
      --strace "${PINHEAP_STRACE}"
      --program $<TARGET_FILE:release_trace>
      --trace-out ${CMAKE_CURRENT_BINARY_DIR}/release_trace.strace
      --min munmap=100 --min madvise=20 --min mremap=10)
  # End to end: a raw munmap that nobody announced must be caught.
  add_test(NAME release_trace_catches_unannounced
    COMMAND ${Python3_EXECUTABLE} ${_release_check}
      --strace "${PINHEAP_STRACE}"
      --program $<TARGET_FILE:release_trace>
      --trace-out ${CMAKE_CURRENT_BINARY_DIR}/release_trace_bad.strace
      --program-arg=--inject-unannounced
      --expect-violation unannounced)
  set_tests_properties(release_trace release_trace_catches_unannounced
    PROPERTIES TIMEOUT 300)
else()
  add_test(NAME release_trace
    COMMAND ${CMAKE_COMMAND} -E echo
      "pinheap: the release_trace test needs python3 (not found at configure time); install python3 and reconfigure")
  set_tests_properties(release_trace PROPERTIES WILL_FAIL TRUE)
endif()
