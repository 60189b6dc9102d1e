# fabric_tests.cmake -- pinheap's memory monitor in the real libfabric
# (hooks/fabric.c): imported on request, libfabric then refuses another,
# and every release of a region its MR cache holds (the program plays the
# cache's subscribe, no provider here caches) reaches libfabric's notify
# before the memory goes; the lock contract.  test/fixture/fabric_monitor.c
# with libpinheap.a linked in whole, libfabric linked or dlopen'ed late,
# each run with pinheap enabled and disabled.  Needs Debian's libfabric-dev
# (build) and libfabric1 (run); without them the test says SKIP.  Plain
# builds only.
if(PINHEAP_SANITIZER)
  return()
endif()
find_path(PINHEAP_FABRIC_INCLUDE rdma/fi_ext.h)
find_library(PINHEAP_FABRIC_LIB fabric)
if(NOT PINHEAP_FABRIC_INCLUDE OR NOT PINHEAP_FABRIC_LIB)
  add_test(NAME fabric_monitor
    COMMAND sh -c "echo 'SKIP: libfabric (rdma/fi_ext.h, libfabric.so) not found: apt-get install libfabric-dev'; exit 77")
  set_tests_properties(fabric_monitor PROPERTIES SKIP_RETURN_CODE 77)
  return()
endif()

foreach(how linked dlopen)
  add_executable(fabric_monitor_${how} ${CMAKE_CURRENT_SOURCE_DIR}/fixture/fabric_monitor.c)
  target_compile_definitions(fabric_monitor_${how} PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX} _GNU_SOURCE)
  target_include_directories(fabric_monitor_${how} PRIVATE ${PROJECT_BINARY_DIR}/include
                             ${PINHEAP_FABRIC_INCLUDE})
  target_compile_options(fabric_monitor_${how} PRIVATE -fno-builtin)
  # pinheap's interposers and the program's pthread_rwlock_rdlock come first
  set_target_properties(fabric_monitor_${how} PROPERTIES ENABLE_EXPORTS ON)
  target_link_libraries(fabric_monitor_${how} PRIVATE
    -Wl,--whole-archive $<TARGET_FILE:pinheap> -Wl,--no-whole-archive
    ${CMAKE_DL_LIBS} Threads::Threads)
  add_dependencies(fabric_monitor_${how} pinheap)
endforeach()
target_compile_definitions(fabric_monitor_linked PRIVATE FABRIC_LINKED)
target_link_libraries(fabric_monitor_linked PRIVATE -Wl,--no-as-needed ${PINHEAP_FABRIC_LIB})

foreach(how linked dlopen)
  foreach(mode on off)
    add_test(NAME fabric_monitor_${how}_${mode} COMMAND fabric_monitor_${how} ${mode})
    set_tests_properties(fabric_monitor_${how}_${mode} PROPERTIES
      ENVIRONMENT "PINHEAP_MODE=${mode};FI_LOG_LEVEL=warn"
      SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "fabric;noasan" FAIL_REGULAR_EXPRESSION "FAIL ")
  endforeach()
endforeach()
# refusals: no events to tell, or the user chose libfabric's own monitor
add_test(NAME fabric_monitor_refused_events COMMAND fabric_monitor_dlopen on refused)
add_test(NAME fabric_monitor_refused_chosen COMMAND fabric_monitor_dlopen on refused)
set_tests_properties(fabric_monitor_refused_events PROPERTIES
  ENVIRONMENT "PINHEAP_MODE=on;PINHEAP_EVENTS=0;FI_LOG_LEVEL=warn")
set_tests_properties(fabric_monitor_refused_chosen PROPERTIES
  ENVIRONMENT "PINHEAP_MODE=on;FI_MR_CACHE_MONITOR=memhooks;FI_LOG_LEVEL=warn")
set_tests_properties(fabric_monitor_refused_events fabric_monitor_refused_chosen PROPERTIES
  SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS "fabric;noasan" FAIL_REGULAR_EXPRESSION "FAIL ")
