#!/usr/bin/env bash
# run_fuzz.sh -- runs one libFuzzer harness for ctest (test/fuzz/fuzz_tests.cmake).
# Main entry point: the command line below.
#
# Usage:
#   run_fuzz.sh corpus BINARY SEED_DIR
#       runs every seed input once (no mutation); fails on any crash
#   run_fuzz.sh fuzz BINARY SEED_DIR WORK_DIR SECONDS [libFuzzer flags...]
#       fuzzes for SECONDS, starting from the seeds; new inputs go to
#       WORK_DIR/corpus, a crashing input to WORK_DIR/crashes/ (its path is
#       printed), never into the source tree
#   run_fuzz.sh skip REASON
#       clang or libFuzzer was missing at configure time: prints REASON and
#       exits 77 (ctest: skipped), or 1 when CI=true (CI installs them)
set -euo pipefail

usage() { sed -n '/^# Usage:/,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; }

mode=${1:-}
case $mode in
  skip)
    echo "fuzz: SKIPPED: ${2:-no reason given}"
    if [[ ${CI:-} == true ]]; then
      echo "fuzz: CI=true and the fuzzers cannot build: .ci/run installs clang and libclang-rt-14-dev, check it" >&2
      exit 1
    fi
    exit 77
    ;;
  corpus)
    [[ $# -eq 3 ]] || { usage; exit 2; }
    bin=$2 seeds=$3
    [[ -d $seeds ]] || { echo "fuzz: seed directory '$seeds' not found" >&2; exit 2; }
    n=$(find "$seeds" -type f | wc -l)
    ((n > 0)) || { echo "fuzz: no seed inputs in '$seeds'" >&2; exit 1; }
    echo "fuzz: running $n seed inputs of $seeds through $(basename "$bin")"
    # -runs=0: execute the corpus once, do not mutate
    exec "$bin" -runs=0 -timeout=60 "$seeds"
    ;;
  fuzz)
    [[ $# -ge 5 ]] || { usage; exit 2; }
    bin=$2 seeds=$3 work=$4 secs=$5
    shift 5
    [[ $secs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: SECONDS='$secs' is not a positive integer" >&2; exit 2; }
    mkdir -p "$work/corpus" "$work/crashes"
    echo "fuzz: $(basename "$bin") for ${secs}s; new inputs in $work/corpus, crashes in $work/crashes/"
    rc=0
    "$bin" -max_total_time="$secs" -timeout=30 -max_len=4096 -print_final_stats=1 \
      -artifact_prefix="$work/crashes/" "$@" "$work/corpus" "$seeds" || rc=$?
    if ((rc != 0)); then
      echo "fuzz: $(basename "$bin") FAILED (exit $rc); the input is in $work/crashes/:" >&2
      ls -l "$work/crashes/" >&2 || true
      echo "fuzz: replay it with: $bin <file>   (see test/fuzz/README.md)" >&2
    fi
    exit "$rc"
    ;;
  *)
    usage
    exit 2
    ;;
esac
