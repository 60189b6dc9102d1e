# mpi_tests.cmake -- pinheap under a real MPI: a program built by Debian's
# Open MPI wrapper compiler (mpicc links -lmpi only) and linked with a
# fixture library that itself needs the core library (libmpifix.so ->
# libdemocore.so), so pinheap sits one level deep, as in libopen-pal.  Run
# with mpirun -np 2 by test/multiproc/mpi_test.py, which says SKIP (and passes) when
# mpicc or mpirun is missing.  Plain builds only: the program is not built
# with the sanitizers.
if(PINHEAP_SANITIZER)
  return()
endif()

add_library(mpifix SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixture/mpifix.c)
target_include_directories(mpifix PRIVATE ${PROJECT_BINARY_DIR}/include)
target_link_libraries(mpifix PRIVATE democore)
set_target_properties(mpifix PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

find_program(PINHEAP_PYTHON3 python3)
find_program(PINHEAP_MPICC mpicc)
find_program(PINHEAP_MPIRUN mpirun)
set(_mpi_app ${CMAKE_CURRENT_BINARY_DIR}/mpi_exchange)
if(PINHEAP_MPICC AND PINHEAP_MPIRUN)
  # The wrapper compiler, as a user runs it: its own link line plus the
  # fixture library, nothing of pinheap's.
  add_custom_command(OUTPUT ${_mpi_app}
    COMMAND ${PINHEAP_MPICC} -O2 -o ${_mpi_app} ${CMAKE_CURRENT_SOURCE_DIR}/fixture/mpi_exchange.c
            -L${CMAKE_CURRENT_BINARY_DIR} -lmpifix -Wl,-rpath,${CMAKE_CURRENT_BINARY_DIR}
    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/fixture/mpi_exchange.c mpifix
    COMMENT "mpicc mpi_exchange")
  add_custom_target(mpi_exchange ALL DEPENDS ${_mpi_app})
endif()

add_test(NAME mpi_exchange
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/mpi_test.py
          ${_mpi_app} "${PINHEAP_MPIRUN}" ${PINHEAP_PARAM_PREFIX})
set_tests_properties(mpi_exchange PROPERTIES TIMEOUT 300 LABELS "mpi;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")
# The same run at PINHEAP_LOG_LEVEL=info: each rank says its decision,
# installation and support level, one line each.
add_test(NAME mpi_log_info
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/mpi_test.py --log-info
          ${_mpi_app} "${PINHEAP_MPIRUN}" ${PINHEAP_PARAM_PREFIX})
set_tests_properties(mpi_log_info PROPERTIES TIMEOUT 300 LABELS "mpi;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")
