# packaging.cmake -- what is built, installed and linked: the archive's
# symbols and members, the installed package, link lines, build settings.
# Main entry point: the add_test() calls below.
#
#   install_consumer  cmake --install into a temp prefix; build and run
#                     test/consumer/ with find_package, pkg-config and a plain
#                     --whole-archive line
#   nm_prefix         every defined global symbol carries the prefix, for this
#                     build and for a second one with PINHEAP_PREFIX=phalt_;
#                     public API present and exported; archive is PIC
#   compat_link       -lopenmpi_malloc links and defines nothing
#   shared_refused    -DBUILD_SHARED_LIBS=ON fails at configure, explaining why
#   files_no_internal_syscall        no member but replace.c.o references
#                                    the exported syscall() (nm)
#   decision_objects_never_allocate  the start-up path's members reference
#                                    no allocating or stdio function (nm)
#   decision_options_refuse_<var>    bad build settings refused at configure
#   decision_options_refuse_prefix_* a prefix making a reserved or glibc name
#   vendor_subdir, vendor_fetch      pinheap vendored into a runtime: its own
#                                    prefix, nothing added to the parent,
#                                    the parent's install
#   test_regexes_whole               no test expression split at a ';'
#   vendor_fresh                     the README's main job without Criterion;
#                                    the tools installed
#
# The first four carry the label `packaging`.  install_consumer and
# compat_link also carry `noasan`: they link programs against the archive without sanitizer
# flags, which an ASan+UBSan archive cannot do (its objects need the
# sanitizer runtime; -z defs fails), and they test link lines, not runtime
# behaviour.  test/run.sh excludes `noasan` in its ASan+UBSan pass; there
# nm_prefix still checks the instrumented archive's symbols.
set(PINHEAP_PKG_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})

add_test(NAME install_consumer
  COMMAND bash ${PINHEAP_PKG_TEST_DIR}/install_consumer.sh
          ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${PINHEAP_PREFIX}
          ${CMAKE_COMMAND} ${CMAKE_C_COMPILER})

# nm_prefix's allow-list, generated from hooks/intercept/symbols.h at build time.
add_executable(nm_allowlist_gen ${PINHEAP_PKG_TEST_DIR}/nm_allowlist_gen.c)
target_include_directories(nm_allowlist_gen PRIVATE ${PROJECT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR})
set(PINHEAP_NM_ALLOWLIST ${CMAKE_CURRENT_BINARY_DIR}/nm_allowlist.txt)
add_custom_command(OUTPUT ${PINHEAP_NM_ALLOWLIST}
  COMMAND nm_allowlist_gen ${PINHEAP_NM_ALLOWLIST}
  DEPENDS nm_allowlist_gen VERBATIM)
add_custom_target(nm_allowlist ALL DEPENDS ${PINHEAP_NM_ALLOWLIST})

add_test(NAME nm_prefix
  COMMAND bash ${PINHEAP_PKG_TEST_DIR}/nm_prefix.sh
          ${PROJECT_SOURCE_DIR} $<TARGET_FILE:pinheap> ${PINHEAP_PREFIX}
          ${CMAKE_COMMAND} ${CMAKE_C_COMPILER} ${PINHEAP_NM_ALLOWLIST})

add_test(NAME compat_link
  COMMAND bash ${PINHEAP_PKG_TEST_DIR}/compat_link.sh
          ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} $<TARGET_FILE_DIR:openmpi_malloc>
          ${PINHEAP_PREFIX} ${CMAKE_C_COMPILER})

add_test(NAME shared_refused
  COMMAND bash ${PINHEAP_PKG_TEST_DIR}/shared_refused.sh
          ${PROJECT_SOURCE_DIR} ${CMAKE_COMMAND} ${CMAKE_C_COMPILER})

set_tests_properties(install_consumer nm_prefix compat_link shared_refused
  PROPERTIES LABELS "packaging" TIMEOUT 600)
set_tests_properties(install_consumer compat_link
  PROPERTIES LABELS "packaging;noasan")

# pinheap's own system calls never go through its exported syscall(): no
# member of the archive but replace.c.o may reference `syscall` (allocator/base/raw_syscall.h,
# ph_syscall).  A reference would bind, through the core library's PLT, to
# the interposer -- each internal munmap an event again, or a loop.
add_test(NAME files_no_internal_syscall
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/no_internal_syscall.sh $<TARGET_FILE:pinheap>)
set_tests_properties(files_no_internal_syscall PROPERTIES FAIL_REGULAR_EXPRESSION "calls the exported")

