# config_tests.cmake -- the configuration table (config/params*.c) seen from a
# whole process and from the info tool.
#
# test_config links libpinheap.a whole after pinheap_core, its symbols
# exported, as test_events does: its malloc family and memory calls are
# pinheap's entry points.  Each ctest runs one suite of it under its own
# environment (see test_config.c for the TEST_CONFIG_* variables):
#   test_config_align_<n>_<on|off>  PINHEAP_MALLOC_ALIGN (or its MCA alias)
#                                   with pinheap enabled and disabled
#   test_config_events_off[_alias]  PINHEAP_EVENTS=0 (or its MCA alias)
# Plain passes only (label noasan): under ASan libasan's malloc must stay
# first in the process.
# pinheap-info's configuration section is checked as text and as JSON.

pinheap_add_criterion_program(test_config ${CMAKE_CURRENT_LIST_DIR}/test_config.c)
target_link_libraries(test_config PRIVATE $<TARGET_FILE:pinheap> ${CMAKE_DL_LIBS})
add_dependencies(test_config pinheap)
target_include_directories(test_config PRIVATE ${PROJECT_BINARY_DIR}/include
  ${PROJECT_SOURCE_DIR}/config)
target_compile_options(test_config PRIVATE -fno-builtin)
set_target_properties(test_config PROPERTIES ENABLE_EXPORTS ON)
# Not registered as it is: its suites run only from the tests below, each
# under its variables.

set(_config_unset
  "${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_DISABLE}=unset:" "FAKEROOTKEY=unset:"
  "FAKED_MODE=unset:" "SANDBOX_ON=unset:" "PINHEAP_MALLOC_ALIGN=unset:"
  "${PINHEAP_PARAM_PREFIX}memory_pinheap_malloc_align=unset:" "PINHEAP_EVENTS=unset:"
  "${PINHEAP_PARAM_PREFIX}memory_pinheap_events=unset:")

# pinheap_config_test(NAME FILTER ENV...): one suite of test_config, under
# ENV; the variables of _config_unset that ENV does not set are unset.
function(pinheap_config_test name filter)
  set(_unset)
  foreach(u ${_config_unset})
    string(REGEX REPLACE "=unset:$" "" _var "${u}")
    set(_given 0)
    foreach(e ${ARGN})
      if(e MATCHES "^${_var}=")
        set(_given 1)
      endif()
    endforeach()
    if(NOT _given)
      list(APPEND _unset "${u}")
    endif()
  endforeach()
  add_test(NAME ${name} COMMAND test_config --jobs 2 --short-filename --filter=${filter})
  set_tests_properties(${name} PROPERTIES LABELS "config;noasan" TIMEOUT 300
    ENVIRONMENT "${ARGN}" ENVIRONMENT_MODIFICATION "${_unset}")
endfunction()

foreach(mode on off)
  if(mode STREQUAL "on")
    set(_enabled 1)
  else()
    set(_enabled 0)
  endif()
  pinheap_config_test(test_config_align_64_${mode} "align/*"
    "${PINHEAP_MODE_VAR}=${mode}" "PINHEAP_MALLOC_ALIGN= 64 " "TEST_CONFIG_ALIGN=64"
    "TEST_CONFIG_ENABLED=${_enabled}")
  pinheap_config_test(test_config_align_4096_${mode} "align/*"
    "${PINHEAP_MODE_VAR}=${mode}" "${PINHEAP_PARAM_PREFIX}memory_pinheap_malloc_align=4096"
    "TEST_CONFIG_ALIGN=4096" "TEST_CONFIG_ENABLED=${_enabled}")
  # the default: the tables untouched, 16 as always
  pinheap_config_test(test_config_align_16_${mode} "align/*"
    "${PINHEAP_MODE_VAR}=${mode}" "TEST_CONFIG_ALIGN=16" "TEST_CONFIG_ENABLED=${_enabled}")
endforeach()

pinheap_config_test(test_config_events_off "events_off/*"
  "${PINHEAP_MODE_VAR}=on" "PINHEAP_EVENTS=0" "TEST_CONFIG_EVENTS_VAR=PINHEAP_EVENTS"
  "${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_LEAVE_PINNED}=1")
pinheap_config_test(test_config_events_off_alias "events_off/*"
  "${PINHEAP_MODE_VAR}=on" "${PINHEAP_PARAM_PREFIX}memory_pinheap_events=no"
  "TEST_CONFIG_EVENTS_VAR=${PINHEAP_PARAM_PREFIX}memory_pinheap_events"
  "${PINHEAP_PARAM_PREFIX}${PINHEAP_PARAM_LEAVE_PINNED}=1")

