# os_tests.cmake -- the OS layer's contract where no other test reaches it:
# the shared heap's region mappings made, counted and never reported, the
# region's free pages reported first.  Included by test/CMakeLists.txt.
pinheap_add_criterion_test(test_os test_os.c)
