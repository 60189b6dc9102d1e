# reloc_tests.cmake -- the relocation patcher (hooks/intercept/reloc.c) in one
# process: test_reloc (a plain program printing PASS/FAIL per check, exit 1
# on any failure) with its fixtures (test/fixture/relocfix.h):
#   librelocfix_pin.so  hooks/intercept/reloc.c + allocator/base/error.c as the archive
#                       compiles them: the stand-in for pinheap's object;
#   librelocfix_a.so    linked at start-up, -z relro -z now;
#   librelocfix_b.so    dlopen'ed by the test, lazy binding.
# Labelled noasan: the test's malloc
# wrapper forwards to __libc_malloc, which cannot share a process with
# ASan's malloc interceptors.  Not in the tsan label (the TSan pass skips it).
set(PINHEAP_RELOCFIX_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fixture)

add_library(relocfix_pin SHARED ${PINHEAP_RELOCFIX_DIR}/relocfix_pin.c
  ${PROJECT_SOURCE_DIR}/hooks/intercept/reloc.c ${PROJECT_SOURCE_DIR}/hooks/intercept/reloc_elf.c
  ${PROJECT_SOURCE_DIR}/hooks/intercept/reloc_loads.c ${PROJECT_SOURCE_DIR}/allocator/base/error.c)
pinheap_setup_target(relocfix_pin)
target_include_directories(relocfix_pin PRIVATE ${PINHEAP_RELOCFIX_DIR})

add_library(relocfix_a SHARED ${PINHEAP_RELOCFIX_DIR}/relocfix_a.c)
target_compile_options(relocfix_a PRIVATE -fno-builtin-malloc)
target_link_options(relocfix_a PRIVATE -Wl,-z,relro -Wl,-z,now -Wl,--hash-style=sysv)

add_library(relocfix_b SHARED ${PINHEAP_RELOCFIX_DIR}/relocfix_b.c)
target_compile_options(relocfix_b PRIVATE -fno-builtin-malloc)
target_link_options(relocfix_b PRIVATE -Wl,-z,relro -Wl,-z,lazy)

add_executable(test_reloc ${CMAKE_CURRENT_LIST_DIR}/test_reloc.c)
# its fixture header, as "fixture/relocfix.h"
target_include_directories(test_reloc PRIVATE ${PROJECT_SOURCE_DIR}/test)
target_compile_options(test_reloc PRIVATE -fno-builtin-malloc -fno-builtin-free -Wall -Wextra)
target_compile_definitions(test_reloc PRIVATE _GNU_SOURCE RELOCFIX_B_PATH="$<TARGET_FILE:relocfix_b>")
target_link_libraries(test_reloc PRIVATE relocfix_a relocfix_pin ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(test_reloc relocfix_b)

add_test(NAME test_reloc COMMAND test_reloc)
set_tests_properties(test_reloc PROPERTIES TIMEOUT 300 LABELS "noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")

# test_reloc_nopie: the start-up resolve in a program linked without PIE
# that takes a libc function's address (a canonical PLT entry: dlsym's
# answer is the program's, not libc's).
add_executable(test_reloc_nopie ${CMAKE_CURRENT_LIST_DIR}/test_reloc_nopie.c)
target_include_directories(test_reloc_nopie PRIVATE ${PROJECT_SOURCE_DIR}/test)
target_compile_options(test_reloc_nopie PRIVATE -fno-pie -Wall -Wextra)
target_link_options(test_reloc_nopie PRIVATE -no-pie)
target_link_libraries(test_reloc_nopie PRIVATE relocfix_pin ${CMAKE_DL_LIBS})
add_test(NAME test_reloc_nopie COMMAND test_reloc_nopie)
set_tests_properties(test_reloc_nopie PROPERTIES TIMEOUT 60 LABELS "noasan"
  FAIL_REGULAR_EXPRESSION "FAIL " SKIP_REGULAR_EXPRESSION "^SKIP")
