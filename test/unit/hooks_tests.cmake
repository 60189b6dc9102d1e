# hooks_tests.cmake -- the replacement layer without replace.c: the
# release-listener registry, the dispatch (decision, decision text, the
# pre-decision helpers) and the self-test, in a Criterion process whose
# malloc stays glibc's -- so, unlike the fixture tests, this one runs in the
# ASan+UBSan pass too.
#
# pinheap_hooks_test_objs: the replacement layer's sources but replace.c
# (config/sources.cmake's PINHEAP_REPLACE_SOURCES), compiled as the archive
# compiles them (pinheap_setup_target's settings).  test_hooks links them
# before pinheap_core and supplies what replace.c would (see test_hooks.c).
set(_hooks_test_sources ${PINHEAP_REPLACE_SOURCES})
list(FILTER _hooks_test_sources EXCLUDE REGEX "replace\\.c$")
list(TRANSFORM _hooks_test_sources PREPEND ${PROJECT_SOURCE_DIR}/)
add_library(pinheap_hooks_test_objs OBJECT EXCLUDE_FROM_ALL ${_hooks_test_sources})
pinheap_setup_target(pinheap_hooks_test_objs)

pinheap_add_criterion_test(test_hooks ${CMAKE_CURRENT_LIST_DIR}/test_hooks.c $<TARGET_OBJECTS:pinheap_hooks_test_objs>)
target_include_directories(test_hooks PRIVATE ${PROJECT_BINARY_DIR}/include)
# The test's munmap must be what dlsym(RTLD_DEFAULT, "munmap") finds.
set_target_properties(test_hooks PROPERTIES ENABLE_EXPORTS ON)
# pinheap switched on (the decision text test expects exactly this input);
# the safety switches, which would beat it, are unset.
set_tests_properties(test_hooks PROPERTIES
  ENVIRONMENT "${PINHEAP_MODE_VAR}=on"
  ENVIRONMENT_MODIFICATION
    "${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_DISABLE}=unset:;FAKEROOTKEY=unset:;FAKED_MODE=unset:;SANDBOX_ON=unset:")
