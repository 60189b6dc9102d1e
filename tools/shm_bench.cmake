# shm_bench.cmake -- single-copy messaging through the shared heap against
# MPI_Send/MPI_Recv, a raw shared mapping, CMA and a pipelined two-copy ring
# (issue 11, item 6).  tools/bench/shm/shm_bench.c is built with Open MPI's
# mpicc and linked with libeventscore.so (the archive whole, from
# events_bench.cmake), so pinheap serves malloc when PINHEAP_MODE=on;
# tools/bench/shm/run.py runs it under mpirun -np 2 and prints the table and
# the chart.  Built when mpicc and mpirun are found; plain builds only.
if(PINHEAP_SANITIZER OR NOT TARGET eventscore)
  return()
endif()
find_program(PINHEAP_MPICC mpicc)
find_program(PINHEAP_MPIRUN mpirun)
set(_shmb ${CMAKE_CURRENT_LIST_DIR}/bench/shm)
set(_shmb_out ${CMAKE_CURRENT_BINARY_DIR}/bench/shm)
find_package(Python3 COMPONENTS Interpreter)
if(NOT PINHEAP_MPICC OR NOT PINHEAP_MPIRUN OR NOT Python3_Interpreter_FOUND)
  add_test(NAME shm_bench_smoke
    COMMAND ${CMAKE_COMMAND} -E echo "SKIP: shm_bench needs mpicc, mpirun (apt-get install openmpi-bin libopenmpi-dev) and python3")
  set_tests_properties(shm_bench_smoke PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP:")
  return()
endif()
add_custom_command(OUTPUT ${_shmb_out}/shm_bench
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_shmb_out}
  COMMAND ${PINHEAP_MPICC} -O2 -Wall -o ${_shmb_out}/shm_bench ${_shmb}/shm_bench.c
          -DPINHEAP_BENCH_PREFIX=${PINHEAP_PREFIX}
          -L$<TARGET_FILE_DIR:eventscore> -Wl,--no-as-needed -leventscore
          -Wl,-rpath,$<TARGET_FILE_DIR:eventscore> -ldl
  DEPENDS ${_shmb}/shm_bench.c eventscore
  COMMENT "mpicc shm_bench")
add_custom_target(shm_bench ALL DEPENDS ${_shmb_out}/shm_bench)

# shm_bench_smoke: every method moves and checks messages up to 64 KiB;
# the heap method must find its buffer in the shared heap.  Timings are not
# checked.
add_test(NAME shm_bench_smoke
  COMMAND ${Python3_EXECUTABLE} ${_shmb}/run.py ${_shmb_out} --max 64K --bytes 4M --runs 5
          --out ${_shmb_out}/smoke --check)
set_tests_properties(shm_bench_smoke PROPERTIES TIMEOUT 300 LABELS "mpi;noasan"
  PASS_REGULAR_EXPRESSION "shm-bench-ok" FAIL_REGULAR_EXPRESSION "FAIL ")