# Open MPI's habits end to end (a build with its prefix): mpi_leave_pinned = 1
# in $HOME/.openmpi/mca-params.conf and no variable set.  The first malloc
# reads the file and pinheap is enabled (PINHEAP_NAME(enabled)); without it
# the runtime rule would say no (an empty probe root).
if(PINHEAP_PARAM_PREFIX STREQUAL "OMPI_MCA_")
  set(_ompi_home ${CMAKE_CURRENT_BINARY_DIR}/ompi-home)
  set(_ompi_root ${CMAKE_CURRENT_BINARY_DIR}/ompi-root-empty)
  file(WRITE ${_ompi_home}/.openmpi/mca-params.conf
    "# as Open MPI users write it\nmpi_leave_pinned = 1\n")
  file(MAKE_DIRECTORY ${_ompi_root})
  set(_ompi_unset "PINHEAP_MODE=unset:" "OMPI_MCA_memory_pinheap_mode=unset:"
    "OMPI_MCA_mpi_leave_pinned=unset:" "OMPI_MCA_mpi_leave_pinned_pipeline=unset:"
    "OMPI_MCA_opal_leave_pinned=unset:" "OMPI_MCA_opal_leave_pinned_pipeline=unset:"
    "OMPI_MCA_mca_base_param_files=unset:" ${_config_unset})
  add_test(NAME test_config_param_file COMMAND test_config --jobs 2 --short-filename
    --filter=align/*)
  set_tests_properties(test_config_param_file PROPERTIES LABELS "config;noasan" TIMEOUT 300
    ENVIRONMENT "HOME=${_ompi_home};OPAL_SYSCONFDIR=/nonexistent;PINHEAP_PROBE_ROOT=${_ompi_root};TEST_CONFIG_ALIGN=16;TEST_CONFIG_ENABLED=1"
    ENVIRONMENT_MODIFICATION "${_ompi_unset}")
  if(TARGET pinheap-info)
    # and pinheap-info names the file and line as the value's source
    add_test(NAME pinheap_info_param_file
      COMMAND sh -c "env -i HOME=\"$1\" OPAL_SYSCONFDIR=/nonexistent PINHEAP_PROBE_ROOT=\"$2\" \"$3\" 2>&1; echo \"exit=$?\"" sh
              ${_ompi_home} ${_ompi_root} $<TARGET_FILE:pinheap-info>)
    set_tests_properties(pinheap_info_param_file PROPERTIES LABELS "config;noasan"
      PASS_REGULAR_EXPRESSION
      "\n  OMPI_MCA_mpi_leave_pinned +yes +unset +[^\n]*/ompi-home/\\.openmpi/mca-params\\.conf:2: mpi_leave_pinned=\"1\"\n.*\nthis process: enabled: mpi_leave_pinned=1 \\([^\n]*/ompi-home/\\.openmpi/mca-params\\.conf:2\\) \\(pinheap serves malloc\\)\n.*exit=0\n$")
  endif()
endif()

# What a boolean accepts: Open MPI's spellings too with its prefix.
if(PINHEAP_PARAM_PREFIX STREQUAL "OMPI_MCA_")
  set(_config_bool_words "1, 0, true, false, yes, no, t, f, y, n, enabled or disabled")
else()
  set(_config_bool_words "1, 0, true, false, yes or no")
