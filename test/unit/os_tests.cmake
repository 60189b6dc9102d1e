# os_tests.cmake -- the OS layer's contract where no other test reaches it:
# the shared heap's region mappings made, counted and never reported, the
# region's free pages reported first.  Included by test/CMakeLists.txt (the unit folder).
pinheap_add_criterion_test(test_os ${CMAKE_CURRENT_LIST_DIR}/test_os.c)
