# data_layout_tests.cmake -- the writable data a small program keeps
# resident (PH_COLD_BSS, PH_HOT_DATA: hooks/startup.h): test/data_layout.sh.
# The plain build only: sanitizers' runtimes and PINHEAP_DEBUG=2's heap
# checker write other memory by design.
if(TARGET pinheap-preload AND PINHEAP_SANITIZER STREQUAL "" AND PINHEAP_DEBUG STREQUAL "1")
  add_executable(data_layout_probe ${CMAKE_CURRENT_SOURCE_DIR}/data_layout_probe.c)
  add_test(NAME data_layout COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/data_layout.sh
           $<TARGET_FILE:pinheap-preload> $<TARGET_FILE:data_layout_probe>
           "${CMAKE_C_COMPILER_ID}" "${CMAKE_SYSTEM_PROCESSOR}")
  set_tests_properties(data_layout PROPERTIES LABELS "layout" SKIP_RETURN_CODE 77
    FAIL_REGULAR_EXPRESSION "FAIL")
endif()
