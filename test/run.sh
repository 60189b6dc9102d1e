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
# Every pass always runs; the exit status is non-zero if any step of any
# failed.  Build directories are reused (incremental).
#
# Usage: test/run.sh [--no-asan]
#   --no-asan   skip the ASan+UBSan pass (quicker local runs; CI runs both)
# Environment: CMAKE (default cmake), CTEST (default ctest), JOBS (default 2).
set -euo pipefail

usage() { sed -n '/^# Usage:/,/^# Environment:/p' "$0" | sed 's/^# \{0,1\}//' >&2; }

run_asan=1
for arg in "$@"; do
  case $arg in
    --no-asan) run_asan=0 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$arg' (expected --no-asan or --help)" >&2; usage; exit 2 ;;
  esac
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
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

# ctest_counted DIR ARGS... -- runs ctest, keeps its output, and adds its
# "N tests failed out of M" to the totals of the closing line.
total_passed=0
total_failed=0
ctest_counted() {
  local dir=$1 log rc=0 line
  shift
  log=$(mktemp)
  "$ctest_bin" --test-dir "$dir" "$@" > "$log" 2>&1 || rc=$?
  cat "$log"
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    total_failed=$((total_failed + BASH_REMATCH[1]))
    total_passed=$((total_passed + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
  rm -f "$log"
  return "$rc"
}

# run_pass LABEL BUILD_DIR CTEST_EXTRA -- CMAKE_ARGS...
run_pass() {
  local label=$1 dir=$2 ctest_extra=$3
  shift 3
  [[ ${1:-} == -- ]] && shift
  step "$label: configure $dir" "$cmake_bin" -S . -B "$dir" "$@" || return 0
  step "$label: build $dir" "$cmake_bin" --build "$dir" -j"$jobs" || return 0
  # shellcheck disable=SC2086  # ctest_extra is a list of words on purpose
  step "$label: ctest $dir" ctest_counted "$dir" --output-on-failure -j"$jobs" $ctest_extra || return 0
}

run_pass default build ""
run_pass prefix build-prefix "" -- -DPINHEAP_PREFIX=zz_
if ((run_asan)); then
  run_pass asan build-asan "-LE noasan" -- -DPINHEAP_SANITIZE=ON
else
  summary+=("SKIP  0s  asan: --no-asan given")
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
