# mspace_tests.cmake -- mspaces (allocator/api/mspace.c): create and destroy,
# independent heaps, every mspace_* entry point, fixed-region mspaces
# between guard pages.  One Criterion executable = one ctest.
pinheap_add_criterion_test(test_mspace ${CMAKE_CURRENT_LIST_DIR}/test_mspace.c)
