# smoke.cmake -- the CI checks of the benchmark suite, run by ctest with
# `cmake -DMODE=<smoke|usage|runner> ... -P smoke.cmake`.  Main entry point:
# the MODE dispatch at the bottom.
#
#   smoke   every workload once at a tiny scale, 1 and 2 threads, on glibc and,
#           when PRELOAD names the pinheap preload shim, on pinheap; each run
#           must exit 0, print one result line per workload and report the
#           malloc it was supposed to get (on pinheap: pinheap_enabled() = 1).  The callgrind probe runs once too.
#   usage   bad command lines of both programs get exit status 64 (2 for a
#           failed --expect-malloc) and a message naming the bad value.
#   runner  run.py rejects bad options by name, and a tiny real run on glibc
#           writes its table, CSV and JSON.
#   verify  under the deliberately broken allocator BROKEN (broken.c), each
#           workload that can see the fault exits with status 2 and says
#           what was wrong; with no fault selected every workload passes.
#   tokens  the regcache variants on PRELOAD (pinheap): callbacks, tokens,
#           and ucx when BENCH_UCX names pinheap-bench-ucx, each at a tiny
#           scale at 1 and 2 threads; tokens refused off pinheap and ucx
#           refused by pinheap-bench, with the reason; then
#           regcache_tokens.py (RUNNER) at a tiny scale writes its table.

cmake_minimum_required(VERSION 3.20)

function(bench_fail_test)
  string(JOIN "" msg ${ARGN})
  message(FATAL_ERROR "${msg}")
endfunction()

# bench_expect(<exit code> <stderr regex> <command...>)
function(bench_expect code regex)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(JOIN " " cmd ${ARGN})
  if(NOT rc STREQUAL "${code}")
    bench_fail_test("`${cmd}` exited with '${rc}', expected ${code}\nstdout: ${out}\nstderr: ${err}")
  endif()
  if(NOT err MATCHES "${regex}")
    bench_fail_test("`${cmd}` printed on stderr:\n${err}\nwhich does not match: ${regex}")
  endif()
endfunction()

# The smoke run for one allocator: env_args are the `cmake -E env` arguments.
function(bench_smoke_allocator label expect)
  set(env_args ${ARGN})
  execute_process(COMMAND ${BENCH} list RESULT_VARIABLE rc OUTPUT_VARIABLE listing)
  if(NOT rc EQUAL 0)
    bench_fail_test("`${BENCH} list` failed with ${rc}")
  endif()
  string(REGEX MATCHALL "(^|\n)[a-z_]+" names "${listing}")
  list(TRANSFORM names STRIP)
  list(LENGTH names nworkloads)
  if(nworkloads LESS 12)
    bench_fail_test("`${BENCH} list` names ${nworkloads} workloads, expected at least 12:\n${listing}")
  endif()

  foreach(threads 1 2)
    execute_process(
      COMMAND ${CMAKE_COMMAND} -E env ${env_args} ${BENCH} all 0.01 ${threads} --expect-malloc ${expect}
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      bench_fail_test("${label}: `pinheap-bench all 0.01 ${threads}` exited with '${rc}'\nstdout: ${out}\nstderr: ${err}")
    endif()
    # Every line names its malloc, and says whether pinheap served it:
    # 1 on the shim (0 would be glibc under pinheap's name), null on glibc.
    if(label STREQUAL "pinheap")
      set(enabled 1)
    else()
      set(enabled null)
    endif()
    foreach(name ${names})
      if(NOT out MATCHES "\"workload\":\"${name}\",\"threads\":${threads},[^\n]*\"malloc_lib\":\"[^\"]*${expect}[^\"]*\",\"pinheap_enabled\":${enabled}[,}]")
        bench_fail_test("${label}: no result line for workload '${name}' at ${threads} threads "
                        "served by a malloc from '${expect}' with pinheap_enabled ${enabled} (a "
                        "pinheap shim that forwards every call to glibc shows 0; see "
                        "`LD_PRELOAD=${PRELOAD} pinheap-info`) in:\n${out}")
      endif()
    endforeach()
    # regcache learns of releases through pinheap's listener under pinheap and
    # through its seccomp trap elsewhere; on glibc (which munmaps its large
    # buffers) the trap must have seen releases and invalidated entries.
    if(label STREQUAL "pinheap")
      set(observer pinheap_listener)
      set(seen "[0-9]+")
    else()
      set(observer seccomp)
      set(seen "[1-9][0-9]*")
    endif()
    if(NOT out MATCHES "\"workload\":\"regcache\"[^\n]*\"observer\":\"${observer}\",\"lookups\":[1-9][0-9]*,\"hits\":[0-9]+,\"hit_rate\":[0-9.]+,\"invalidations\":${seen},[^\n]*\"release_events\":${seen},")
      bench_fail_test("${label}: the regcache line at ${threads} threads does not show observer "
                      "'${observer}' with lookups, and invalidations and release events matching "
                      "'${seen}':\n${out}")
    endif()
    message(STATUS "${label}: ${nworkloads} workloads at ${threads} thread(s): ok")
  endforeach()

  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ${env_args} ${PAIR} 1000 --expect-malloc ${expect}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "\"pairs\":1000,")
    bench_fail_test("${label}: `pinheap-bench-pair 1000` exited with '${rc}'\nstdout: ${out}\nstderr: ${err}")
  endif()
