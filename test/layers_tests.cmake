# layers_tests.cmake -- the archive's layers, checked (test/layers_check.py):
# allocator/base < config < allocator/os < allocator/heap < allocator/shm <
# allocator/front < allocator/api < hooks, no include, weak declaration or
# archive symbol pointing up, every include naming its folder from the top,
# private headers kept in their folder, mapping calls only in
# allocator/os/os.c.  layers_selftest: a tree with each kind of forbidden
# arrow fails the check, a clean one passes.  Every pass runs them.
# Included by test/CMakeLists.txt.
find_program(PINHEAP_PYTHON3 python3)
add_test(NAME layers
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/layers_check.py ${PROJECT_SOURCE_DIR}
          $<TARGET_FILE:pinheap>)
set_tests_properties(layers PROPERTIES LABELS "layout" FAIL_REGULAR_EXPRESSION "FAIL ")
add_test(NAME layers_selftest
  COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/layers_check.py --selftest)
set_tests_properties(layers_selftest PROPERTIES LABELS "layout" FAIL_REGULAR_EXPRESSION "FAIL ")
