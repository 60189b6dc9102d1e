# fork_tests.cmake -- fork.  test_fork: the allocator's locks held across
# fork() by its atfork handlers, so that children forked while threads
# churn allocate at once (label stress; every pass, the TSan pass too).
# fork_feeds and fork_install: fork while another thread holds one of the
# hooks' locks (hooks/forks.c, hooks/README.md "Fork"); the self-test's case is in
# test_hooks (hooks_tests.cmake).  fork_feeds: the UCX feed's attach, held
# inside a stand-in libucm (test/fixture/fork_ucm.c, built as libucm.so in
# a directory of its own) while the main thread forks; libpinheap.a linked
# into the program whole.  fork_install: the installation of a core library
# (libdemocore.so, replace_tests.cmake) dlopen'ed by a thread, held inside
# it by the program's clock_gettime.  Plain builds only: a program or
# library linking pinheap's malloc family cannot host a sanitizer's.
pinheap_add_criterion_test(test_fork ${CMAKE_CURRENT_LIST_DIR}/test_fork.c)
set_tests_properties(test_fork PROPERTIES LABELS stress)

if(PINHEAP_SANITIZER)
  return()
endif()

add_library(fork_ucm SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixture/fork_ucm.c)
set_target_properties(fork_ucm PROPERTIES OUTPUT_NAME ucm
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fork_ucm)

add_executable(fork_feeds ${CMAKE_CURRENT_SOURCE_DIR}/fixture/fork_feeds.c)
target_compile_definitions(fork_feeds PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX} _GNU_SOURCE)
target_include_directories(fork_feeds PRIVATE ${PROJECT_BINARY_DIR}/include
                           ${CMAKE_CURRENT_SOURCE_DIR}/fixture)
target_compile_options(fork_feeds PRIVATE -fno-builtin)
set_target_properties(fork_feeds PROPERTIES ENABLE_EXPORTS ON)
target_link_libraries(fork_feeds PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:pinheap> -Wl,--no-whole-archive
  ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(fork_feeds pinheap fork_ucm)

add_test(NAME fork_feeds COMMAND fork_feeds $<TARGET_FILE:fork_ucm>)
set_tests_properties(fork_feeds PROPERTIES
  ENVIRONMENT "${PINHEAP_MODE_VAR}=on"
  TIMEOUT 60 LABELS "noasan" FAIL_REGULAR_EXPRESSION "FAIL ")

add_executable(fork_install ${CMAKE_CURRENT_SOURCE_DIR}/fixture/fork_install.c)
target_compile_definitions(fork_install PRIVATE PINHEAP_PREFIX=${PINHEAP_PREFIX} _GNU_SOURCE)
target_include_directories(fork_install PRIVATE ${PROJECT_BINARY_DIR}/include
                           ${CMAKE_CURRENT_SOURCE_DIR}/fixture)
set_target_properties(fork_install PROPERTIES ENABLE_EXPORTS ON)
target_link_libraries(fork_install PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(fork_install democore)

add_test(NAME fork_install COMMAND fork_install $<TARGET_FILE:democore>)
set_tests_properties(fork_install PROPERTIES
  ENVIRONMENT "${PINHEAP_MODE_VAR}=on"
  TIMEOUT 60 LABELS "noasan" FAIL_REGULAR_EXPRESSION "FAIL ")
