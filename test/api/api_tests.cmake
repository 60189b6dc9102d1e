# api_tests.cmake -- the allocator's API semantics (issue 2, items 4, 5, 8):
# entry points and errno, the alignment sweep, misuse that must abort with
# one exact line, and mspaces (OS-backed and fixed-region).
# Included by test/CMakeLists.txt; one Criterion executable = one ctest.
pinheap_add_criterion_test(test_api test_api.c)
pinheap_add_criterion_test(test_align test_align.c)
pinheap_add_criterion_test(test_misuse test_misuse.c)
pinheap_add_criterion_test(test_mspace test_mspace.c)
pinheap_add_criterion_test(test_huge test_huge.c)
pinheap_add_criterion_test(test_relieve test_relieve.c)
