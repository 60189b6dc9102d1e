# stress_tests.cmake -- randomized shadow-model tests and thread tests.
#
#   test_random    long randomized sequences vs. a shadow model (global heap,
#                  growing mspace, fixed-region mspace)
#   test_threads   concurrent churn and cross-thread frees (global, locked mspaces)
#
# Knobs (environment): PINHEAP_TEST_SEED (number or "random"),
# PINHEAP_TEST_SCALE (step/time multiplier).

pinheap_add_criterion_test(test_random ${CMAKE_CURRENT_LIST_DIR}/test_random.c)
pinheap_add_criterion_test(test_threads ${CMAKE_CURRENT_LIST_DIR}/test_threads.c)
set_tests_properties(test_random test_threads PROPERTIES LABELS "stress")