# The start-up path never allocates: the archive members of config/params*.c,
# hooks/probe.c and hooks/decision.c must not reference any allocating or
# stdio/locale/directory-stream function (nm -u of each member), and they
# must be there (else the check would prove nothing).
set(deny "malloc|calloc|realloc|reallocarray|free|strdup|strndup|asprintf|vasprintf|opendir|fdopendir|readdir|readdir64|scandir|glob|fopen|fopen64|fdopen|printf|fprintf|sprintf|snprintf|vsnprintf|vfprintf|puts|fputs|fwrite|perror|setlocale|getenv|secure_getenv|realpath|qsort|stdout|stderr")
add_test(NAME decision_objects_never_allocate
  COMMAND sh -c "nm -A \"$1\" > decision_nm.txt || exit 1
    for s in params_get params_eval probe_run decision_make decision_run; do
      grep -Eq \"(params|probe|decision)[.]c[.]o: *[0-9a-f]+ T $2$s\$\" decision_nm.txt || { echo \"MISSING $2$s\"; exit 1; }
    done
    grep -E '(params|params_files|params_shm|probe|decision)[.]c[.]o: +U ' decision_nm.txt | awk '{print $NF}' | sort -u > decision_undef.txt
    grep -qx strlen decision_undef.txt || { echo 'MISSING undefined-symbol list'; exit 1; }
    if grep -Ex '(${deny})' decision_undef.txt; then echo 'BAD: allocating call on the start-up path'; exit 1; fi
    echo no-alloc-ok" sh $<TARGET_FILE:pinheap> ${PINHEAP_PREFIX})
set_tests_properties(decision_objects_never_allocate PROPERTIES
  PASS_REGULAR_EXPRESSION "no-alloc-ok" FAIL_REGULAR_EXPRESSION "BAD|MISSING")

# Bad build settings are refused at configure time with a message naming
# the value and what was expected; so is a prefix that would make pinheap
# define a reserved or a glibc name (config/prefix_check.cmake).  Each
# case: the test's name (after decision_options_refuse_), then VAR=value.
foreach(case "PINHEAP_PARAM_PREFIX|PINHEAP_PARAM_PREFIX=1BAD_"
             "PINHEAP_PARAM_LEAVE_PINNED|PINHEAP_PARAM_LEAVE_PINNED=leavepinned"
             "PINHEAP_MODE_VAR|PINHEAP_MODE_VAR=PINHEAP-MODE"
             "prefix_underscore|PINHEAP_PREFIX=_" "prefix_libc|PINHEAP_PREFIX=__libc_"
             "prefix_posix|PINHEAP_PREFIX=posix_")
  string(REGEX REPLACE "\\|.*" "" bad_id "${case}")
  string(REGEX REPLACE "^[^|]*\\|" "" bad "${case}")
  string(REGEX REPLACE "=.*" "" bad_var "${bad}")
  string(REGEX REPLACE "^[^=]*=" "" bad_value "${bad}")
  set(bad_dir ${CMAKE_CURRENT_BINARY_DIR}/badcfg-${bad_id})
  add_test(NAME decision_options_refuse_${bad_id}
    COMMAND sh -c "rm -rf \"$1\"; cmake -S \"$2\" -B \"$1\" -D\"$3\" -DPINHEAP_BUILD_TESTS=OFF -DPINHEAP_BUILD_TOOLS=OFF 2>&1; echo \"exit=$?\"; rm -rf \"$1\""
            sh ${bad_dir} ${PROJECT_SOURCE_DIR} ${bad})
  set_tests_properties(decision_options_refuse_${bad_id} PROPERTIES
    PASS_REGULAR_EXPRESSION "${bad_var}='${bad_value}' is not a .*[Ee]xpected.*exit=1"
    TIMEOUT 120)
endforeach()

# Vendored (add_subdirectory, FetchContent from a tarball) and fresh-machine
# builds, each a whole configure-build-install (vendor_test.sh says what is
# checked).  noasan: they build and run programs without sanitizer flags.
foreach(mode subdir fetch fresh)
  add_test(NAME vendor_${mode}
    COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/vendor_test.sh ${mode} ${PROJECT_SOURCE_DIR}
            ${CMAKE_CURRENT_BINARY_DIR}/vendor-${mode})
  set_tests_properties(vendor_${mode} PROPERTIES LABELS "packaging;noasan" TIMEOUT 900
    FAIL_REGULAR_EXPRESSION "FAIL:")
endforeach()

# No pass or fail expression holds a ';', which CMake would split into
# alternatives any one of which passes the test (regex_check.py).
add_test(NAME test_regexes_whole
  COMMAND python3 ${CMAKE_CURRENT_LIST_DIR}/regex_check.py ${PROJECT_BINARY_DIR})
set_tests_properties(test_regexes_whole PROPERTIES LABELS packaging FAIL_REGULAR_EXPRESSION "FAIL")
