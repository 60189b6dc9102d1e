# patch_tests.cmake -- code patching of libc's entry points (hooks/patch.c,
# hooks/install.c): test/unit/test_patch.c, one scenario per test (patch_cycles
# also labelled stress), and
# test/fixture/patch_dlclose.c (a dlopen'ed core library stays loaded after
# dlclose).  test_patch links libpinheap.a with its symbols exported and
# libpatch_fix.so (test/fixture/patch_fix.c).  Plain builds only: under a
# sanitizer nothing is patched (install_tool()).  Off x86-64 each test
# exits 77 (skipped, with the reason printed).
if(PINHEAP_SANITIZER)
  return()
endif()

add_library(patch_fix SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fixture/patch_fix.c)
target_link_libraries(patch_fix PRIVATE ${CMAKE_DL_LIBS})

add_executable(test_patch ${CMAKE_CURRENT_LIST_DIR}/test_patch.c)
pinheap_setup_target(test_patch)
target_compile_options(test_patch PRIVATE -fno-builtin)
target_link_libraries(test_patch PRIVATE $<TARGET_FILE:pinheap> -Wl,--no-as-needed patch_fix
                      ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(test_patch pinheap)
set_target_properties(test_patch PROPERTIES ENABLE_EXPORTS ON)

add_executable(patch_dlclose ${CMAKE_CURRENT_SOURCE_DIR}/fixture/patch_dlclose.c)
target_compile_definitions(patch_dlclose PRIVATE DEMOCORE_PATH="$<TARGET_FILE:democore>")
target_link_libraries(patch_dlclose PRIVATE ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(patch_dlclose democore)

set(_patch_clean "${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_DISABLE}=unset:"
  "FAKEROOTKEY=unset:" "FAKED_MODE=unset:" "SANDBOX_ON=unset:" "PINHEAP_PATCH=unset:")
# (ENVIRONMENT_MODIFICATION applies after ENVIRONMENT: the variables a test
# sets are not in this list)
foreach(t events glibc nopatch nopatch_off stress foreign taken quiet lazy)
  set(_arg ${t})
  set(_env "${PINHEAP_MODE_VAR}=on")
  if(t STREQUAL "glibc")
    set(_env "${PINHEAP_MODE_VAR}=off")
  elseif(t STREQUAL "nopatch")
    set(_env "${PINHEAP_MODE_VAR}=on" "PINHEAP_CODE_PATCH=0")
  elseif(t STREQUAL "nopatch_off")
    set(_arg nopatch)
    set(_env "${PINHEAP_MODE_VAR}=off" "PINHEAP_CODE_PATCH=0")
  elseif(t STREQUAL "stress" OR t STREQUAL "foreign" OR t STREQUAL "quiet")
    set(_env "${PINHEAP_MODE_VAR}=on" "PINHEAP_CODE_PATCH=0")
  elseif(t STREQUAL "taken")
    set(_env "${PINHEAP_MODE_VAR}=on" "PATCHFIX_TAKE_SHMDT=1")
  endif()
  add_test(NAME patch_${t} COMMAND test_patch ${_arg} 20000)
  set_tests_properties(patch_${t} PROPERTIES LABELS "noasan;patch" TIMEOUT 300
    ENVIRONMENT "${_env}" ENVIRONMENT_MODIFICATION "${_patch_clean}"
    FAIL_REGULAR_EXPRESSION "FAIL " SKIP_RETURN_CODE 77)
endforeach()

# patch and undo cycles with the calling threads parked between phases
# (test_patch cycles): a stress test, so it runs in the PINHEAP_DEBUG=2
# pass too.  Not under TSan: no patch test is built under a sanitizer.
add_test(NAME patch_cycles COMMAND test_patch cycles 2000)
set_tests_properties(patch_cycles PROPERTIES LABELS "noasan;patch;stress" TIMEOUT 300
  ENVIRONMENT "${PINHEAP_MODE_VAR}=on;PINHEAP_CODE_PATCH=0"
  ENVIRONMENT_MODIFICATION "${_patch_clean}" FAIL_REGULAR_EXPRESSION "FAIL " SKIP_RETURN_CODE 77)

foreach(t plain threads)
  add_test(NAME patch_dlclose_${t} COMMAND patch_dlclose ${t})
  set_tests_properties(patch_dlclose_${t} PROPERTIES LABELS "noasan;patch" TIMEOUT 120
    ENVIRONMENT "${PINHEAP_MODE_VAR}=on" ENVIRONMENT_MODIFICATION "${_patch_clean}"
    FAIL_REGULAR_EXPRESSION "FAIL " SKIP_RETURN_CODE 77)
endforeach()
add_test(NAME patch_dlclose_reloc COMMAND patch_dlclose reloc)
set_tests_properties(patch_dlclose_reloc PROPERTIES LABELS "noasan;patch" TIMEOUT 120
  ENVIRONMENT "${PINHEAP_MODE_VAR}=on;PINHEAP_CODE_PATCH=0" ENVIRONMENT_MODIFICATION "${_patch_clean}"
  FAIL_REGULAR_EXPRESSION "FAIL " SKIP_RETURN_CODE 77)
