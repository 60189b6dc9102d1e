# ucx_tests.cmake -- pinheap beside UCX's libucm in one process (hooks/ucx.c):
# a UCX VM_UNMAPPED handler can be set and hears every release pinheap sees,
# pinheap hears the program's calls whatever UCX hooked, nothing heard twice.
# test/fixture/ucx_mix.c linked three ways: the core library before libucm,
# after it, and one level deep (libmpifix.so -> libdemocore.so); each run
# with pinheap enabled and disabled.  Needs Debian's libucx-dev; without it
# the test says SKIP (ctest shows it skipped).  Plain builds only.
if(PINHEAP_SANITIZER)
  return()
endif()
find_path(PINHEAP_UCM_INCLUDE ucm/api/ucm.h)
find_library(PINHEAP_UCM_LIB ucm)
find_library(PINHEAP_UCS_LIB ucs)
if(NOT PINHEAP_UCM_INCLUDE OR NOT PINHEAP_UCM_LIB OR NOT PINHEAP_UCS_LIB)
  add_test(NAME ucx_mix
    COMMAND sh -c "echo 'SKIP: UCX (libucm, ucm/api/ucm.h) not found: apt-get install libucx-dev'; exit 77")
  set_tests_properties(ucx_mix PROPERTIES SKIP_RETURN_CODE 77)
  return()
endif()

set(_ucx_orders core_first ucm_first transitive)
foreach(order ${_ucx_orders})
  add_executable(ucx_mix_${order} ${CMAKE_CURRENT_SOURCE_DIR}/fixture/ucx_mix.c)
  target_compile_definitions(ucx_mix_${order} PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX})
  target_include_directories(ucx_mix_${order} PRIVATE ${PROJECT_BINARY_DIR}/include
                             ${PINHEAP_UCM_INCLUDE})
  target_compile_options(ucx_mix_${order} PRIVATE -fno-builtin)
  target_link_libraries(ucx_mix_${order} PRIVATE ${CMAKE_DL_LIBS})
endforeach()
# link order is lookup order: libdemocore's symbols before or after libucm's
target_link_libraries(ucx_mix_core_first PRIVATE -Wl,--no-as-needed democore
                      ${PINHEAP_UCM_LIB} ${PINHEAP_UCS_LIB})
target_link_libraries(ucx_mix_ucm_first PRIVATE -Wl,--no-as-needed ${PINHEAP_UCM_LIB}
                      ${PINHEAP_UCS_LIB} democore)
target_link_libraries(ucx_mix_transitive PRIVATE -Wl,--no-as-needed ${PINHEAP_UCM_LIB}
                      ${PINHEAP_UCS_LIB} mpifix)

foreach(order ${_ucx_orders})
  foreach(mode on off)
    add_test(NAME ucx_mix_${order}_${mode} COMMAND ucx_mix_${order} ${mode})
    set_tests_properties(ucx_mix_${order}_${mode} PROPERTIES
      ENVIRONMENT "PINHEAP_MODE=${mode};UCX_LOG_LEVEL=warn"
      TIMEOUT 120 LABELS "ucx;noasan" FAIL_REGULAR_EXPRESSION "FAIL ")
  endforeach()
endforeach()
