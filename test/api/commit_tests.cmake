# commit_tests.cmake -- out-of-memory semantics and commit charge: requests
# glibc refuses are refused the same way, and pinheap's metadata
# reservations cost no commit, in the heuristic and the strict overcommit
# mode.
#
# test_commit switches vm.overcommit_memory to 2 for the few milliseconds a
# child of it runs (root only; it skips otherwise, and always restores the
# old value).  Under strict overcommit other processes -- ASan programs
# above all, which reserve terabytes of shadow -- may fail to map memory, so
# ctest runs it alone (RUN_SERIAL) and Criterion runs its tests one by one.
add_executable(test_commit ${CMAKE_CURRENT_LIST_DIR}/test_commit.c)
target_link_libraries(test_commit PRIVATE pinheap_core PkgConfig::CRITERION)
target_compile_definitions(test_commit PRIVATE _GNU_SOURCE)
target_include_directories(test_commit PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/test
  ${PROJECT_SOURCE_DIR}/test/lib)
add_test(NAME test_commit COMMAND test_commit --jobs 1 --short-filename)
set_tests_properties(test_commit PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
