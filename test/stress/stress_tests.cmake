# stress_tests.cmake -- randomized shadow-model tests, thread tests and the
# release-listener proof.  Included by test/CMakeLists.txt.
#
#   test_random    long randomized sequences vs. a shadow model (global heap,
#                  growing mspace, fixed-region mspace)
#   test_threads   concurrent churn and cross-thread frees (global, locked mspaces)
#   test_release   the release listener, in process
#   release_trace  the same proof at kernel level: release_trace runs under
#                  strace and release_trace_check.py matches every
#                  munmap/madvise/mremap-shrink with its listener marker
#
# Knobs (environment): PINHEAP_TEST_SEED (number or "random"),
# PINHEAP_TEST_SCALE (step/time multiplier).

pinheap_add_criterion_test(test_random test_random.c)
pinheap_add_criterion_test(test_threads test_threads.c)
pinheap_add_criterion_test(test_release test_release.c)
set_tests_properties(test_random test_threads PROPERTIES LABELS "stress")

# ---- kernel-level proof under strace -------------------------------------------
add_executable(release_trace release_trace.c)
target_link_libraries(release_trace PRIVATE pinheap)
target_compile_definitions(release_trace PRIVATE _GNU_SOURCE)
target_include_directories(release_trace PRIVATE ${PROJECT_SOURCE_DIR}/allocator
  ${PROJECT_SOURCE_DIR}/test)

find_package(Python3 COMPONENTS Interpreter)
find_program(PINHEAP_STRACE strace)
if(NOT PINHEAP_STRACE)
  set(PINHEAP_STRACE strace)   # looked up again on PATH when the test runs
endif()
set(_release_check ${CMAKE_CURRENT_SOURCE_DIR}/release_trace_check.py)

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

# Fork safety: children forked while threads churn allocate at once.
pinheap_add_criterion_test(test_fork test_fork.c)
set_tests_properties(test_fork PROPERTIES LABELS stress)

# Arenas, their caps, and thread-exit returns.
pinheap_add_criterion_test(test_arenas test_arenas.c)
