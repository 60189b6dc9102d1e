#!/usr/bin/env python3
"""make_corpus.py -- writes the seed corpus of the fuzzers (test/fuzz/corpus/).

Main entry point: main().  Each seed is a short, readable operation list in
the encoding of fuzz_ops.c / fuzz_params.c (see README.md), chosen to reach
every operation, every heap kind and every parameter from the first run.
Run it from anywhere; it rewrites corpus/fuzz_ops/ and corpus/fuzz_params/.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- fuzz_ops encoding (keep in step with fuzz_op_t in fuzz_ops.c) ----------
OPS = ["malloc", "calloc", "realloc", "realloc_null", "reallocarray", "memalign",
       "posix_memalign", "aligned_alloc", "valloc", "pvalloc", "free", "free2",
       "usable", "verify", "trim", "mallopt", "mallinfo", "create", "create_fixed",
       "destroy", "free_all", "realloc_near"]
EDGE_COUNT = 42     # len(edge_sizes) in fuzz_ops.c


def op(name, slot=0):
    """Operation byte: slot 0 = the global heap, 1..4 = mspace slots."""
    hs = 0 if slot == 0 else slot + 3
    return bytes([OPS.index(name) | hs << 5])


def u32(v):
    return struct.pack(">I", v)


def size(n):
    """A size argument that decodes to exactly n (n < 4 MiB + 64 KiB)."""
    if n <= 64:
        return bytes([0, n])
    if n < 1024:
        return bytes([3]) + u32(n)
    if n < 1024 + 128 * 1024:
        return bytes([5]) + u32(n - 1024)
    return bytes([6]) + u32(n - 64 * 1024)


def edge(i):
    """The i-th entry of edge_sizes."""
    assert 0 <= i < EDGE_COUNT
    return bytes([7, i])


def pick(i):
    return bytes([0, i])


def align_pow2(shift):
    return bytes([shift])


def seed_global():
    s = b""
    for n in (0, 1, 16, 24, 100, 1000, 5000, 70000, 300000, 2000000):
        s += op("malloc") + size(n)
    s += op("calloc") + bytes([3]) + size(4000)            # elem 8
    s += op("realloc") + pick(2) + size(9000)
    s += op("realloc_near") + pick(3) + bytes([0xf0])      # shrink by 16
    s += op("reallocarray") + bytes([4]) + pick(1) + size(640)
    s += op("memalign") + align_pow2(6) + size(200)
    s += op("memalign") + bytes([201]) + size(50)          # 24: not a power of two
    s += op("posix_memalign") + align_pow2(12) + size(5000)
    s += op("posix_memalign") + align_pow2(2) + size(8)    # 4: EINVAL
    s += op("aligned_alloc") + align_pow2(8) + size(256)
    s += op("valloc") + size(100) + op("pvalloc") + size(5000)
    s += op("usable") + pick(5) + op("verify") + pick(6) + op("mallinfo")
    for i in range(6):
        s += op("free") + pick(i)
    s += op("trim") + u32(0) + b"\x00"
    s += op("free_all")
    return s


def seed_mspace():
    s = op("create", 1) + bytes([3])                       # 64 KiB first segment
    for n in (8, 300, 3000, 40000, 200000, 1500000):
        s += op("malloc", 1) + size(n)
    s += op("calloc", 1) + bytes([0]) + size(777)
    s += op("realloc", 1) + pick(1) + size(100000)
    s += op("memalign", 1) + align_pow2(10) + size(100)
    s += op("free", 1) + pick(0) + op("free", 1) + pick(2)
    s += op("trim", 1) + u32(4096) + b"\x00" + op("mallinfo", 1)
    s += op("create", 2) + bytes([0x84])                   # locked, 1 MiB
    s += op("malloc", 2) + size(5000) + op("realloc_null", 2) + size(60)
    s += op("destroy", 1)                                  # with live blocks
    return s


def seed_fixed():
    s = op("create_fixed", 1) + bytes([4]) + b"\x00\x00" + b"\x00"    # whole region
    for _ in range(3):
        s += op("malloc", 1) + size(1000000)
    s += op("malloc", 1) + size(2000000)                   # ENOMEM: full
    s += op("malloc", 1) + size(30) + op("memalign", 1) + align_pow2(12) + size(10)
    s += op("free", 1) + pick(1) + op("realloc", 1) + pick(0) + size(1500000)
    s += op("mallinfo", 1) + op("trim", 1) + u32(0) + b"\x00"
    # an odd base and a small region in the second buffer
    s += op("create_fixed", 2) + bytes([2]) + b"\x00\x07" + u32(9000)
    s += op("malloc", 2) + size(100) + op("malloc", 2) + size(5000)
    s += op("free_all", 1) + op("destroy", 1)
    s += op("create_fixed", 3) + bytes([1]) + b"\x00\x03" + b"\x05"  # too small: EINVAL
    return s


def seed_mallopt():
    s = b""
    s += op("mallopt") + bytes([2]) + u32(4096)            # M_MMAP_THRESHOLD 4 KiB
    s += op("malloc") + size(10000) + op("malloc") + size(300000)
    s += op("mallopt") + bytes([4]) + u32(0)               # M_MMAP_MAX 0
    s += op("malloc") + size(3000000) + op("realloc") + pick(2) + size(3500000)
    s += op("mallopt") + bytes([0]) + u32(0)               # M_TRIM_THRESHOLD 0
    s += op("mallopt") + bytes([1]) + u32(65536)           # M_TOP_PAD
    s += op("free") + pick(0) + op("free") + pick(0) + op("trim") + u32(0) + b"\x00"
    s += op("mallopt") + bytes([3]) + u32(1)               # refused
    s += op("mallopt") + bytes([7]) + u32(0)               # unknown parameter
    for i in range(16):
        s += op("malloc") + edge(i)
    s += op("malloc") + edge(EDGE_COUNT - 1)               # 32 MiB + 1
    return s


def seed_edges():
    s = b""
    for i in range(16, EDGE_COUNT - 3):        # the last three are 16 MiB and more
        s += op("malloc") + edge(i) + op("free") + pick(0)
    for shift in range(0, 21, 3):
        s += op("memalign") + align_pow2(shift) + size(shift * 10)
    s += op("calloc") + bytes([8]) + bytes([1])            # elem 2^32 x 1
    s += op("calloc") + bytes([10]) + bytes([3])           # SIZE_MAX x 3: overflow
    s += op("malloc") + size(64) + op("reallocarray") + bytes([10]) + pick(0) + bytes([2])
    return s


def write_dir(name, seeds):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    for label, data in seeds:
        with open(os.path.join(d, label), "wb") as f:
            f.write(data)


# ---- fuzz_params encoding: '\n'-separated entries; a first byte below 0x40
# names known_names[byte % 32]; a 0x00 byte starts the probe root. ----------
# known_names: 0-9 the first parameters, 10 PINHEAP_EVENTS, 11
# PINHEAP_MALLOC_ALIGN, 12-14 PINHEAP_PATCH, _CODE_PATCH, _LATE_MALLOC, 15-23
# the MCA-style aliases (mode, probe_root, arena_max, patch, late_malloc,
# code_patch, log_level, events, malloc_align), 24-31 near misses.
def var(i, value):
    return bytes([i]) + value + b"\n"


def params_seeds():
    return [
        ("matrix", var(0, b"1") + var(1, b"0") + var(2, b"no") + var(3, b"auto")),
        ("spellings", var(3, b" ON ") + var(4, b"x") + var(6, b"") + var(7, b"/opt/root")
         + var(8, b"4") + var(0, b"TRUE") + var(1, b"-1")),
        ("invalid", var(0, b"maybe") + var(8, b"0257") + var(3, b"\x01\x7f") + var(2, b"2")
         + var(7, b"relative/path") + var(8, b"0")),
        ("raw", b"OMPI_MCA_mpi_leave_pinned=-1\nPINHEAP_MODE=off\nOMPI_MCA_mpi_leave_pinned=1\n"
         + b"\x00/nonexistent/root"),
        ("long", var(7, b"/" + b"p" * 300) + var(0, b" " * 200 + b"yes")),
        ("level", b"PINHEAP_LOG_LEVEL=info\n" + var(9, b"1") + var(9, b" Warning ") + var(9, b"loud")
         + var(9, b"5")),
        ("decision", b"\x01\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00"
         + b"\x00\x00\x00\x00\x01\x00\x00\x00\n" + var(5, b"1") + b"\x00/"),
        # an alias alone, a conflict, the same value under both names, an
        # invalid alias beside a valid name
        ("aliases", var(15, b"off") + var(9, b"info") + var(21, b"debug") + var(10, b"no")
         + var(22, b"0") + var(17, b"8") + var(18, b"maybe") + var(12, b"1")
         + b"OMPI_MCA_memory_pinheap_code_patch=false\n"),
        ("align", var(11, b" 64 ") + var(23, b"4096")),
        ("align_bad", var(11, b"48") + var(23, b"8192") + var(14, b"yes")),
        ("align_edges", var(23, b"0000000000000000016") + var(11, b"99999999999999999999999")),
        ("events", b"PINHEAP_EVENTS=0\nPINHEAP_MALLOC_ALIGN=8\n" + var(13, b"0")),
    ]


def main():
    write_dir("fuzz_ops", [("global", seed_global()), ("mspace", seed_mspace()),
                           ("fixed", seed_fixed()), ("mallopt", seed_mallopt()),
                           ("edges", seed_edges())])
    write_dir("fuzz_params", params_seeds())
    return 0


if __name__ == "__main__":
    sys.exit(main())
