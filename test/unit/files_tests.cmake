# files_tests.cmake -- releases through a file (fallocate, ftruncate,
# truncate) and syscall() (hooks/files.c), end to end.
# Included by test/CMakeLists.txt (its glob of test/*.cmake).
#
# test_files is built as test_events is (pinheap_add_interposing_test of
# events_tests.cmake, included before this list): libpinheap.a linked
# after pinheap_core and the executable's symbols exported, so this
# process's fallocate, ftruncate, truncate and syscall are pinheap's
# interposers.  Plain passes only (label noasan): under ASan libasan's
# malloc must stay first; the test skips, saying why, where interposition
# did not take.
pinheap_add_interposing_test(test_files test_files.c)

# pinheap's own system calls never go through its exported syscall(): no
# member of the archive but replace.c.o may reference `syscall` (internal.h,
# ph_syscall).  A reference would bind, through the core library's PLT, to
# the interposer -- each internal munmap an event again, or a loop.
add_test(NAME files_no_internal_syscall
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/no_internal_syscall.sh $<TARGET_FILE:pinheap>)
set_tests_properties(files_no_internal_syscall PROPERTIES FAIL_REGULAR_EXPRESSION "calls the exported")
