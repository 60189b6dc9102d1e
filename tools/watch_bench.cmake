# watch_bench.cmake -- what watches cost (issue 29's targets: a check in at
# most 5 instructions with no atomic read-modify-write; a release with a
# million watches that it does not meet within 1.2x of one with none):
# tools/events_bench/watch_bench.py runs watch_cost (callgrind, objdump,
# interleaved timed runs).  Plain builds only (timings mean nothing under a
# sanitizer).
if(PINHEAP_SANITIZER)
  return()
endif()
add_executable(watch_cost ${CMAKE_CURRENT_LIST_DIR}/events_bench/watch_cost.c)
target_link_libraries(watch_cost PRIVATE pinheap pinheap_headers)
set_target_properties(watch_cost PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/events_bench)

# watch_bench_smoke: the runner works end to end at a tiny size (the check's
# instructions counted when valgrind is there; timings not checked).  Python3
# was looked for by events_bench.cmake, included before this list.
if(Python3_Interpreter_FOUND)
  add_test(NAME watch_bench_smoke
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/events_bench/watch_bench.py
      ${PROJECT_BINARY_DIR} --runs 5 --watches 20000 --releases 2000)
  set_tests_properties(watch_bench_smoke PROPERTIES TIMEOUT 300
    PASS_REGULAR_EXPRESSION "release with 20000 watches")
endif()
