# replace_tests.cmake -- the decision and replacement path, end to end,
# through a fixture runtime: libdemocore.so holds libpinheap.a whole (as a
# runtime's core library would), demoapp links it directly, and
# demoapp_transitive reaches it only through libdemompi.so.
set(PINHEAP_FIXTURE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fixture)

add_library(democore SHARED ${PINHEAP_FIXTURE_DIR}/democore.c)
target_link_libraries(democore PRIVATE
  -Wl,--whole-archive $<TARGET_FILE:pinheap> -Wl,--no-whole-archive
  ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(democore pinheap)
set_target_properties(democore PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

add_library(demompi SHARED ${PINHEAP_FIXTURE_DIR}/demompi.c)
target_include_directories(demompi PRIVATE ${PROJECT_BINARY_DIR}/include)
target_link_libraries(demompi PRIVATE democore)
set_target_properties(demompi PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})

add_executable(demoapp ${PINHEAP_FIXTURE_DIR}/demoapp.c)
target_include_directories(demoapp PRIVATE ${PROJECT_BINARY_DIR}/include)
# The app watches what free() does to its globals (through a listener):
# gcc may not assume that free() leaves them alone.
target_compile_options(demoapp PRIVATE -fno-builtin-malloc -fno-builtin-free)
target_link_libraries(demoapp PRIVATE democore)

add_executable(demoapp_transitive ${PINHEAP_FIXTURE_DIR}/demoapp_transitive.c)
target_link_libraries(demoapp_transitive PRIVATE demompi)

find_program(PINHEAP_PYTHON3 python3)
foreach(group matrix switches glibc releases transitive preload)
  add_test(NAME replace_${group}
    COMMAND ${PINHEAP_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/replace_test.py
            ${group} ${PROJECT_BINARY_DIR} ${PINHEAP_PREFIX})
  # Under ASan libasan's malloc comes first in every process: replacement
  # cannot take there, so these run in the plain build only.
  set_tests_properties(replace_${group} PROPERTIES TIMEOUT 900 LABELS "replace;noasan"
    FAIL_REGULAR_EXPRESSION "FAIL ")
endforeach()

# The archive stays correct when built with -flto: a second build of the
# project with link-time optimization runs the matrix and release groups.
add_test(NAME replace_lto
  COMMAND sh -c "set -e; d=$(mktemp -d /tmp/pinheap-lto.XXXXXX); trap 'rm -rf $d $d.log' EXIT; \
    \"$0\" -S \"$1\" -B $d -DCMAKE_C_FLAGS=-flto -DCMAKE_BUILD_TYPE=Release -DPINHEAP_BUILD_TOOLS=OFF > $d.log 2>&1 || { cat $d.log; exit 1; }; \
    \"$0\" --build $d -j2 --target demoapp demoapp_transitive > $d.log 2>&1 || { cat $d.log; exit 1; }; \
    for g in switches glibc releases transitive; do \"$2\" \"$1/test/integration/replace_test.py\" $g $d \"$3\"; done"
    ${CMAKE_COMMAND} ${PROJECT_SOURCE_DIR} ${PINHEAP_PYTHON3} ${PINHEAP_PREFIX})
set_tests_properties(replace_lto PROPERTIES TIMEOUT 900 LABELS "replace;noasan"
  FAIL_REGULAR_EXPRESSION "FAIL ")
