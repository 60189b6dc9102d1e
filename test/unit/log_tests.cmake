# log_tests.cmake -- the logger (allocator/base/error.c): ph_log's printf subset,
# one write(2) per line, truncation, the level and PINHEAP_LOG_LEVEL.
#   test_log          every test of test_log.c
#   test_log_noalloc  the same file with TEST_LOG_COUNT_MALLOC: the test
#                     defines the malloc family (counting, then forwarding
#                     to glibc's) to show that the logger never allocates,
#                     also from a release listener.  Such a malloc cannot
#                     share a process with ASan's: label noasan.
foreach(t test_log test_log_noalloc)
  pinheap_add_criterion_test(${t} ${CMAKE_CURRENT_LIST_DIR}/test_log.c)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/config
    ${PROJECT_BINARY_DIR}/include)
endforeach()
target_compile_definitions(test_log_noalloc PRIVATE TEST_LOG_COUNT_MALLOC=1)
target_compile_options(test_log_noalloc PRIVATE -fno-builtin-malloc -fno-builtin-free)
set_tests_properties(test_log_noalloc PROPERTIES LABELS "noasan")

# pinheap-info shows the level, where it came from and the default.
if(TARGET pinheap-info)
  add_test(NAME pinheap_info_log_level
    COMMAND sh -c "env -i PINHEAP_LOG_LEVEL=' Info ' \"$1\" 2>&1; echo \"exit=$?\"" sh
            $<TARGET_FILE:pinheap-info>)
  set_tests_properties(pinheap_info_log_level PROPERTIES LABELS noasan
    PASS_REGULAR_EXPRESSION
    "\n  PINHEAP_LOG_LEVEL +info +warn +PINHEAP_LOG_LEVEL=\" Info \"\n.*exit=0\n$")
  add_test(NAME pinheap_info_log_level_invalid
    COMMAND sh -c "env -i PINHEAP_LOG_LEVEL=loud \"$1\" 2>&1; echo \"exit=$?\"" sh
            $<TARGET_FILE:pinheap-info>)
  set_tests_properties(pinheap_info_log_level_invalid PROPERTIES LABELS noasan
    PASS_REGULAR_EXPRESSION
    "^pinheap: warning: PINHEAP_LOG_LEVEL=\"loud\" is not a valid value \\(expected fatal, error, warn, info, debug or 0 to 4\\)[;] ignored, treated as not set\n.*\n  PINHEAP_LOG_LEVEL +warn +warn +invalid: PINHEAP_LOG_LEVEL=\"loud\" \\(ignored\\)\n.*exit=0\n$")
endif()
