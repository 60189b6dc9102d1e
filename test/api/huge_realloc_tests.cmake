# huge_realloc_tests.cmake -- realloc of huge blocks with mremap:
# moved or resized in place, heard as exactly the range released,
# pages keeping their frames.
pinheap_add_criterion_test(test_huge_realloc ${CMAKE_CURRENT_LIST_DIR}/test_huge_realloc.c)
