# huge_tests.cmake -- the huge-mapping cache's policy (allocator/heap/huge.c): a
# freed huge block keeps its address space, not its memory, after the
# decay, and the release listener heard the range first.  One Criterion
# executable = one ctest.
pinheap_add_criterion_test(test_huge ${CMAKE_CURRENT_LIST_DIR}/test_huge.c)