endfunction()

function(bench_mode_smoke)
  bench_smoke_allocator(glibc "libc.so" --unset=LD_PRELOAD)
  # glibc with the old leave-pinned fallback: nothing trimmed, no mmap'd
  # blocks in the main thread's arena.
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD ${BENCH} regcache 0.01 1 --glibc-fallback
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "\"glibc_fallback\":true,\"extra\":{\"observer\":\"seccomp\"")
    bench_fail_test("`pinheap-bench regcache 0.01 1 --glibc-fallback` exited with '${rc}' or "
                    "printed no fallback line\nstdout: ${out}\nstderr: ${err}")
  endif()
  if(PRELOAD)
    if(NOT EXISTS "${PRELOAD}")
      bench_fail_test("the preload shim '${PRELOAD}' does not exist; build the pinheap-preload target")
    endif()
    get_filename_component(shim_name "${PRELOAD}" NAME)
    # Variables that legitimately switch the shim off are cleared: here it must be on.
    bench_smoke_allocator(pinheap "${shim_name}" "LD_PRELOAD=${PRELOAD}"
      --unset=PINHEAP_MODE --unset=OMPI_MCA_mpi_leave_pinned
      --unset=OMPI_MCA_mpi_leave_pinned_pipeline --unset=OMPI_MCA_memory_ptmalloc2_disable
      --unset=FAKEROOTKEY --unset=FAKED_MODE --unset=SANDBOX_ON)
    # Under valgrind pinheap leaves malloc to glibc unless PINHEAP_MODE=on: the
    # pair probe must refuse to count glibc's pairs under pinheap's name, and
    # count pinheap's when told (run.py's callgrind figure depends on both).
    find_program(VALGRIND valgrind)
    if(VALGRIND)
      bench_expect(2 "[a-z_]*enabled[(][)] is 0: its malloc forwards to glibc"
        ${CMAKE_COMMAND} -E env "LD_PRELOAD=${PRELOAD}" --unset=PINHEAP_MODE
          ${VALGRIND} -q --tool=none ${PAIR} 100 --expect-malloc ${shim_name})
      execute_process(
        COMMAND ${CMAKE_COMMAND} -E env "LD_PRELOAD=${PRELOAD}" PINHEAP_MODE=on
          ${VALGRIND} -q --tool=none ${PAIR} 100 --expect-malloc ${shim_name}
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
      if(NOT rc EQUAL 0 OR NOT out MATCHES "\"pinheap_enabled\":1}")
        bench_fail_test("pair probe under valgrind with PINHEAP_MODE=on: exit '${rc}', "
                        "expected 0 and pinheap_enabled 1\nstdout: ${out}\nstderr: ${err}")
      endif()
    else()
      message(STATUS "valgrind not installed: the pair probe's valgrind check was not run")
    endif()
  else()
    # Said as a skip (ctest SKIP_REGULAR_EXPRESSION), never passed quietly.
    message(STATUS "SKIP: no pinheap preload shim in this build: the workloads ran on glibc only, "
                   "pinheap was not benchmarked")
  endif()
endfunction()

function(bench_mode_usage)
  bench_expect(64 "missing WORKLOAD" ${BENCH})
  bench_expect(64 "unknown workload 'nosuch'" ${BENCH} nosuch 1 1)
  bench_expect(64 "SCALE 'abc' is not a number" ${BENCH} churn abc 1)
  bench_expect(64 "SCALE 0 is out of range" ${BENCH} churn 0 1)
  bench_expect(64 "SCALE 1e9 is out of range" ${BENCH} churn 1e9 1)
  bench_expect(64 "THREADS 'x' is not an integer" ${BENCH} churn 1 x)
  bench_expect(64 "THREADS 0 is out of range" ${BENCH} churn 1 0)
  bench_expect(64 "THREADS 999 is out of range" ${BENCH} churn 1 999)
  bench_expect(64 "missing THREADS after WORKLOAD 'churn'" ${BENCH} churn 1)
  bench_expect(64 "unknown option '--bogus'" ${BENCH} churn 1 1 --bogus)
  bench_expect(64 "unexpected extra argument 'extra'" ${BENCH} churn 1 1 extra)
  bench_expect(2 "malloc resolves to '[^']*libc[^']*', expected a file matching 'no-such-allocator'"
               ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD ${BENCH} fixed 0.001 1 --expect-malloc no-such-allocator)
  bench_expect(64 "N 'abc' is not valid" ${PAIR} abc)
  bench_expect(64 "N '0' is not valid" ${PAIR} 0)
  bench_expect(2 "expected a file matching 'no-such-allocator'"
               ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD ${PAIR} 10 --expect-malloc no-such-allocator)
endfunction()

# Runs run.py on glibc with ${common} and ARGN; its table.md must hold each
# of the wants (a list of plain strings); the table is left in `table`.
macro(bench_runner_table what wants)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD ${PYTHON} ${RUNNER} ${common} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    bench_fail_test("run.py ${what} exited with '${rc}'\nstdout: ${out}\nstderr: ${err}")
  endif()
  file(READ ${OUT}/table.md table)
  foreach(want IN ITEMS ${wants})
    string(FIND "${table}" "${want}" at)
    if(at LESS 0)
      bench_fail_test("${OUT}/table.md lacks '${want}':\n${table}")
    endif()
  endforeach()
endmacro()

function(bench_mode_runner)
  set(common --bench ${BENCH} --pair ${PAIR} --out ${OUT})
  bench_expect(2 "--runs: '0' is out of range" ${PYTHON} ${RUNNER} ${common} --runs 0)
  bench_expect(2 "--threads: 'x' is not an integer" ${PYTHON} ${RUNNER} ${common} --threads 1,x)
  bench_expect(2 "--workloads: unknown workload 'nosuch'" ${PYTHON} ${RUNNER} ${common} --workloads nosuch)
  bench_expect(2 "--allocators: unknown allocator 'nosuch'" ${PYTHON} ${RUNNER} ${common} --allocators glibc,nosuch)
  bench_expect(2 "--pinheap: '/nonexistent/libpinheap-preload.so' does not exist"
               ${PYTHON} ${RUNNER} ${common} --pinheap /nonexistent/libpinheap-preload.so)
  bench_expect(2 "--scale: 'big' is not a number" ${PYTHON} ${RUNNER} ${common} --scale big)
  bench_expect(2 "--many-threads: 'x' is not an integer" ${PYTHON} ${RUNNER} ${common} --many-threads 8,x)

  file(REMOVE_RECURSE ${OUT})
  bench_runner_table("quick run" "| fixed | 1 |;| fixed | 2 |;| frag | 2 |;geometric mean"
    --quick --runs 1 --scale 0.01 --allocators glibc --workloads fixed,frag --threads 1,2
    --no-chart --pairs 2000)
  foreach(f table.md summary.csv summary.json runs.csv)
    if(NOT EXISTS ${OUT}/${f})
      bench_fail_test("run.py did not write ${OUT}/${f}")
    endif()
  endforeach()
  file(STRINGS ${OUT}/runs.csv rows)
  list(LENGTH rows nrows)
  if(NOT nrows EQUAL 5)   # header + 2 workloads x 2 thread counts x 1 run
    bench_fail_test("${OUT}/runs.csv has ${nrows} lines, expected 5")
  endif()
  # Which malloc each run was measured on: glibc's, every row.
  list(REMOVE_AT rows 0)
  foreach(row ${rows})
    if(NOT row MATCHES "libc[.]so")
      bench_fail_test("${OUT}/runs.csv: a glibc run did not run on glibc's malloc: ${row}")
    endif()
  endforeach()

  # The rows at --many-threads: only the --many-workloads ones.
  bench_runner_table("--many-threads run" "| fixed | 1 |;| larson | 1 |;| larson | 3 |;| geometric mean | 3 |"
    --runs 1 --scale 0.01 --allocators glibc --workloads fixed,larson --threads 1
    --many-threads 3 --many-workloads larson --no-chart --no-callgrind)
  string(FIND "${table}" "| fixed | 3 |" at)
  if(NOT at LESS 0)
    bench_fail_test("${OUT}/table.md has a fixed row at 3 threads (not a --many-workloads one):\n${table}")
  endif()

  # The regcache table, with glibc's old leave-pinned fallback beside glibc.
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD
      ${PYTHON} ${RUNNER} ${common} --runs 1 --scale 0.01 --allocators glibc,glibc_fallback
      --workloads regcache --threads 1 --no-chart --no-callgrind
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    bench_fail_test("run.py regcache run exited with '${rc}'\nstdout: ${out}\nstderr: ${err}")
  endif()
  file(READ ${OUT}/table.md table)
  foreach(want "\n[|] glibc [|] 1 [|] [0-9.]+ [|] [0-9.]+ [|] 0?[.][0-9]+ [|] [0-9]+ [|] [1-9][0-9]* / "
               "\n[|] glibc_fallback [|] 1 [|] [0-9.]+ [|] [0-9.]+ [|] 0?[.][0-9]+ [|] [0-9]+ [|] [0-9]+ / [0-9]+ [|] [1-9][0-9]* / [0-9]+ [|] [0-9.]+ [|] seccomp [|]")
    if(NOT table MATCHES "${want}")
      bench_fail_test("${OUT}/table.md has no regcache row matching '${want}':\n${table}")
    endif()
  endforeach()

  # scaling.py: both sweeps, tiny, on glibc: tables and slopes written.
  file(REMOVE_RECURSE ${OUT}/scaling)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD
      ${PYTHON} ${SCALING} --bench ${BENCH} --out ${OUT}/scaling --runs 1 --max-live-mib 4 --fit-from-mib 1
      --threads 1,3 --thread-workloads live --thread-scale 0.01 --allocators glibc --no-chart
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT EXISTS ${OUT}/scaling/scaling.md)
    bench_fail_test("scaling.py tiny run exited with '${rc}'\nstdout: ${out}\nstderr: ${err}")
  endif()
  file(READ ${OUT}/scaling/scaling.md scaling)
  foreach(want "\n[|] 1 [|] [0-9.]+ / [0-9.]+ [|]" "\n[|] 4 [|] [0-9.]+ / [0-9.]+ [|]"
               "\n[|] 3 [|] [0-9.]+ / [0-9.]+ [|]"
               "fit on 1,4 MiB[)] [|] -?[0-9.]+ / -?[0-9.]+ [|]" "slope time / RSS[*][*] [|] -?[0-9.]+ / -?[0-9.]+ [|]" "above --max-live-mib 4")
    if(NOT scaling MATCHES "${want}")
      bench_fail_test("${OUT}/scaling/scaling.md lacks '${want}':\n${scaling}")
    endif()
  endforeach()
  bench_expect(2 "--max-live-mib: '0' is out of range" ${PYTHON} ${SCALING} --bench ${BENCH} --max-live-mib 0)
  bench_expect(2 "--sweeps: unknown sweep 'bogus'" ${PYTHON} ${SCALING} --bench ${BENCH} --sweeps bogus)
