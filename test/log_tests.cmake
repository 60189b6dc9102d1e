# log_tests.cmake -- the logger (allocator/error.c): ph_log's printf subset,
# one write(2) per line, truncation, the level and PINHEAP_LOG_LEVEL.
# Included by test/CMakeLists.txt (its glob of test/*.cmake).
#
#   test_log          every test of test_log.c
#   test_log_noalloc  the same file with TEST_LOG_COUNT_MALLOC: the test
#                     defines the malloc family (counting, then forwarding
#                     to glibc's) to show that the logger never allocates,
#                     also from a release listener.  Such a malloc cannot
#                     share a process with ASan's: label noasan.
foreach(t test_log test_log_noalloc)
  pinheap_add_criterion_test(${t} test_log.c)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/config
    ${PROJECT_BINARY_DIR}/include)
endforeach()
target_compile_definitions(test_log_noalloc PRIVATE TEST_LOG_COUNT_MALLOC=1)
target_compile_options(test_log_noalloc PRIVATE -fno-builtin-malloc -fno-builtin-free)
set_tests_properties(test_log_noalloc PROPERTIES LABELS "noasan")
