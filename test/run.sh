#!/usr/bin/env bash
# run.sh -- THE test command of pinheap (README.md, .ci/run).  Main entry
# point: run_pass().
#
# From the repository root, in these passes:
#   1. build/       the default build (RelWithDebInfo): configure, build, and
#                   ctest --output-on-failure -j2 (every test).
#   2. build-prefix/ the same with another prefix (-DPINHEAP_PREFIX=zz_): every
#                   test and tool builds and passes whatever the prefix.
#   3. build-asan/  the same with -DPINHEAP_SANITIZE=ON (ASan+UBSan), and its
#                   ctest without the tests labelled `noasan`: tests that link
#                   programs against the archive without sanitizer flags or
#                   run programs under LD_PRELOAD/strace/valgrind, which an
#                   ASan process cannot host (each such test says why in the
#                   .cmake file that registers it).
#   4. build-tsan/  -DPINHEAP_SANITIZE=thread (ThreadSanitizer), tools off,
#                   and its ctest of the tests labelled `tsan` (the tests that
#                   start threads; the list is in test/CMakeLists.txt).  They
#                   run under test/lib/tsan_runner.c, not libcriterion, whose
#                   start-up cannot run under TSan.  Any TSan report fails.
#   5. build-debug2/ -DPINHEAP_DEBUG=2 (the full heap check after every
#                   operation) and its ctest of the randomized tests (label
#                   `stress`) at PINHEAP_TEST_SCALE=0.25.
# Every pass always runs; the exit status is non-zero if any step of any
# failed.  Build directories are reused (incremental).  First, on Debian,
# test/deps.sh installs what the tests need and is missing (apt-get, as root
# or through sudo; nothing when all is there).
#
# Usage: test/run.sh [--no-asan] [--no-tsan] [--quick] [--no-install]
#   --no-asan   skip the ASan+UBSan pass (quicker local runs; CI runs all)
#   --no-tsan   skip the ThreadSanitizer pass
#   --quick     only passes 1 and 2 (skip ASan+UBSan, TSan and debug level 2)
#   --no-install  do not run test/deps.sh (tests whose tools are missing say SKIP)
# Environment: CMAKE (default cmake), CTEST (default ctest), JOBS (default 2).
set -euo pipefail

usage() { sed -n '/^# Usage:/,/^# Environment:/p' "$0" | sed 's/^# \{0,1\}//' >&2; }

run_asan=1
run_tsan=1
run_debug2=1
run_deps=1
for arg in "$@"; do
  case $arg in
    --no-asan) run_asan=0 ;;
    --no-tsan) run_tsan=0 ;;
    --quick) run_asan=0; run_tsan=0; run_debug2=0 ;;
    --no-install) run_deps=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$arg' (expected --no-asan, --no-tsan, --quick, --no-install or --help)" >&2
       usage; exit 2 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if ((run_deps)) && ! test/deps.sh; then
  echo "run.sh: test/deps.sh could not install what the tests need; going on with what" \
       "is here (tests whose tools are missing say SKIP)" >&2
fi
cmake_bin=${CMAKE:-cmake}
ctest_bin=${CTEST:-ctest}
jobs=${JOBS:-2}
if [[ ! $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "run.sh: JOBS='$jobs' is not a positive integer" >&2
  exit 2
fi
for tool in "$cmake_bin" "$ctest_bin"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "run.sh: '$tool' not found; on Debian 12 run .ci/run, or apt-get install cmake" >&2
    exit 1
  fi
done

# Sanitizer reports with stack traces; keep whatever the caller set.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-second_deadlock_stack=1}

summary=()
status=0
start_all=$SECONDS

# step NAME COMMAND... -- runs one step, records its result and duration.
step() {
  local name=$1 t0=$SECONDS rc=0
  shift
  echo
  echo "==== run.sh: $name"
  echo "==== \$ $*"
  "$@" || rc=$?
  local dt=$((SECONDS - t0))
  if ((rc == 0)); then
    summary+=("PASS  ${dt}s  $name")
  else
    summary+=("FAIL  ${dt}s  $name (exit $rc)")
    status=1
  fi
  return "$rc"
}

# ctest_counted DIR ARGS... -- runs ctest (under the environment words of
# $pass_env, VAR=VALUE), keeps its output, and adds its "N tests failed out
# of M" to the totals of the closing line.
total_passed=0
total_failed=0
pass_env=""
ctest_counted() {
  local dir=$1 log rc=0 line
  shift
  log=$(mktemp)
  # shellcheck disable=SC2086  # pass_env is a list of words on purpose
  env $pass_env "$ctest_bin" --test-dir "$dir" "$@" > "$log" 2>&1 || rc=$?
  cat "$log"
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    total_failed=$((total_failed + BASH_REMATCH[1]))
    total_passed=$((total_passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  rm -f "$log"
  return "$rc"
}

# run_pass LABEL BUILD_DIR CTEST_EXTRA [CTEST_ENV] -- CMAKE_ARGS...
# CTEST_EXTRA: words added to ctest's command line; CTEST_ENV: VAR=VALUE
# words in ctest's environment.
run_pass() {
  local label=$1 dir=$2 ctest_extra=$3
  shift 3
  pass_env=""
  if [[ ${1:-} != -- && $# -gt 0 ]]; then
    pass_env=$1
    shift
  fi
  [[ ${1:-} == -- ]] && shift
  step "$label: configure $dir" "$cmake_bin" -S . -B "$dir" "$@" || return 0
  step "$label: build $dir" "$cmake_bin" --build "$dir" -j"$jobs" || return 0
  # shellcheck disable=SC2086  # ctest_extra is a list of words on purpose
  step "$label: ctest $dir" ctest_counted "$dir" --output-on-failure -j"$jobs" $ctest_extra || return 0
}

run_pass default build "" -- -DPINHEAP_BUILD_TESTS=ON
run_pass prefix build-prefix "" -- -DPINHEAP_PREFIX=zz_ -DPINHEAP_BUILD_TESTS=ON
if ((run_asan)); then
  # the test framework's own leaks are not pinheap's (test/lib/lsan.supp)
  run_pass asan build-asan "-LE noasan" "LSAN_OPTIONS=suppressions=$root/test/lib/lsan.supp" -- \
    -DPINHEAP_SANITIZE=ON -DPINHEAP_BUILD_TESTS=ON
else
  summary+=("SKIP  0s  asan: --no-asan or --quick given")
fi
if ((run_tsan)); then
  run_pass tsan build-tsan "-L tsan" -- -DPINHEAP_SANITIZE=thread -DPINHEAP_BUILD_TOOLS=OFF -DPINHEAP_BUILD_TESTS=ON
else
  summary+=("SKIP  0s  tsan: --no-tsan or --quick given")
fi
if ((run_debug2)); then
  run_pass debug2 build-debug2 "-L stress" "PINHEAP_TEST_SCALE=0.25" -- \
    -DPINHEAP_DEBUG=2 -DPINHEAP_BUILD_TOOLS=OFF -DPINHEAP_BUILD_TESTS=ON
else
  summary+=("SKIP  0s  debug2: --quick given")
fi

echo
echo "==== run.sh: summary (total $((SECONDS - start_all))s)"
printf '  %s\n' "${summary[@]}"
if ((status != 0)); then
  echo "run.sh: FAILED" >&2
else
  echo "run.sh: all passed"
fi
# The closing line, every pass together (ctest entries).
echo "tests: $total_passed passed, $total_failed failed"
exit "$status"
