# shm_tests.cmake -- the shared-memory heap (allocator/shm.c, issue 11):
# its parameters (test_shm, suite shm_params) and several processes of one
# worker (shm_worker, linked with the archive's allocator) that share the heap.  The
# test binary fork+execs the workers with PINHEAP_SHM_SIZE and a job id of
# its own per test, and checks /dev/shm is left clean whatever the outcome.
add_executable(shm_worker ${CMAKE_CURRENT_SOURCE_DIR}/shm_worker.c)
# The worker calls the prefixed API (PINHEAP_NAME(malloc)): pinheap's malloc
# whatever the replacement decision, and it runs under ASan too.
target_include_directories(shm_worker PRIVATE ${PROJECT_SOURCE_DIR}/allocator)
target_compile_definitions(shm_worker PRIVATE _GNU_SOURCE)
target_link_libraries(shm_worker PRIVATE pinheap_core Threads::Threads)

pinheap_add_criterion_test(test_shm ${CMAKE_CURRENT_SOURCE_DIR}/test_shm.c)
target_include_directories(test_shm PRIVATE ${PROJECT_SOURCE_DIR}/config)
target_compile_definitions(test_shm PRIVATE SHM_WORKER="$<TARGET_FILE:shm_worker>")
add_dependencies(test_shm shm_worker)
set_tests_properties(test_shm PROPERTIES LABELS "shm")
