# slab_tests.cmake -- the slab pages of small blocks (issue 12): layout,
# misuse named as on the chunk path, frees from other threads, exited
# threads' pages, realloc, trim and fork.  It starts threads: the TSan pass
# runs it too.  Included by test/CMakeLists.txt; one Criterion executable =
# one ctest.
list(APPEND PINHEAP_TSAN_TESTS test_slab)
pinheap_add_criterion_test(test_slab test_slab.c)
