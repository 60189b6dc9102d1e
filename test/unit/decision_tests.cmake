# decision_tests.cmake -- tests of the leave-pinned decision inputs and the
# info tool: parameters (config/params.c), the matrix (hooks/decision.c), the
# driver probe (hooks/probe.c), and pinheap-info run under `env -i`.
# Main entry: the ctests registered below.

set(PINHEAP_DECISION_TEST_DEFS)
if(PINHEAP_PARAM_PREFIX STREQUAL "OMPI_MCA_"
   AND PINHEAP_PARAM_LEAVE_PINNED STREQUAL "mpi_leave_pinned"
   AND PINHEAP_PARAM_LEAVE_PINNED_PIPELINE STREQUAL "mpi_leave_pinned_pipeline"
   AND PINHEAP_PARAM_DISABLE STREQUAL "memory_ptmalloc2_disable"
   AND PINHEAP_MODE_VAR STREQUAL "PINHEAP_MODE"
   AND PINHEAP_PROBE_ROOT_VAR STREQUAL "PINHEAP_PROBE_ROOT")
  # the literal Open MPI names are checked too when the build uses them
  set(PINHEAP_DECISION_TEST_DEFS PINHEAP_TEST_DEFAULT_NAMES=1)
endif()

foreach(t test_params test_decision test_probe)
  pinheap_add_criterion_test(${t} ${CMAKE_CURRENT_LIST_DIR}/${t}.c)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/config ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${t} PRIVATE ${PINHEAP_DECISION_TEST_DEFS})
endforeach()
# The names test_params expects, straight from the cache variables (the
# descriptors get theirs through pinheap_config.h).
target_compile_definitions(test_params PRIVATE
  "TEST_WANT_PREFIX=\"${PINHEAP_PARAM_PREFIX}\""
  "TEST_WANT_LP=\"${PINHEAP_PARAM_LEAVE_PINNED}\""
  "TEST_WANT_LPP=\"${PINHEAP_PARAM_LEAVE_PINNED_PIPELINE}\""
  "TEST_WANT_DISABLE=\"${PINHEAP_PARAM_DISABLE}\""
  "TEST_WANT_MODE=\"${PINHEAP_MODE_VAR}\""
  "TEST_WANT_PROBE_ROOT=\"${PINHEAP_PROBE_ROOT_VAR}\"")
find_package(Threads REQUIRED)
target_link_libraries(test_params PRIVATE Threads::Threads)

# test_params_other_prefix: the same suite on config/params.c built again
# under the other kind of parameter prefix -- MYRT_MCA_ when the build's is
# Open MPI's, else OMPI_MCA_ -- from a pinheap_config.h of its own, so that
# both behaviours are tested in every build: Open MPI's prefix reads its
# parameter files and spellings, any other keeps plain variables.  The
# program's params.c object stands in for the archive's (the linker takes
# no archive member whose symbols are already defined).
if(PINHEAP_PARAM_PREFIX STREQUAL "OMPI_MCA_")
  set(_params_other_prefix MYRT_MCA_)
  set(_params_other_files 0)
else()
  set(_params_other_prefix OMPI_MCA_)
  set(_params_other_files 1)
endif()
function(params_other_prefix_config dir)
  set(PINHEAP_PARAM_PREFIX ${_params_other_prefix})
  set(PINHEAP_PARAM_FILES ${_params_other_files})
  configure_file(${PROJECT_SOURCE_DIR}/config/pinheap_config.h.in ${dir}/pinheap_config.h @ONLY)
endfunction()
set(_params_other_inc ${CMAKE_CURRENT_BINARY_DIR}/params_other_prefix/include)
params_other_prefix_config(${_params_other_inc})
pinheap_add_criterion_test(test_params_other_prefix ${CMAKE_CURRENT_LIST_DIR}/test_params.c
  ${PROJECT_SOURCE_DIR}/config/params.c ${PROJECT_SOURCE_DIR}/config/params_files.c
  ${PROJECT_SOURCE_DIR}/config/params_shm.c)
target_include_directories(test_params_other_prefix BEFORE PRIVATE ${_params_other_inc})
target_include_directories(test_params_other_prefix PRIVATE ${PROJECT_SOURCE_DIR}/config
  ${PROJECT_SOURCE_DIR})
target_compile_definitions(test_params_other_prefix PRIVATE PINHEAP_DEBUG=${PINHEAP_DEBUG}
  "TEST_WANT_PREFIX=\"${_params_other_prefix}\""
  "TEST_WANT_LP=\"${PINHEAP_PARAM_LEAVE_PINNED}\""
  "TEST_WANT_LPP=\"${PINHEAP_PARAM_LEAVE_PINNED_PIPELINE}\""
  "TEST_WANT_DISABLE=\"${PINHEAP_PARAM_DISABLE}\""
  "TEST_WANT_MODE=\"${PINHEAP_MODE_VAR}\""
  "TEST_WANT_PROBE_ROOT=\"${PINHEAP_PROBE_ROOT_VAR}\"")
target_link_libraries(test_params_other_prefix PRIVATE Threads::Threads)

