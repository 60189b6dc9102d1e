# shm_mpi_tests.cmake -- the shared-memory heap under a real MPI:
# test/multiproc/shm_mpi.c built by Debian's Open MPI wrapper compiler with
# the core archive, run by mpirun with PINHEAP_SHM_SIZE set:
#   shm_mpi_pairs    -np 2, one region: addresses travel by MPI, one copy
#   shm_mpi_groups   -np 4 as two simulated nodes (two job ids): addresses
#                    within a group, data between groups by MPI
# When mpicc or mpirun is missing each test says SKIP.  Plain builds only
# (the program is not built with the sanitizers).
#
# This file is also the tests' driver: `cmake -DMPIRUN=... -DAPP=... -DNP=n
# -DMODE=pairs|groups -P shm_mpi_tests.cmake` runs mpirun, checks every
# rank's JSON line, and checks no region's object is left in /dev/shm
# (removing any, whatever the outcome).

if(CMAKE_SCRIPT_MODE_FILE)
  execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(_args -np ${NP} --oversubscribe --mca btl self,vader -x PINHEAP_SHM_SIZE=64M)
  if(_uid STREQUAL "0")
    list(APPEND _args --allow-run-as-root)
  endif()
  execute_process(COMMAND ${MPIRUN} ${_args} ${APP} ${MODE}
    OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc TIMEOUT 240)
  message("${_out}")
  set(_fails "")
  if(NOT _rc STREQUAL "0")
    string(APPEND _fails "mpirun -np ${NP} exited with ${_rc}: ${_err}\n")
  endif()
  string(REGEX MATCHALL "{\"rank\":[^\n]*}" _lines "${_out}")
  list(LENGTH _lines _n)
  if(NOT _n EQUAL NP)
    string(APPEND _fails "${_n} of ${NP} ranks reported\n")
  endif()
  set(_objects "")
  foreach(_l IN LISTS _lines)
    string(REGEX MATCH "\"rank\":([0-9]+)" _m "${_l}")
    set(_r ${CMAKE_MATCH_1})
    string(REGEX MATCH "\"object\":\"([^\"]*)\"" _m "${_l}")
    list(APPEND _objects "${CMAKE_MATCH_1}")
    foreach(_want "\"errors\":0," "\"total_errors\":0," "\"within\":1,")
      string(FIND "${_l}" "${_want}" _at)
      if(_at LESS 0)
        string(APPEND _fails "rank ${_r}: ${_want} expected: ${_l}\n")
      endif()
    endforeach()
    if(MODE STREQUAL "groups")
      set(_want "\"gsize\":2,\"groups\":2,\"within\":1,\"between\":1,")
    else()
      set(_want "\"gsize\":${NP},\"groups\":1,")
    endif()
    string(FIND "${_l}" "${_want}" _at)
    if(_at LESS 0)
      string(APPEND _fails "rank ${_r}: ${_want} expected: ${_l}\n")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _objects)
  list(LENGTH _objects _nobj)
  if(MODE STREQUAL "groups" AND NOT _nobj EQUAL 2)
    string(APPEND _fails "two regions expected, found: ${_objects}\n")
  elseif(MODE STREQUAL "pairs" AND NOT _nobj EQUAL 1)
    string(APPEND _fails "one region expected, found: ${_objects}\n")
  endif()
  # The last process of each region unlinked it; whatever the outcome, none
  # is left behind.
  foreach(_o IN LISTS _objects)
    if(_o MATCHES "^/pinheap-[0-9]+-[A-Za-z0-9._-]+$" AND EXISTS "/dev/shm${_o}")
      file(REMOVE "/dev/shm${_o}")
      string(APPEND _fails "/dev/shm${_o} left behind (removed)\n")
    endif()
  endforeach()
  if(_fails)
    message(FATAL_ERROR "FAIL shm_mpi ${MODE}:\n${_fails}")
  endif()
  message("shm_mpi ${MODE}: ${NP} ranks, ${_nobj} region(s), every check passed")
  return()
endif()

if(PINHEAP_SANITIZER)
  return()
endif()

find_program(PINHEAP_MPICC mpicc)
find_program(PINHEAP_MPIRUN mpirun)
if(PINHEAP_MPICC AND PINHEAP_MPIRUN)
  set(_shm_mpi_app ${CMAKE_CURRENT_BINARY_DIR}/shm_mpi)
  set(_shm_mpi_libs -lpthread)
  foreach(_lib ${CMAKE_DL_LIBS})
    list(APPEND _shm_mpi_libs -l${_lib})
  endforeach()
  # The wrapper compiler with the archive (no replacement layer): the
  # program calls pinheap's prefixed malloc.
  add_custom_command(OUTPUT ${_shm_mpi_app}
    COMMAND ${PINHEAP_MPICC} -O2 -I${PROJECT_BINARY_DIR}/include -o ${_shm_mpi_app}
            ${CMAKE_CURRENT_LIST_DIR}/shm_mpi.c $<TARGET_FILE:pinheap_core> ${_shm_mpi_libs}
    DEPENDS ${CMAKE_CURRENT_LIST_DIR}/shm_mpi.c pinheap_core
    COMMENT "mpicc shm_mpi")
  add_custom_target(shm_mpi ALL DEPENDS ${_shm_mpi_app})
  foreach(_case "pairs;2" "groups;4")
    list(GET _case 0 _mode)
    list(GET _case 1 _np)
    add_test(NAME shm_mpi_${_mode}
      COMMAND ${CMAKE_COMMAND} -DMPIRUN=${PINHEAP_MPIRUN} -DAPP=${_shm_mpi_app} -DNP=${_np}
              -DMODE=${_mode} -P ${CMAKE_CURRENT_LIST_FILE})
    set_tests_properties(shm_mpi_${_mode} PROPERTIES TIMEOUT 300 LABELS "mpi;shm;noasan")
  endforeach()
else()
  foreach(_mode pairs groups)
    add_test(NAME shm_mpi_${_mode}
      COMMAND ${CMAKE_COMMAND} -E echo
              "SKIP: shm_mpi_${_mode} needs mpicc and mpirun (Debian: openmpi-bin libopenmpi-dev)")
    set_tests_properties(shm_mpi_${_mode} PROPERTIES LABELS "mpi;shm;noasan"
      SKIP_REGULAR_EXPRESSION "SKIP:")
  endforeach()
endif()
