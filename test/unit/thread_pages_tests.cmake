# thread_pages_tests.cmake -- the pages a new thread makes resident for
# pinheap's own bookkeeping in a malloc(32)/free loop: its thread cache
# (allocator/front/tcache.c) and its arena's first segment
# (allocator/heap/state.c: ms_create), counted with /proc/self/pagemap.
# One Criterion executable = one ctest.
pinheap_add_criterion_test(test_thread_pages ${CMAKE_CURRENT_LIST_DIR}/test_thread_pages.c)
