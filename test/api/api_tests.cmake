# api_tests.cmake -- the allocator's API semantics: entry points and errno,
# the alignment sweep, and memory pressure (a huge block about to be faulted
# in makes the arenas give back their free top at once).  One Criterion
# executable = one ctest.
pinheap_add_criterion_test(test_api ${CMAKE_CURRENT_LIST_DIR}/test_api.c)
pinheap_add_criterion_test(test_align ${CMAKE_CURRENT_LIST_DIR}/test_align.c)
pinheap_add_criterion_test(test_relieve ${CMAKE_CURRENT_LIST_DIR}/test_relieve.c)
