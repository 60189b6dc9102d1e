# layout_tests.cmake -- what a small program keeps resident of pinheap:
# its text (PH_HOT, allocator/base/base.h; tools/preload_text.ld:
# test/packaging/text_layout.sh) and its writable data (PH_COLD_BSS, PH_HOT_DATA:
# allocator/base/startup.h; test/packaging/data_layout.sh), both counted by layout_probe under
# the preload shim.  The shim's parts need the plain build: sanitizers'
# runtimes and PINHEAP_DEBUG=2's heap checker run other code and write
# other memory by design.
add_executable(layout_probe ${CMAKE_CURRENT_LIST_DIR}/layout_probe.c)
target_link_libraries(layout_probe PRIVATE Threads::Threads)
set(_layout_args $<TARGET_FILE:pinheap> "${PINHEAP_PREFIX}")
if(TARGET pinheap-preload AND PINHEAP_SANITIZER STREQUAL "" AND PINHEAP_DEBUG STREQUAL "1")
  list(APPEND _layout_args $<TARGET_FILE:pinheap-preload> $<TARGET_FILE:layout_probe>
       "${CMAKE_BUILD_TYPE}")
  add_test(NAME data_layout COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/data_layout.sh
           $<TARGET_FILE:pinheap-preload> $<TARGET_FILE:layout_probe>
           "${CMAKE_C_COMPILER_ID}" "${CMAKE_SYSTEM_PROCESSOR}")
  set_tests_properties(data_layout PROPERTIES LABELS "layout" SKIP_RETURN_CODE 77
    FAIL_REGULAR_EXPRESSION "FAIL")
  # pinheap's start-up leaves no block allocated: its look-ups of libc's
  # definitions and of libucm's need no dlopen handle (ld.so allocates its
  # search list) and no failed dlsym (dlerror's state and error text), each
  # of which made a size class's page resident in every process.
  add_test(NAME startup_blocks COMMAND layout_probe --startup "${PINHEAP_PREFIX}")
  set_tests_properties(startup_blocks PROPERTIES LABELS "layout"
    ENVIRONMENT "PINHEAP_MODE=on;LD_PRELOAD=$<TARGET_FILE:pinheap-preload>"
    PASS_REGULAR_EXPRESSION "^in use at main: 0 bytes")
endif()
add_test(NAME text_layout COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/text_layout.sh ${_layout_args})
set_tests_properties(text_layout PROPERTIES LABELS "layout" SKIP_RETURN_CODE 77
  FAIL_REGULAR_EXPRESSION "FAIL")
# The same bound with the loop on a thread of its own (pinheap-bench runs
# every workload so): a new arena and a thread's exit run code that a
# program without threads does not.  Before it was gathered, 44 pages of
# the shim's text were resident (three windows: the new arena's mapping
# trimmed to alignment, the exit's push of remote frees), 16 without the
# thread.
add_test(NAME text_layout_thread COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/text_layout.sh ${_layout_args})
set_tests_properties(text_layout_thread PROPERTIES LABELS "layout" SKIP_RETURN_CODE 77
  FAIL_REGULAR_EXPRESSION "FAIL" ENVIRONMENT "LAYOUT_PROBE_THREAD=1")
# The same in a runtime's core library reached transitively (libdemocore.so
# through libdemompi.so, test/integration/replace_tests.cmake), linked by
# GNU ld's own script: every resident page of its text lies in the windows
# of the start-up and hot text (test/packaging/text_layout_core.sh).
if(TARGET demompi AND PINHEAP_SANITIZER STREQUAL "" AND PINHEAP_DEBUG STREQUAL "1")
  add_executable(layout_probe_core ${CMAKE_CURRENT_LIST_DIR}/layout_probe.c)
  target_link_libraries(layout_probe_core PRIVATE -Wl,--no-as-needed demompi Threads::Threads)
  add_test(NAME text_layout_core COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/text_layout_core.sh
           $<TARGET_FILE:pinheap> $<TARGET_FILE:democore> $<TARGET_FILE:layout_probe_core>)
  set_tests_properties(text_layout_core PROPERTIES LABELS "layout" SKIP_RETURN_CODE 77
    FAIL_REGULAR_EXPRESSION "FAIL")
endif()
