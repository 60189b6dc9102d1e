# layout_tests.cmake -- the text layout that keeps a small program's
# resident pages few (PH_HOT, allocator/internal.h; tools/preload_text.ld):
# test/text_layout.sh.  The shim's part (resident pages of a malloc/free
# loop) needs the plain build: sanitizers' runtimes and PINHEAP_DEBUG=2's
# heap checker run other code by design.
add_executable(text_layout_probe ${CMAKE_CURRENT_SOURCE_DIR}/text_layout_probe.c)
set(_layout_args $<TARGET_FILE:pinheap> "${PINHEAP_PREFIX}")
if(TARGET pinheap-preload AND PINHEAP_SANITIZER STREQUAL "" AND PINHEAP_DEBUG STREQUAL "1")
  list(APPEND _layout_args $<TARGET_FILE:pinheap-preload> $<TARGET_FILE:text_layout_probe>
       "${CMAKE_BUILD_TYPE}")
endif()
add_test(NAME text_layout COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/text_layout.sh ${_layout_args})
set_tests_properties(text_layout PROPERTIES LABELS "layout" SKIP_RETURN_CODE 77
  FAIL_REGULAR_EXPRESSION "FAIL")