if(TARGET pinheap-info)
  # Fake probe roots: one empty, one with an RDMA verbs device.
  set(info_root_empty ${CMAKE_CURRENT_BINARY_DIR}/info-root-empty)
  set(info_root_rdma ${CMAKE_CURRENT_BINARY_DIR}/info-root-rdma)
  file(MAKE_DIRECTORY ${info_root_empty} ${info_root_rdma}/dev/infiniband)
  file(WRITE ${info_root_rdma}/dev/infiniband/uverbs0 "")
  set(info $<TARGET_FILE:pinheap-info>)

  # pinheap_info_test(NAME EXIT REGEX cmd...): runs cmd (stderr folded into
  # stdout), then prints "exit=<status>"; passes when the output matches
  # REGEX followed by exit=EXIT (PASS_REGULAR_EXPRESSION alone ignores the
  # exit status, so it is checked this way).
  function(pinheap_info_test name exit regex)
    add_test(NAME ${name} COMMAND sh -c "\"$@\" 2>&1; echo \"exit=$?\"" sh ${ARGN})
    # pinheap-info carries the replacement layer: not under ASan, whose
    # malloc comes first (see test/run.sh).
    set_tests_properties(${name} PROPERTIES LABELS noasan
      PASS_REGULAR_EXPRESSION "${regex}.*exit=${exit}\n$")
  endfunction()

  # Text output under a controlled environment: lp=1 decides.
  pinheap_info_test(pinheap_info_text_lp 0
    "decision: enabled\n  reason: mpi_leave_pinned=1 \\(OMPI_MCA_mpi_leave_pinned\\)"
    env -i OMPI_MCA_mpi_leave_pinned=1 ${info} --probe-root ${info_root_empty})

  # "runtime" cells: the probe decides, and the text says so.
  pinheap_info_test(pinheap_info_text_runtime_not_found 0
    "decision: disabled\n  reason: runtime: no OS-bypass driver found"
    env -i ${info} --probe-root ${info_root_empty})
  pinheap_info_test(pinheap_info_text_runtime_found 0
    "dev/infiniband/uverbs<N> +found .*decision: enabled\n  reason: runtime: OS-bypass driver found: [^\n]*/info-root-rdma/dev/infiniband/uverbs0"
    env -i OMPI_MCA_mpi_leave_pinned=-1 ${info} --probe-root ${info_root_rdma})
  # the probe root parameter is used when --probe-root is not given
  pinheap_info_test(pinheap_info_text_probe_root_param 0
    "driver probe \\(root [^\n]*/info-root-rdma\\).*decision: enabled\n  reason: runtime: OS-bypass"
    env -i PINHEAP_PROBE_ROOT=${info_root_rdma} ${info})

  # Unparsable value: warned once, shown raw, counted as not found.
  pinheap_info_test(pinheap_info_text_invalid 0
    "warning: OMPI_MCA_mpi_leave_pinned=\"maybe\" is not a valid value.*OMPI_MCA_mpi_leave_pinned +unset +unset +invalid: OMPI_MCA_mpi_leave_pinned=\"maybe\" \\(ignored\\).*decision: disabled\n  reason: mpi_leave_pinned_pipeline=0"
    env -i OMPI_MCA_mpi_leave_pinned=maybe OMPI_MCA_mpi_leave_pinned_pipeline=0
      ${info} --probe-root ${info_root_rdma})

  # Safety switch, override and --preloaded.
  pinheap_info_test(pinheap_info_text_fakeroot 0
    "decision: disabled\n  reason: disabled by FAKEROOTKEY \\(running under fakeroot\\) \\(PINHEAP_MODE=on does not override it\\)"
    env -i FAKEROOTKEY=1 PINHEAP_MODE=on OMPI_MCA_mpi_leave_pinned=1 ${info})
  pinheap_info_test(pinheap_info_text_preloaded 0
    "decision: enabled\n  reason: preloaded[^\n]*\n  preloaded: yes"
    env -i ${info} --preloaded --probe-root ${info_root_empty})

  # Build settings, support level and mallinfo2 sections are present.
  # Disabled, glibc's malloc: its own releases are seen where libc's entry
  # points are code patched (x86-64), else only MUNMAP.
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    set(_info_disabled_level "FREE\\|CHUNK\\|MUNMAP \\(7\\)")
    set(_info_disabled_flags "FREE\\|CHUNK\\|MUNMAP")
  else()
    set(_info_disabled_level "MUNMAP \\(4\\)")
    set(_info_disabled_flags "MUNMAP")
  endif()
  pinheap_info_test(pinheap_info_text_sections 0
    "^pinheap does not serve malloc \\(glibc's does\\)[;] events ${_info_disabled_flags}[;] why: runtime: no OS-bypass driver found\npinheap [0-9.]+, symbol prefix ${PINHEAP_PREFIX}, parameter prefix ${PINHEAP_PARAM_PREFIX}\n.*  ${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_DISABLE} +false.*this process: disabled: runtime: no OS-bypass driver found \\(pinheap does not serve malloc\\)\nsupport level: ${_info_disabled_level} after the self-test\n  pinheap is disabled.*mallinfo2.*arena +[0-9]+\n"
    env -i ${info} --probe-root ${info_root_empty})

  # JSON: valid (python3 -m json.tool), with awkward raw values escaped.
  add_test(NAME pinheap_info_json_valid
    COMMAND sh -c "env -i OMPI_MCA_mpi_leave_pinned=1 FAKED_MODE= OMPI_MCA_mpi_leave_pinned_pipeline='a\"b\\\\c\ttab' \"$1\" --json --probe-root \"$2\" | python3 -m json.tool && echo json-ok"
            sh ${info} ${info_root_rdma})
  set_tests_properties(pinheap_info_json_valid PROPERTIES LABELS noasan
    PASS_REGULAR_EXPRESSION "\"enabled\": false,.*json-ok\n$")
  # JSON carries the decision and the inputs.
  add_test(NAME pinheap_info_json_decision
    COMMAND sh -c "env -i OMPI_MCA_mpi_leave_pinned=1 \"$1\" --json --probe-root \"$2\" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d[\"decision\"][\"enabled\"] is True, d[\"decision\"]
assert d[\"decision\"][\"reason\"] == \"lp_yes\", d[\"decision\"]
assert d[\"decision\"][\"text\"] == \"mpi_leave_pinned=1 (OMPI_MCA_mpi_leave_pinned)\", d[\"decision\"]
lp = d[\"inputs\"][\"mpi_leave_pinned\"]
assert lp[\"value\"] == \"yes\" and lp[\"source\"] == \"OMPI_MCA_mpi_leave_pinned\" and lp[\"raw\"] == \"1\", lp
lpp = d[\"inputs\"][\"mpi_leave_pinned_pipeline\"]
assert lpp[\"value\"] == \"not found\" and lpp[\"source\"] == \"not set\" and lpp[\"raw\"] is None, lpp
assert d[\"probe\"][\"found\"] is True and d[\"probe\"][\"path\"].endswith(\"/dev/infiniband/uverbs0\"), d[\"probe\"]
assert len(d[\"probe\"][\"checks\"]) == 10, d[\"probe\"]
assert sum(c[\"found\"] for c in d[\"probe\"][\"checks\"]) == 1, d[\"probe\"]
assert d[\"process\"][\"enabled\"] is True, d[\"process\"]
assert d[\"support_level\"][\"measured\"] is True, d[\"support_level\"]
assert d[\"support_level\"][\"value\"] == 7 and d[\"support_level\"][\"flags\"] == \"FREE|CHUNK|MUNMAP\", d[\"support_level\"]
assert isinstance(d[\"mallinfo2\"][\"arena\"], int)
print(\"json-decision-ok\")
'" sh ${info} ${info_root_rdma})
  set_tests_properties(pinheap_info_json_decision PROPERTIES LABELS noasan
    PASS_REGULAR_EXPRESSION "^json-decision-ok\n$")

  # Options: --help exits 0; an unknown option or a missing argument is a
  # usage error on stderr naming it, exit 2.
  pinheap_info_test(pinheap_info_help 0 "usage: pinheap-info" ${info} --help)
  pinheap_info_test(pinheap_info_unknown_option 2
    "^pinheap-info: unknown option '--bogus'\nusage:" ${info} --bogus)
  pinheap_info_test(pinheap_info_probe_root_missing_arg 2
    "^pinheap-info: option '--probe-root' needs a directory\nusage:" ${info} --probe-root)
  pinheap_info_test(pinheap_info_probe_root_relative 2
    "^pinheap-info: --probe-root 'sys' is not an absolute path \\(expected a directory starting with '/'\\)\nusage:"
    ${info} --probe-root sys)
  pinheap_info_test(pinheap_info_version 0
    "^pinheap-info [0-9]+[.][0-9]+[.][0-9]+ \\(symbol prefix ${PINHEAP_PREFIX}, parameter prefix ${PINHEAP_PARAM_PREFIX}\\)\n"
    ${info} --version)
  # The exit status a script can use: 1 when leave-pinned is asked for and
  # not every release is seen (the events off), with the verdict saying so.
  pinheap_info_test(pinheap_info_exit_unsafe 1
    "\npinheap serves malloc[;] events none[;] why: mpi_leave_pinned=1 [^\n]*[;] leave-pinned is asked for but not every release is seen\n"
    env -i OMPI_MCA_mpi_leave_pinned=1 PINHEAP_EVENTS=0 ${info} --probe-root ${info_root_empty})
  # Each section once: no parameter row shown twice.
  add_test(NAME pinheap_info_sections_once
    COMMAND sh -c "env -i \"$1\" --probe-root \"$2\" 2>&1 | grep -E '^[a-z][a-z -]*:' | sort | uniq -d | sed 's/^/twice: /'; env -i \"$1\" --probe-root \"$2\" 2>&1 | grep -c '^  OMPI_MCA_mpi_leave_pinned '"
            sh ${info} ${info_root_empty})
  set_tests_properties(pinheap_info_sections_once PROPERTIES LABELS noasan
    PASS_REGULAR_EXPRESSION "^1\n$" FAIL_REGULAR_EXPRESSION "twice:")
endif()
