# events_bench.cmake -- what installation and events cost (issue 9's
# targets): tools/events_bench/run.py prints the start-up cost of
# installation on a trivial program whose core library is behind libc
# (relocation patching included), and the cost an event adds to munmap.
# Plain builds only (the timings mean nothing under a sanitizer).
if(PINHEAP_SANITIZER)
  return()
endif()
set(_eb ${CMAKE_CURRENT_LIST_DIR}/events_bench)

add_library(eventscore SHARED ${_eb}/core.c)
target_link_libraries(eventscore PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:pinheap> -Wl,--no-whole-archive ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(eventscore pinheap)
add_library(eventsmid SHARED ${_eb}/mid.c)
target_link_libraries(eventsmid PRIVATE eventscore)
add_executable(events_startup ${_eb}/startup.c)
target_compile_definitions(events_startup PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX})
target_link_libraries(events_startup PRIVATE eventsmid ${CMAKE_DL_LIBS})
set_target_properties(eventscore eventsmid events_startup PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/events_bench
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/events_bench)

add_executable(events_munmap_cost ${_eb}/munmap_cost.c)
target_include_directories(events_munmap_cost PRIVATE ${PROJECT_BINARY_DIR}/include)
target_link_libraries(events_munmap_cost PRIVATE pinheap)
set_target_properties(events_munmap_cost PROPERTIES
  RUNTIME_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/events_bench)

# events_bench_smoke: the runner works end to end at a tiny size (a
# missing installation time, a warning or a handler that did not run fail
# it), and refuses a bad option by name.  Timings are not checked.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME events_bench_smoke
    COMMAND sh -c "\"$1\" \"$2\" \"$3\" --runs 5 --iterations 500 --no-callgrind && ! \"$1\" \"$2\" \"$3\" --runs 2 2>&1 && \"$1\" \"$2\" \"$3\" --runs 2 2>&1 | grep -q 'runs must be at least 5' && echo events-bench-ok"
      sh ${Python3_EXECUTABLE} ${_eb}/run.py ${PROJECT_BINARY_DIR})
  set_tests_properties(events_bench_smoke PROPERTIES TIMEOUT 120
    PASS_REGULAR_EXPRESSION "one MUNMAP.*events-bench-ok")
  add_dependencies(events_munmap_cost events_startup)
else()
  add_test(NAME events_bench_smoke
    COMMAND ${CMAKE_COMMAND} -E echo "SKIP: events_bench_smoke needs python3 (not found at configure time)")
  set_tests_properties(events_bench_smoke PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP:")
endif()