endfunction()

# bench_verify_case(<fault> <workload> <scale> <threads> <stderr regex>)
function(bench_verify_case fault workload scale threads regex)
  bench_expect(2 "pinheap-bench: ${workload}: [^\n]*${regex}"
    ${CMAKE_COMMAND} -E env BENCH_BROKEN=${fault} LD_PRELOAD=${BROKEN}
      ${BENCH} ${workload} ${scale} ${threads} --expect-malloc bench-broken-malloc)
endfunction()

function(bench_mode_verify)
  # No fault: the shim itself is harmless, so the failures below are the faults'.
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=BENCH_BROKEN LD_PRELOAD=${BROKEN}
      ${BENCH} all 0.02 1 --expect-malloc bench-broken-malloc
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    bench_fail_test("workloads fail under the broken shim with no fault selected (${rc}):\n${err}")
  endif()

  # Two owners of one block: caught by marks, tags and batch checks.
  set(handed_twice "(overwritten or handed out twice|blocks of one batch overlap)")
  foreach(w churn prodcons smallobj fixed frag large tree larson)
    bench_verify_case(overlap ${w} 0.05 1 "${handed_twice}")
  endforeach()
  foreach(w churn prodcons tree larson live)
    bench_verify_case(overlap ${w} 0.05 2 "${handed_twice}")
  endforeach()
  bench_verify_case(overlap live 0.05 1 "${handed_twice}")
  bench_verify_case(overlap regcache 0.05 1 "${handed_twice}")
  # Two threads: whether an alias falls on a block it fits depends on the
  # interleaving, so enough messages that some always do (~30 chances).
  bench_verify_case(overlap regcache 0.3 2 "${handed_twice}")
  bench_verify_case(overlap largechurn 0.5 1 "${handed_twice}")
  # realloc that drops the contents.
  bench_verify_case(nocopy realloc 0.05 1 "realloc lost data")
  bench_verify_case(nocopy realloc 0.05 2 "realloc lost data")
  # malloc returning NULL: a clear message from every workload, never a crash.
  foreach(w churn prodcons falseshare_active falseshare_passive smallobj fixed frag tree larson)
    bench_verify_case(null ${w} 0.05 2 "alloc\\(.*\\) returned NULL")
  endforeach()
  foreach(w realloc large)
    bench_verify_case(null ${w} 0.5 1 "alloc\\(.*\\) returned NULL")
  endforeach()
  bench_verify_case(null live 0.05 2 "alloc\\(.*\\) returned NULL")
  bench_verify_case(null regcache 0.2 2 "alloc\\(.*\\) returned NULL")
  # The fallback is glibc's: refused on any other malloc.
  bench_expect(64 "--glibc-fallback needs glibc's malloc, but malloc resolves to '[^']*bench-broken-malloc"
    ${CMAKE_COMMAND} -E env --unset=BENCH_BROKEN LD_PRELOAD=${BROKEN} ${BENCH} regcache 0.01 1 --glibc-fallback)
  bench_expect(2 "BENCH_REGCACHE_OBSERVER='bogus'; expected 'auto' or 'seccomp'"
    ${CMAKE_COMMAND} -E env BENCH_REGCACHE_OBSERVER=bogus ${BENCH} regcache 0.01 1)
