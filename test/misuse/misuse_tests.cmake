# misuse_tests.cmake -- misuse that must end the process with one exact
# line: double frees, pointers pinheap never returned, corrupted headers,
# another heap's pointer.  One Criterion executable = one ctest.
pinheap_add_criterion_test(test_misuse ${CMAKE_CURRENT_LIST_DIR}/test_misuse.c)
