# fuzz_tests.cmake -- the libFuzzer harnesses of test/fuzz/, built with clang
# whatever compiler builds the archive.
# Main entry point: pinheap_add_fuzzer().
#
#   fuzz_ops          operation sequences over the prefixed API and mspaces
#                     (growing and fixed-region) against the shadow model
#   fuzz_params       the environment parameters and the leave-pinned decision
#
# The harness and the archive's core sources (PINHEAP_CORE_SOURCES: never
# hooks/replace.c, so the fuzzer's own malloc stays ASan's) are compiled with
# clang -fsanitize=fuzzer(-no-link),address,undefined, with the include
# directories and definitions of pinheap_setup_target().  Each harness gets two
# tests: <name>_corpus (every seed once) and <name> (seeds, then a bounded
# fuzzing run).  Labels: fuzz, noasan (the ASan pass rebuilds with gcc's ASan;
# these carry their own, and are not even configured there).
#
# Cache settings:
#   PINHEAP_FUZZ_CLANG        the clang to use (found on PATH)
#   PINHEAP_FUZZ_SECONDS_OPS / _PARAMS   length of the bounded runs
#   PINHEAP_FUZZ_EXTRA_FLAGS  added when compiling the archive's sources,
#                             e.g. -fno-sanitize=pointer-overflow to explore
#                             past a known finding (see test/fuzz/README.md)
# When clang or libFuzzer is missing, one test (fuzz_skipped) says so: a
# skip locally, a failure with CI=true.

set(PINHEAP_FUZZ_SECONDS_OPS 60 CACHE STRING "Seconds of fuzzing in the fuzz_ops test")
set(PINHEAP_FUZZ_SECONDS_PARAMS 20 CACHE STRING "Seconds of fuzzing in the fuzz_params test")
set(PINHEAP_FUZZ_EXTRA_FLAGS "" CACHE STRING
    "Extra clang flags for the archive's sources in the fuzzers (a list)")
find_program(PINHEAP_FUZZ_CLANG NAMES clang clang-14
  DOC "clang with libFuzzer, for the fuzzers of test/fuzz/")

set(_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})
set(_fuzz_run ${_fuzz_dir}/run_fuzz.sh)
set(_fuzz_skip "")

if(PINHEAP_SANITIZER)
  # The gcc ASan build: the fuzzers bring their own sanitizers; not built here.
  return()
endif()

if(NOT PINHEAP_FUZZ_CLANG)
  set(_fuzz_skip "no clang found at configure time (apt-get install clang libclang-rt-14-dev)")
