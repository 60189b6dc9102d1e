# events_tests.cmake -- the memory-events API (hooks/events.c) end to end.
# test_events links libpinheap.a after pinheap_core (whose objects the
# test's own references pull first): the names the core leaves undefined --
# malloc, munmap, ... -- come from the archive's replace.c, before libc.
# Its symbols are exported, so this
# process's mmap, munmap, mremap, madvise, shmat, shmdt, brk and sbrk are
# pinheap's interposers (and so is its malloc).  Under ASan libasan's
# malloc must stay first in the process: the test runs in the plain
# passes only (label noasan), and skips, saying why, where interposition
# did not take.
# pinheap_add_interposing_test(NAME SRC): a Criterion test built this way,
# in a process whose memory calls are pinheap's interposers (test_files of
# files_tests.cmake too).
function(pinheap_add_interposing_test name src)
  pinheap_add_criterion_test(${name} ${src})
  target_link_libraries(${name} PRIVATE $<TARGET_FILE:pinheap> ${CMAKE_DL_LIBS})
  add_dependencies(${name} pinheap)
  target_include_directories(${name} PRIVATE ${PROJECT_BINARY_DIR}/include)
  set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  # pinheap switched on, the safety switches (which would beat it) unset.
  set_tests_properties(${name} PROPERTIES
    LABELS "noasan"
    ENVIRONMENT "${PINHEAP_MODE_VAR}=on"
    ENVIRONMENT_MODIFICATION
      "${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_DISABLE}=unset:;FAKEROOTKEY=unset:;FAKED_MODE=unset:;SANDBOX_ON=unset:")
endfunction()

pinheap_add_interposing_test(test_events ${CMAKE_CURRENT_LIST_DIR}/test_events.c)
