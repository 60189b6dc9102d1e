#!/bin/sh
# consumer_cost.sh -- instructions per release for each consumer pinheap
# feeds (tools/events_bench/consumer_cost.c), by callgrind at two counts:
# (total(2N) - total(N)) / N, the start-up cancelling out.  valgrind's
# --smc-check=all sees the fixture patcher's rewrite of libc's code;
# PINHEAP_MODE=on keeps pinheap in charge under valgrind.
# usage: consumer_cost.sh TEST_BUILD_DIR [N]   (default N 10000)
set -eu
build=$1 n=${2:-10000}
prog=$build/consumer_cost
[ -x "$prog" ] || { echo "SKIP: $prog not built (a plain build with the tests)"; exit 0; }
command -v valgrind > /dev/null || { echo "SKIP: valgrind not found"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total() {
  PINHEAP_MODE=on valgrind --tool=callgrind --smc-check=all --callgrind-out-file="$out/cg" \
    "$prog" "$1" "$2" > /dev/null 2>&1 || { echo "failed: $prog $1 $2" >&2; return 1; }
  sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$out/cg"
}
for c in none listener opal patcher; do
  a=$(total "$c" "$n") && b=$(total "$c" $((2 * n))) || { echo "$c: not measured"; continue; }
  echo "$c: $(( (b - a) / n )) instructions per map+munmap pair"
done
