# openmpi_tests.cmake -- pinheap inside a real Open MPI: Debian 12's Open MPI
# 4.1.4 built from its source with pinheap as its memory component
# (tools/openmpi/build.sh, into <build>/openmpi, its default), then tested under its own
# ompi_info and mpirun (test/consumers/openmpi_test.py) and by its own `make check`.
# Label `openmpi`.
#
# The default pass only: the Open MPI build takes minutes and always uses
# pinheap with the component's prefix (opal_memory_pinheap_), whatever this
# build's; sanitizer builds cannot host it.  The build is a fixture, run
# serially (it keeps both cores busy), and the tests after it too (mpirun
# -np 2).
if(PINHEAP_SANITIZER OR NOT PINHEAP_PREFIX STREQUAL "pinheap_" OR PINHEAP_DEBUG GREATER 1)
  return()
endif()
find_program(PINHEAP_PYTHON3 python3)
set(_ompi_out ${PROJECT_BINARY_DIR}/openmpi)   # the script's default OUT_DIR

add_test(NAME openmpi_build
  COMMAND bash ${PROJECT_SOURCE_DIR}/tools/openmpi/build.sh ${_ompi_out})
set_tests_properties(openmpi_build PROPERTIES TIMEOUT 2400 LABELS "openmpi;noasan"
  FIXTURES_SETUP openmpi RUN_SERIAL TRUE)

add_test(NAME openmpi_component
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/openmpi_test.py ${_ompi_out}
          ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/openmpi-work)
set_tests_properties(openmpi_component PROPERTIES TIMEOUT 900 LABELS "openmpi;mpi;noasan"
  FIXTURES_REQUIRED openmpi RUN_SERIAL TRUE FAIL_REGULAR_EXPRESSION "FAIL ")

# Open MPI's own checks (its test/ folder: 39 programs linked with
# libopen-pal), with pinheap inside and serving malloc (leave-pinned on).
add_test(NAME openmpi_make_check
  COMMAND env OMPI_MCA_mpi_leave_pinned=1 make -C ${_ompi_out}/obj/test -j2 check)
set_tests_properties(openmpi_make_check PROPERTIES TIMEOUT 1200 LABELS "openmpi;noasan"
  FIXTURES_REQUIRED openmpi RUN_SERIAL TRUE)
