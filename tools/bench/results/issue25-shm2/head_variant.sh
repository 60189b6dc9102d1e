#!/bin/sh
# head_variant.sh BUILD OUT -- builds OUT/shm_bench from tools/bench/shm/shm_bench.c
# with the parts of a split message swapped: the sender copies the head of
# the message (the part its fill wrote first, the coldest in its cache) and
# the receiver the tail.  For sweep.py --also head=OUT/shm_bench.
set -e
here=$(cd "$(dirname "$0")" && pwd)
src=$here/../../shm/shm_bench.c
build=$(cd "$1" && pwd)
mkdir -p "$2"
sed -e 's|memcpy(dst + r, buf + r, n - r);|memcpy(dst, buf, n - r);|' \
    -e 's|memcpy(buf, src, msg.split);|memcpy(buf + n - msg.split, src + n - msg.split, msg.split);|' \
    "$src" > "$2/shm_bench_head.c"
test "$(diff "$src" "$2/shm_bench_head.c" | grep -c '^>')" = 2
mpicc -O2 -Wall -o "$2/shm_bench" "$2/shm_bench_head.c" -DPINHEAP_BENCH_PREFIX=pinheap_ \
  -L"$build/tools/events_bench" -Wl,--no-as-needed -leventscore \
  -Wl,-rpath,"$build/tools/events_bench" -ldl