endfunction()

function(bench_mode_tokens)
  if(PRELOAD STREQUAL "")
    message("SKIP: no pinheap preload shim: the tokens variant needs pinheap")
    return()
  endif()
  set(variants callbacks tokens)
  if(NOT BENCH_UCX STREQUAL "")
    list(APPEND variants ucx)
  endif()
  foreach(v ${variants})
    set(prog ${BENCH})
    if(v STREQUAL "ucx")
      set(prog ${BENCH_UCX})
    endif()
    foreach(threads 1 2)
      execute_process(
        COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=${PRELOAD} BENCH_REGCACHE_CACHE=${v}
                ${prog} regcache 0.02 ${threads} --expect-malloc pinheap
        RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
      if(NOT rc EQUAL 0 OR NOT out MATCHES "\"lookups\":120,\"hits\":[1-9][0-9]*,[^\n]*\"cache\":\"${v}\",\"hit_ns\":[0-9.]+,")
        bench_fail_test("regcache ${v} at ${threads} threads exited with '${rc}' or printed no "
                        "line with 120 lookups, hits and cache ${v}\nstdout: ${out}\nstderr: ${err}")
      endif()
    endforeach()
  endforeach()
  bench_expect(2 "BENCH_REGCACHE_CACHE=tokens needs pinheap's preload shim"
    ${CMAKE_COMMAND} -E env --unset=LD_PRELOAD BENCH_REGCACHE_CACHE=tokens ${BENCH} regcache 0.01 1)
  bench_expect(2 "BENCH_REGCACHE_CACHE=ucx needs pinheap-bench-ucx"
    ${CMAKE_COMMAND} -E env BENCH_REGCACHE_CACHE=ucx ${BENCH} regcache 0.01 1)
  bench_expect(2 "BENCH_REGCACHE_CACHE='bogus' is not one of callbacks, tokens, ucx"
    ${CMAKE_COMMAND} -E env BENCH_REGCACHE_CACHE=bogus ${BENCH} regcache 0.01 1)
  # The runner, one run of each at a tiny scale: the table has a row per
  # variant (ucx's a SKIP with its reason when pinheap-bench-ucx is missing).
  get_filename_component(build ${BENCH} DIRECTORY)
  get_filename_component(build ${build}/../.. ABSOLUTE)
  execute_process(
    COMMAND ${PYTHON} ${RUNNER} --build ${build} --pinheap ${PRELOAD} --runs 1 --scale 0.02
            --out ${OUT}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    bench_fail_test("regcache_tokens.py exited with '${rc}'\nstdout: ${out}\nstderr: ${err}")
  endif()
  file(READ ${OUT}/table.md table)
  foreach(want "\n[|] callbacks [|] pinheap_listener [|]" "\n[|] tokens [|] pinheap_watch [|]"
               "\n[|] ucx [|] (ucm_events|SKIP) [|]")
    if(NOT table MATCHES "${want}")
      bench_fail_test("${OUT}/table.md has no row matching '${want}':\n${table}")
    endif()
  endforeach()
  message(STATUS "regcache variants (${variants}) and regcache_tokens.py: ok")
endfunction()

if(MODE STREQUAL "smoke")
  bench_mode_smoke()
elseif(MODE STREQUAL "usage")
  bench_mode_usage()
elseif(MODE STREQUAL "runner")
  bench_mode_runner()
elseif(MODE STREQUAL "verify")
  bench_mode_verify()
elseif(MODE STREQUAL "tokens")
  bench_mode_tokens()
else()
  message(FATAL_ERROR "smoke.cmake: MODE='${MODE}', expected smoke, usage, runner, verify or tokens")
endif()
