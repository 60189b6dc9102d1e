# watch_tests.cmake -- watches, the validity tokens of hooks/watch/watch.c.
#   test_watch          every kind of release through pinheap's interposers
#                       (pinheap_add_interposing_test of events_tests.cmake:
#                       label noasan, libasan's malloc must stay first there),
#                       a million watches, a signal's release inside watch(),
#                       handlers, fork
#   test_watch_threads  threads watching while others release (pinheap's own
#                       releases: destroy_mspace), fork beside a thread inside
#                       watch(); pinheap_core only, so it runs under ASan and
#                       in the TSan pass (PINHEAP_TSAN_TESTS)
pinheap_add_interposing_test(test_watch ${CMAKE_CURRENT_LIST_DIR}/test_watch.c)
pinheap_add_criterion_test(test_watch_threads ${CMAKE_CURRENT_LIST_DIR}/test_watch_threads.c)
target_include_directories(test_watch_threads PRIVATE ${PROJECT_BINARY_DIR}/include)

# pinheap-info shows the live watches: a "watches:" line under the support
# level and "watches": {"live": N} in the JSON (none live in pinheap-info).
if(TARGET pinheap-info)
  add_test(NAME pinheap_info_watches
    COMMAND sh -c "env -i \"$1\" | grep -E '^  watches: 0 live ' && env -i \"$1\" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d[\"watches\"] == {\"live\": 0}, d.get(\"watches\")
print(\"json-watches-ok\")
'" sh $<TARGET_FILE:pinheap-info>)
  set_tests_properties(pinheap_info_watches PROPERTIES LABELS noasan
    PASS_REGULAR_EXPRESSION "watches: 0 live .*\njson-watches-ok\n$")
  # with the audit on: the unannounced releases seen (none here), the line
  # under "watches:" and the JSON object's other keys
  add_test(NAME pinheap_info_watches_audit
    COMMAND sh -c "env -i PINHEAP_AUDIT=1 \"$1\" | grep -E -A1 '^  watches: 0 live ' && env -i PINHEAP_AUDIT=1 \"$1\" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d[\"watches\"] == {\"live\": 0, \"audit\": True, \"unannounced\": 0, \"unaudited\": 0}, d.get(\"watches\")
print(\"json-audit-ok\")
'" sh $<TARGET_FILE:pinheap-info>)
  set_tests_properties(pinheap_info_watches_audit PROPERTIES LABELS noasan
    PASS_REGULAR_EXPRESSION "watches: 0 live [^\n]*\n  audit \\(PINHEAP_AUDIT\\): 0 unannounced releases seen, 0 watches unaudited\njson-audit-ok\n$")
endif()

# test_audit: the kernel-backed audit (hooks/watch/audit.c) with
# PINHEAP_AUDIT=1: raw-syscall munmap, madvise, mremap and process_madvise
# of watched ranges caught, announced releases not counted, threads
# releasing beside the reader, fork and exec; a skip with the reason where
# userfaultfd is not permitted.
pinheap_add_interposing_test(test_audit ${CMAKE_CURRENT_LIST_DIR}/test_audit.c)
target_link_libraries(test_audit PRIVATE Threads::Threads)
set_property(TEST test_audit APPEND PROPERTY ENVIRONMENT "PINHEAP_AUDIT=1")
set_tests_properties(test_audit PROPERTIES SKIP_REGULAR_EXPRESSION "test_audit: SKIP: userfaultfd")
