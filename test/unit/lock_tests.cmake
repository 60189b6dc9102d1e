# lock_tests.cmake -- the heap lock (ph_lock_t, its slow paths in
# allocator/heap/arena.c): mutual exclusion with the holder preempted, waiters
# that sleep, a wake-up across processes, fork while the heap's locks are
# contended.  It starts threads: the TSan pass
# runs it too.  One Criterion executable = one ctest.
list(APPEND PINHEAP_TSAN_TESTS test_lock)
pinheap_add_criterion_test(test_lock ${CMAKE_CURRENT_LIST_DIR}/test_lock.c)
