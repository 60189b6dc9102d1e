# lock_tests.cmake -- the heap lock (issue 12): mutual exclusion with the
# holder preempted, waiters that sleep, a wake-up across processes, fork
# while the heap's locks are contended.  It starts threads: the TSan pass
# runs it too.  Included by test/CMakeLists.txt; one Criterion executable =
# one ctest.
list(APPEND PINHEAP_TSAN_TESTS test_lock)
pinheap_add_criterion_test(test_lock test_lock.c)
