# huge_realloc_tests.cmake -- realloc of huge blocks with mremap (issue 24,
# item 3): moved or resized in place, heard as exactly the range released,
# pages keeping their frames.  Included by test/CMakeLists.txt.
pinheap_add_criterion_test(test_huge_realloc test_huge_realloc.c)
