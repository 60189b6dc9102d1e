# arena_tests.cmake -- the arenas (allocator/heap/arena.c): threads spread over
# them, capped by M_ARENA_MAX or PINHEAP_ARENA_MAX, an exited thread's arena
# taken again, a thread's cache returned at its exit.  It starts threads:
# the TSan pass runs it too.  One Criterion executable = one ctest.
pinheap_add_criterion_test(test_arenas ${CMAKE_CURRENT_LIST_DIR}/test_arenas.c)
