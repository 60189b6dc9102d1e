# slab_tests.cmake -- the slab pages of small blocks (allocator/front/slab.c):
# layout, misuse named as on the chunk path, frees from other threads,
# exited threads' pages, realloc, trim and fork.  It starts threads: the TSan pass
# runs it too.  One Criterion executable = one ctest.
list(APPEND PINHEAP_TSAN_TESTS test_slab)
pinheap_add_criterion_test(test_slab ${CMAKE_CURRENT_LIST_DIR}/test_slab.c)
# A class met rarely takes no page of its own: its first blocks are chunks.
list(APPEND PINHEAP_TSAN_TESTS test_sparse)
pinheap_add_criterion_test(test_sparse ${CMAKE_CURRENT_LIST_DIR}/test_sparse.c)
