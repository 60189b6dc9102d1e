# packaging.cmake -- the packaging tests (shell scripts), included by
# test/CMakeLists.txt.  Main entry point: the add_test() calls below.
#
#   install_consumer  cmake --install into a temp prefix; build and run
#                     test/consumer/ with find_package, pkg-config and a plain
#                     --whole-archive line
#   nm_prefix         every defined global symbol carries the prefix, for this
#                     build and for a second one with PINHEAP_PREFIX=phalt_;
#                     public API present and exported; archive is PIC
#   compat_link       -lopenmpi_malloc links and defines nothing
#   shared_refused    -DBUILD_SHARED_LIBS=ON fails at configure, explaining why
#
# All carry the label `packaging`.  install_consumer and compat_link also
# carry `noasan`: they link programs against the archive without sanitizer
# flags, which an ASan+UBSan archive cannot do (its objects need the
# sanitizer runtime; -z defs fails), and they test link lines, not runtime
# behaviour.  test/run.sh excludes `noasan` in its ASan+UBSan pass; there
# nm_prefix still checks the instrumented archive's symbols.
set(PINHEAP_PKG_TEST_DIR ${CMAKE_CURRENT_SOURCE_DIR})

add_test(NAME install_consumer
  COMMAND bash ${PINHEAP_PKG_TEST_DIR}/install_consumer.sh
          ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${PINHEAP_PREFIX}
          ${CMAKE_COMMAND} ${CMAKE_C_COMPILER})

# nm_prefix's allow-list, generated from hooks/intercept/symbols.h at build time.
add_executable(nm_allowlist_gen ${PINHEAP_PKG_TEST_DIR}/nm_allowlist_gen.c)
target_include_directories(nm_allowlist_gen PRIVATE ${PROJECT_SOURCE_DIR}
  ${PROJECT_SOURCE_DIR}/allocator)
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