else()
  # Can this clang link a libFuzzer program with ASan and UBSan?
  set(_probe_dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz/probe)
  file(MAKE_DIRECTORY ${_probe_dir})
  file(WRITE ${_probe_dir}/probe.c
    "#include <stddef.h>\n#include <stdint.h>\n"
    "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
  execute_process(
    COMMAND ${PINHEAP_FUZZ_CLANG} -fsanitize=fuzzer,address,undefined
            ${_probe_dir}/probe.c -o ${_probe_dir}/probe
    RESULT_VARIABLE _probe_rc OUTPUT_VARIABLE _probe_out ERROR_VARIABLE _probe_out)
  if(NOT _probe_rc EQUAL 0)
    string(REGEX REPLACE "\n.*" "" _probe_first "${_probe_out}")
    string(CONCAT _fuzz_skip "${PINHEAP_FUZZ_CLANG} cannot link -fsanitize=fuzzer,address,undefined "
                  "(${_probe_first}); apt-get install libclang-rt-14-dev")
  endif()
endif()

if(_fuzz_skip)
  message(STATUS "pinheap: fuzzers not built: ${_fuzz_skip}")
  add_test(NAME fuzz_skipped COMMAND bash ${_fuzz_run} skip "${_fuzz_skip}")
  set_tests_properties(fuzz_skipped PROPERTIES LABELS "fuzz;noasan" SKIP_RETURN_CODE 77)
  return()
endif()

# ---- the archive's core sources, compiled once with clang ---------------------
set(_fuzz_common_flags
  -g -O1 -fno-omit-frame-pointer -std=gnu11
  -fsanitize=address,undefined -fno-sanitize-recover=undefined
  -D_GNU_SOURCE -DPINHEAP_DEBUG=${PINHEAP_DEBUG}
  -I${PROJECT_BINARY_DIR}/include -I${PROJECT_SOURCE_DIR}
  -I${PROJECT_SOURCE_DIR}/config)
# As pinheap_setup_target(), plus coverage instrumentation for the fuzzer.
set(_fuzz_core_flags ${_fuzz_common_flags}
  -fsanitize=fuzzer-no-link -fPIC -fvisibility=hidden
  -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
  -fno-builtin-malloc -fno-builtin-free -fno-builtin-calloc -fno-builtin-realloc
  -ftls-model=initial-exec ${PINHEAP_FUZZ_EXTRA_FLAGS})

set(_fuzz_objs)
foreach(src ${PINHEAP_CORE_SOURCES})
  string(REPLACE "/" "_" _obj_name "${src}")
  set(_obj ${CMAKE_CURRENT_BINARY_DIR}/fuzz/obj/${_obj_name}.o)
  add_custom_command(OUTPUT ${_obj}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/fuzz/obj
    COMMAND ${PINHEAP_FUZZ_CLANG} ${_fuzz_core_flags} -MD -MF ${_obj}.d
            -c ${PROJECT_SOURCE_DIR}/${src} -o ${_obj}
    DEPENDS ${PROJECT_SOURCE_DIR}/${src}
    DEPFILE ${_obj}.d
    COMMENT "clang (fuzz) ${src}"
    VERBATIM)
  list(APPEND _fuzz_objs ${_obj})
endforeach()

# pinheap_add_fuzzer(NAME SECONDS) -- test/fuzz/NAME.c + the core objects ->
# NAME, and its two tests.
function(pinheap_add_fuzzer name seconds)
  set(_bin ${CMAKE_CURRENT_BINARY_DIR}/fuzz/${name})
  add_custom_command(OUTPUT ${_bin}
    COMMAND ${PINHEAP_FUZZ_CLANG} ${_fuzz_common_flags} -fsanitize=fuzzer
            -Wall -Wextra -I${PROJECT_SOURCE_DIR}/test/lib -MD -MF ${_bin}.d
            ${_fuzz_dir}/${name}.c ${_fuzz_objs} -o ${_bin} -lpthread -ldl
    DEPENDS ${_fuzz_dir}/${name}.c ${_fuzz_objs}
    DEPFILE ${_bin}.d
    COMMENT "clang (fuzz) link ${name}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${_bin})

  add_test(NAME ${name}_corpus
    COMMAND bash ${_fuzz_run} corpus ${_bin} ${_fuzz_dir}/corpus/${name})
  add_test(NAME ${name}
    COMMAND bash ${_fuzz_run} fuzz ${_bin} ${_fuzz_dir}/corpus/${name}
            ${CMAKE_CURRENT_BINARY_DIR}/fuzz/work/${name} ${seconds})
  set(_tests ${name}_corpus ${name})
  # Reproducers of what the fuzzer found (test/fuzz/crashes/<name>-*): each
  # must now pass.
  file(GLOB _crashes ${_fuzz_dir}/crashes/${name}-*)
  if(_crashes)
    add_test(NAME ${name}_crashes COMMAND ${_bin} -runs=0 -timeout=60 ${_crashes})
    list(APPEND _tests ${name}_crashes)
  endif()
  set_tests_properties(${_tests} PROPERTIES LABELS "fuzz;noasan")
  math(EXPR _timeout "${seconds} + 120")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${_timeout})
endfunction()

pinheap_add_fuzzer(fuzz_ops ${PINHEAP_FUZZ_SECONDS_OPS})
pinheap_add_fuzzer(fuzz_params ${PINHEAP_FUZZ_SECONDS_PARAMS})
