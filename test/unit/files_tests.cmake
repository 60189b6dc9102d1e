# files_tests.cmake -- releases through a file (fallocate, ftruncate,
# truncate) and syscall() (hooks/files.c), end to end.  That no member of
# the archive calls the exported syscall() is checked by
# packaging/packaging.cmake (files_no_internal_syscall).
#
# test_files is built as test_events is (pinheap_add_interposing_test of
# events_tests.cmake, included before this list): libpinheap.a linked
# after pinheap_core and the executable's symbols exported, so this
# process's fallocate, ftruncate, truncate and syscall are pinheap's
# interposers.  Plain passes only (label noasan): under ASan libasan's
# malloc must stay first; the test skips, saying why, where interposition
# did not take.
pinheap_add_interposing_test(test_files ${CMAKE_CURRENT_LIST_DIR}/test_files.c)