endif()
if(TARGET pinheap-info)
  # Text: each parameter's row (name, value, default, source) and its alias
  # line; an alias that set a value is named as its source.
  add_test(NAME pinheap_info_config_text
    COMMAND sh -c "env -i ${PINHEAP_PARAM_PREFIX}memory_pinheap_log_level=info PINHEAP_MALLOC_ALIGN=48 PINHEAP_EVENTS=0 \"$1\" 2>&1; echo \"exit=$?\"" sh
            $<TARGET_FILE:pinheap-info>)
  set_tests_properties(pinheap_info_config_text PROPERTIES LABELS "config;noasan"
    PASS_REGULAR_EXPRESSION
    "\nconfiguration \\(a PINHEAP_ name wins over its MCA alias when both are set\\):\n  parameter +value +default +source\n.*  ${PINHEAP_MODE_VAR} +auto +auto +default\n    alias ${PINHEAP_PARAM_PREFIX}memory_pinheap_mode; accepts on, off, auto[^\n]*\n.*  PINHEAP_LOG_LEVEL +info +warn +${PINHEAP_PARAM_PREFIX}memory_pinheap_log_level=\"info\"\n    alias ${PINHEAP_PARAM_PREFIX}memory_pinheap_log_level; accepts fatal, error, warn, info, debug or 0 to 4\n  PINHEAP_EVENTS +false +true +PINHEAP_EVENTS=\"0\"\n    alias ${PINHEAP_PARAM_PREFIX}memory_pinheap_events; accepts ${_config_bool_words}\n  PINHEAP_MALLOC_ALIGN +16 +16 +invalid: PINHEAP_MALLOC_ALIGN=\"48\" \\(ignored\\)\n    alias ${PINHEAP_PARAM_PREFIX}memory_pinheap_malloc_align; accepts a power of two from 16 to 4096\n.*support level: none \\(0\\) after the self-test\n  PINHEAP_EVENTS=0: the memory events are off.*exit=0\n$")

  # JSON: every parameter of the table, with alias, value, default, source,
  # variable, raw and what is accepted; a conflict is flagged.
  add_test(NAME pinheap_info_config_json
    COMMAND sh -c "env -i PINHEAP_ARENA_MAX=8 \"$2\"=3 PINHEAP_CODE_PATCH=1 \"$3\"=yes ${PINHEAP_PARAM_PREFIX}memory_pinheap_malloc_align=256 \"$1\" --json 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin)[\"configuration\"]
assert len(c) == int(sys.argv[1]), sorted(c)
for name, e in c.items():
    assert set(e) == {\"alias\", \"value\", \"default\", \"source\", \"variable\", \"file\", \"raw\", \"alias_ignored\", \"accepted\"}, e
    assert e[\"accepted\"], e
a = c[\"PINHEAP_ARENA_MAX\"]
assert a[\"value\"] == \"8\" and a[\"source\"] == \"PINHEAP_ARENA_MAX\" and a[\"raw\"] == \"8\", a
l = c[\"PINHEAP_LOG_LEVEL\"]
assert l[\"value\"] == \"info\" and l[\"default\"] == \"warn\" and l[\"source\"] == l[\"alias\"] == l[\"variable\"], l
p = c[\"PINHEAP_CODE_PATCH\"]
assert p[\"value\"] == \"true\" and p[\"source\"] == \"PINHEAP_CODE_PATCH\" and p[\"alias_ignored\"] is True, p
m = c[\"PINHEAP_MALLOC_ALIGN\"]
assert m[\"value\"] == \"256\" and m[\"default\"] == \"16\" and m[\"source\"] == m[\"alias\"], m
e = c[\"PINHEAP_EVENTS\"]
assert e[\"value\"] == \"true\" and e[\"source\"] == \"default\" and e[\"variable\"] is None and e[\"raw\"] is None, e
assert c[\"FAKEROOTKEY\"][\"alias\"] is None, c[\"FAKEROOTKEY\"]
print(\"config-json-ok\")
' \"$4\"" sh
            $<TARGET_FILE:pinheap-info> ${PINHEAP_PARAM_PREFIX}memory_pinheap_log_level
            ${PINHEAP_PARAM_PREFIX}memory_pinheap_code_patch 16)
  set_tests_properties(pinheap_info_config_json PROPERTIES LABELS "config;noasan"
    PASS_REGULAR_EXPRESSION "^config-json-ok\n$")
endif()

if(TARGET pinheap-info)
  # Every row of the one table is shown: the process's in "configuration",
  # the shared heap's in "shm" (its "params"), each once, and a shared
  # heap's value or invalid value as its row holds it.
  add_test(NAME pinheap_info_table_rows
    COMMAND sh -c "env -i PINHEAP_SHM_TIMEOUT=250 SM_RANKS=0 PINHEAP_PROBE_ROOT=/nonexistent \"$1\" --json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
c, s = j[\"configuration\"], j[\"shm\"][\"params\"]
assert len(c) == int(sys.argv[1]), sorted(c)
assert list(s) == [\"PINHEAP_SHM_SIZE\", \"SM_SIZE\", \"PINHEAP_SHM_RANKS\", \"SM_RANKS\", \"PINHEAP_SHM_JOB\", \"PINHEAP_SHM_FALLBACK\", \"PINHEAP_SHM_TIMEOUT\"], s
assert not set(c) & set(s), set(c) & set(s)
assert s[\"PINHEAP_SHM_TIMEOUT\"] == chr(34) + \"250\" + chr(34), s
assert s[\"SM_RANKS\"].startswith(chr(34) + \"0\" + chr(34) + \" is invalid, expected a whole number from 1 to 4096\"), s
assert s[\"PINHEAP_SHM_SIZE\"] == \"not set\", s
print(\"table-rows-ok\")
' \"$2\"" sh
            $<TARGET_FILE:pinheap-info> 16)
  set_tests_properties(pinheap_info_table_rows PROPERTIES LABELS "config;noasan"
    PASS_REGULAR_EXPRESSION "^table-rows-ok\n$")
endif()
