# shm_tests.cmake -- the shared-memory heap (allocator/shm/shm.c):
# its parameters (test_shm, suite shm_params) and several processes of one
# worker (shm_worker, linked with the archive's allocator) that share the heap.  The
# test binary fork+execs the workers with PINHEAP_SHM_SIZE and a job id of
# its own per test, and checks /dev/shm is left clean whatever the outcome.
add_executable(shm_worker ${CMAKE_CURRENT_LIST_DIR}/shm_worker.c)
# The worker calls the prefixed API (PINHEAP_NAME(malloc)): pinheap's malloc
# whatever the replacement decision, and it runs under ASan too.
target_include_directories(shm_worker PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(shm_worker PRIVATE _GNU_SOURCE)
target_link_libraries(shm_worker PRIVATE pinheap_core Threads::Threads)

pinheap_add_criterion_test(test_shm ${CMAKE_CURRENT_LIST_DIR}/test_shm.c)
target_include_directories(test_shm PRIVATE ${PROJECT_SOURCE_DIR}/config)
target_compile_definitions(test_shm PRIVATE SHM_WORKER="$<TARGET_FILE:shm_worker>")
add_dependencies(test_shm shm_worker)
set_tests_properties(test_shm PROPERTIES LABELS "shm")

# pinheap-info shows the shared heap: every parameter with how it was set,
# the settings in effect, and this process's place in the region; the tool
# leaves the heap at exit like any process (the object is gone after).  The
# tool carries the replacement layer: not under ASan (label noasan).
if(TARGET pinheap-info)
  add_test(NAME shm_info
    COMMAND sh -c "PINHEAP_SHM_SIZE=16M PINHEAP_SHM_JOB=info$$ \"$1\" && ! test -e /dev/shm/pinheap-$(id -u)-info$$ && echo no-object-left"
            sh $<TARGET_FILE:pinheap-info>)
  set_tests_properties(shm_info PROPERTIES LABELS "shm;noasan"
    PASS_REGULAR_EXPRESSION
    "shared-memory heap: on\n.*PINHEAP_SHM_SIZE +\"16M\"\n.*job info[0-9]+ \\(PINHEAP_SHM_JOB\\).*this process: index 0, region 0x[0-9a-f]+ \\(16777216 bytes\\).*no-object-left")
endif()

# The size alone does not replace malloc: with the decision off (no
# leave-pinned) the process's malloc stays glibc's, and both a warning and
# the info tool say so (before, the tool said "on" and nothing else).
if(TARGET pinheap-info)
  add_test(NAME shm_info_decision_off
    COMMAND sh -c "PINHEAP_SHM_SIZE=16M PINHEAP_SHM_JOB=off$$ \"$1\" 2>&1"
            sh $<TARGET_FILE:pinheap-info>)
  set_tests_properties(shm_info_decision_off PROPERTIES LABELS "shm;noasan"
    ENVIRONMENT_MODIFICATION "OMPI_MCA_mpi_leave_pinned=unset:;${PINHEAP_PARAM_PREFIX}mpi_leave_pinned=unset:;PINHEAP_MODE=unset:"
    PASS_REGULAR_EXPRESSION
    "warning: the shared-memory heap is configured.*malloc is not pinheap's.*shared-memory heap: on\n  malloc: NOT pinheap's in this process")
endif()

# Releases every process hears: memory one process gives back from the
# region fires the release listeners of the others before its pages leave
# the shared object.  shm_worker's "release" mode drives each
# scenario on a job of its own (the giver, the process that hears, an idle
# one killed) and checks nothing is left in /dev/shm.
foreach(how heard reused untouched grown dead churn ringfull)
  add_test(NAME shm_release_${how} COMMAND shm_worker release ${how})
  set_tests_properties(shm_release_${how} PROPERTIES LABELS "shm" TIMEOUT 60
    PASS_REGULAR_EXPRESSION "release ${how} ok" FAIL_REGULAR_EXPRESSION "FAIL")
endforeach()
