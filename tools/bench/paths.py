#!/usr/bin/env python3
"""paths.py -- what each allocator path costs per operation, counted: the
figures that predict scaling on more cores than this machine has.  Main
entry point: main().

For each allocator run.py finds (glibc, jemalloc, tcmalloc, mimalloc,
pinheap through its preload shim) and each path, a small probe program
(built here with cc) runs N and 2N operations under
`valgrind --tool=callgrind --dump-instr=yes`; the difference / N is the
cost of one operation, start-up and exit cancelled:

  fast     malloc(32) + free, the same block again and again (the thread
           cache / the page's free list);
  batch    4096 blocks of 32 B allocated, then freed in the same order,
           over and over: the caches overflow and refill from the arena
           (the slow path), per block;
  remote   the main thread allocates 4096 blocks of 32 B and hands them to
           a second thread (a pipe byte; no atomic in the hand-off), which
           frees them, then the main thread allocates again (taking the
           remote frees back): per block, a malloc and a free from another
           thread;
  arena    malloc(64 KiB) + free: past every thread cache of the peers'
           defaults, the arena / page heap;
  large    malloc(1 MiB) + a write of its first byte + free.

Counted per operation: instructions; atomic read-modify-writes executed
(lock-prefixed instructions, and xchg with a memory operand, which is
locked implicitly), found by disassembling (objdump -d) each object the
run executed and summing callgrind's per-instruction counts of those
addresses, split as cmpxchg / xchg / other; and calls of pthread's lock
functions (pthread_mutex_lock, _trylock, pthread_spin_lock).  Locks
inlined into the allocator (glibc's arena lock, pinheap's ph_lock,
tcmalloc's SpinLock) show as a cmpxchg to take and an xchg to release.
Every count repeats exactly from run to run: the machine's noise does not
reach it.  The probe makes a thread before it measures, so every
allocator runs in its multithreaded mode (glibc skips atomics while a
process has only one thread).

Writes paths.md (the table) and paths.json into --out.  Python 3 standard
library; needs cc, valgrind and objdump.  --check (a smoke test): tiny
counts, glibc and pinheap only, exit 1 unless each path was counted.
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (run.py beside this file)

PROBE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROUND 4096
#define LOG_MAX (16 * ROUND)
static void *(*volatile m)(size_t) = malloc;
static void (*volatile f)(void *) = free;
static void *blocks[ROUND];
static int to_freer[2], to_main[2];
/* The sharing count (lackey): each thread stores to its marker when its
 * turn starts; with "log", the blocks handed out are printed at exit. */
volatile long marker[2];
static void *logged[LOG_MAX];
static long nlogged;
static int logging;
static const char *path;

static void *nothing(void *arg) { return arg; }

/* The second thread: waits for its turn, frees the round's blocks (or,
 * for fast2, runs its own pairs), hands the turn back. */
static void *freer(void *arg)
{
  char c;
  if (strcmp(path, "remote") == 0)
    f(m(32));                            /* a thread that also allocates: it has a cache */
  while (read(to_freer[0], &c, 1) == 1 && c == 'g') {
    marker[1] = 1;
    if (strcmp(path, "fast2") == 0)
      for (int i = 0; i < ROUND; i++)
        f(m(32));
    else
      for (int i = 0; i < ROUND; i++)
        f(blocks[i]);
    if (write(to_main[1], "d", 1) != 1)
      break;
  }
  return arg;
}

static void fill(size_t size)
{
  for (int i = 0; i < ROUND; i++) {
    if ((blocks[i] = m(size)) == NULL)
      exit(3);
    if (logging && nlogged < LOG_MAX)
      logged[nlogged++] = blocks[i];
  }
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: probe fast|fast2|batch|remote|remote_nocache|arena|large N [log]\n");
    return 64;
  }
  path = argv[1];
  long n = atol(argv[2]);
  logging = argc > 3 && strcmp(argv[3], "log") == 0;
  pthread_t t;
  /* 16 blocks of 32 B live throughout, as a program has: with none, a
   * page emptied by every free sent mimalloc down its retire path (114
   * instructions per fast pair against 55) */
  static void *volatile keep[16];
  for (int i = 0; i < 16; i++)
    keep[i] = m(32);
  /* a thread made and gone: every allocator is in its multithreaded mode */
  if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
    return 3;
  if (strcmp(path, "fast") == 0) {
    for (long i = 0; i < n; i++)
      f(m(32));
  } else if (strcmp(path, "batch") == 0) {
    for (long r = 0; r < n / ROUND; r++) {
      fill(32);
      for (int i = 0; i < ROUND; i++)
        f(blocks[i]);
    }
  } else if (strncmp(path, "remote", 6) == 0 || strcmp(path, "fast2") == 0) {
    char c;
    if (pipe(to_freer) != 0 || pipe(to_main) != 0 || pthread_create(&t, NULL, freer, NULL) != 0)
      return 3;
    for (long r = 0; r < n / ROUND; r++) {
      marker[0] = 1;
      if (path[0] == 'f')
        for (int i = 0; i < ROUND; i++)
          f(m(32));
      else
        fill(32);
      if (write(to_freer[1], "g", 1) != 1 || read(to_main[0], &c, 1) != 1)
        return 3;
    }
    marker[0] = 1;
    if (write(to_freer[1], "q", 1) != 1 || pthread_join(t, NULL) != 0)
      return 3;
  } else if (strcmp(path, "arena") == 0 || strcmp(path, "large") == 0) {
    size_t size = path[0] == 'a' ? 65536 : 1 << 20;
    for (long i = 0; i < n; i++) {
      char *p = m(size);
      if (p == NULL)
        return 3;
      p[0] = 1;
      f(p);
    }
  } else {
    fprintf(stderr, "probe: unknown path '%s'\n", path);
    return 64;
  }
  for (long i = 0; i < nlogged; i++)
    printf("%lx\n", (unsigned long)logged[i]);
  return 0;
}
"""

# path -> (N: operations of the smaller run, what one operation is)
PATHS = [
    ("fast", 20000, "malloc(32) + free, the same block"),
    ("batch", 8 * 4096, "a block of 32 B: malloc + free, 4096 live at once"),
    ("fast2", 8 * 4096, "malloc(32) + free, two threads taking turns of 4096 pairs"),
    ("remote", 8 * 4096, "a block of 32 B: malloc, then free by another thread"),
    ("remote_nocache", 8 * 4096, "the same, the freeing thread never calls malloc"),
    ("arena", 4000, "malloc(64 KiB) + free"),
    ("large", 2000, "malloc(1 MiB) + write 1 byte + free"),
]
LOCK_FNS = re.compile(r"^_*pthread_(mutex_(timed)?lock|mutex_trylock|spin_lock|spin_trylock)$")
ATOMIC_KINDS = ("cmpxchg", "xchg", "other")
SHARING_PATHS = ("fast2", "remote", "remote_nocache")
SHARING_ROUNDS = 4
# The system calls counted (strace -c): the memory calls, each of which
# takes the process's mmap lock in the kernel (and unmapping ones shoot
# down TLB entries on every core running the process), and futex, a lock
# slept on or woken.
SYSCALLS = ("mmap", "munmap", "madvise", "mremap", "brk", "mprotect", "futex")


class PathsError(Exception):
    """A count could not be made; the message says which and why."""


def objdump_atomics(path, cache):
    """{address: kind} of the atomic read-modify-writes in the object at
    path (file addresses, as callgrind writes them), and the set of every
    instruction address (for the sanity check)."""
    if path in cache:
        return cache[path]
    proc = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True,
                          text=True, timeout=600)
    atomics, starts = {}, set()
    line_re = re.compile(r"^\s*([0-9a-f]+):\s+(.*)$")
    for line in proc.stdout.splitlines():
        mo = line_re.match(line)
        if mo is None:
            continue
        addr, text = int(mo.group(1), 16), mo.group(2).strip()
        starts.add(addr)
        words = text.split()
        if not words:
            continue
        if words[0] == "lock" and len(words) > 1:
            atomics[addr] = "cmpxchg" if words[1].startswith("cmpxchg") else "other"
        elif words[0].startswith("xchg") and len(words) > 1 and "(" in words[1]:
            atomics[addr] = "xchg"            # a memory operand: locked implicitly
    cache[path] = (atomics, starts)
    return cache[path]


def callgrind_parse(out_file):
    """({object: {address: Ir}}, {called function: calls})."""
    costs = collections.defaultdict(lambda: collections.defaultdict(int))
    calls = collections.defaultdict(int)
    ob = None
    skip_next = False
    cfn = None
    with open(out_file) as f:
        for line in f:
            if skip_next:
                skip_next = False
                continue
            if line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("cfn="):
                cfn = line[4:].strip()
            elif line.startswith("calls="):
                calls[cfn] += int(line[6:].split()[0])
                skip_next = True               # the call's inclusive cost line
            elif line.startswith("0x"):
                fields = line.split()
                if len(fields) >= 2:
                    costs[ob][int(fields[0], 16)] += int(fields[1])
    return costs, calls


def count_run(probe, path, n, env, tmp, dis_cache):
    """One callgrind run: {"ir", "atomics": {kind: n}, "locks"}."""
    out_file = os.path.join(tmp, "cg.%s.%d" % (path, n))
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--dump-line=no",
           "--compress-strings=no", "--compress-pos=no", "--callgrind-out-file=" + out_file,
           probe, path, str(n)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise PathsError("exit status %d: %s\n%s" % (proc.returncode, " ".join(cmd),
                                                     "\n".join(proc.stderr.splitlines()[-5:])))
    costs, calls = callgrind_parse(out_file)
    os.unlink(out_file)
    ir = 0
    atomics = dict.fromkeys(ATOMIC_KINDS, 0)
    for ob, per_addr in costs.items():
        ob_ir = sum(per_addr.values())
        ir += ob_ir
        if not os.path.isfile(ob):
            continue
        found, starts = objdump_atomics(ob, dis_cache)
        matched = sum(c for a, c in per_addr.items() if a in starts)
        if ob_ir > 1000 and matched < 0.9 * ob_ir:
            raise PathsError("%s: only %d of %d instructions counted lie at instruction starts "
                             "of objdump's listing (addresses not file addresses?)"
                             % (ob, matched, ob_ir))
        for a, c in per_addr.items():
            kind = found.get(a)
            if kind:
                atomics[kind] += c
    # names carry their symbol version: pthread_mutex_trylock@@GLIBC_2.34
    locks = sum(c for fn, c in calls.items() if fn and LOCK_FNS.match(fn.split("@")[0]))
    return {"ir": ir, "atomics": atomics, "locks": locks}


def symbols(probe):
    """{name: address} of the probe's symbols (it is built without PIE)."""
    out = subprocess.run(["nm", probe], capture_output=True, text=True, timeout=60).stdout
    syms = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3:
            syms[fields[2]] = int(fields[0], 16)
    return syms


def sharing_run(probe, path, env, tmp, rounds=SHARING_ROUNDS):
    """Cache lines that move between the two threads of a two-thread path,
    per operation, from valgrind's lackey trace of every load and store.
    The threads take turns (the probe stores to marker[0] / marker[1] when
    a turn starts); per turn P and the other thread's turn Q just before:
    "writes" counts the distinct lines P writes that Q touched (each must
    leave the other core), "reads" the lines P only reads that Q wrote (a
    copy comes over).  The probe's own variables are left out, and lines
    holding the blocks handed out are counted apart ("block").  The first
    two turns (warm-up) and the last (the second thread's exit runs in it)
    are not counted.  Returns per-operation figures."""
    syms = symbols(probe)
    try:
        mark = syms["marker"]
        own = (syms.get("__data_start", syms.get("data_start")), syms["_end"])
    except KeyError as e:
        raise PathsError("probe symbol %s not found by nm" % e)
    log = os.path.join(tmp, "lackey.%s" % path)
    cmd = ["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-file=" + log,
           probe, path, str(rounds * 4096), "log"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise PathsError("exit status %d: %s" % (proc.returncode, " ".join(cmd)))
    block_lines = set()
    for line in proc.stdout.split():
        b = int(line, 16)
        block_lines.update(range(b >> 6, (b + 31 >> 6) + 1))
    turns = []                       # [owner, accessed lines, written lines]
    cur = None
    with open(log) as f:
        for line in f:
            if len(line) < 4 or line[0] != " ":
                continue
            kind = line[1]
            comma = line.find(",", 3)
            addr = int(line[3:comma], 16)
            if kind == "S" and mark <= addr < mark + 16:
                cur = [(addr - mark) >> 3, set(), set()]
                turns.append(cur)
                continue
            if cur is None or (own[0] is not None and own[0] <= addr < own[1]):
                continue
            ln = addr >> 6
            cur[1].add(ln)
            if kind != "L":
                cur[2].add(ln)
    os.unlink(log)
    totals = dict.fromkeys(("writes", "writes_block", "reads", "reads_block"), 0)
    counted = 0
    for i in range(2, len(turns) - 1):     # the last: the second thread's exit
        p = turns[i]
        q = next((t for t in reversed(turns[:i]) if t[0] != p[0]), None)
        if q is None or p[0] == q[0] or len(p[1]) == 0:
            continue
        counted += 1
        w = p[2] & q[1]
        r = (p[1] - p[2]) & q[2]
        totals["writes"] += len(w - block_lines)
        totals["writes_block"] += len(w & block_lines)
        totals["reads"] += len(r - block_lines)
        totals["reads_block"] += len(r & block_lines)
    if counted == 0:
        raise PathsError("lackey trace of %s has no turns (marker at %#x)" % (path, mark))
    # a remote round is two turns for 4096 blocks (malloc, then free); a
    # fast2 turn is 4096 pairs
    ops = counted * 4096 / (2.0 if path.startswith("remote") else 1.0)
    return {k: v / ops for k, v in totals.items()}


def syscalls_run(probe, path, n, env, tmp):
    """{syscall: calls} of one run under strace -f -c, memory calls and futex."""
    out = os.path.join(tmp, "strace.%s.%d" % (path, n))
    cmd = ["strace", "-f", "-c", "-o", out, "-e", "trace=" + ",".join(SYSCALLS), probe, path, str(n)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise PathsError("exit status %d: %s\n%s" % (proc.returncode, " ".join(cmd), proc.stderr[-300:]))
    calls = dict.fromkeys(SYSCALLS, 0)
    with open(out) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 5 and fields[-1] in calls:
                calls[fields[-1]] = int(fields[3])
    os.unlink(out)
    return calls


def per_op(r1, r2, n):
    return {"ir": (r2["ir"] - r1["ir"]) / n,
            "atomics": {k: (r2["atomics"][k] - r1["atomics"][k]) / n for k in ATOMIC_KINDS},
            "locks": (r2["locks"] - r1["locks"]) / n}


def fmt_count(v):
    if abs(v) < 0.0005:
        return "0"
    return "%.3f" % v if abs(v) < 10 else "%.1f" % v


def table_markdown(names, paths, results, notes):
    lines = ["**Per operation, counted** (callgrind, (count(2N) - count(N)) / N; the probe's loop "
             "and calls included): instructions / atomic read-modify-writes (lock-prefixed or "
             "xchg with memory: cmpxchg + xchg + other) / calls of pthread lock functions", "",
             "| path | operation | " + " | ".join(names) + " |",
             "|---|---|" + "---:|" * len(names)]
    for path, n, what in paths:
        cells = []
        for name in names:
            r = results.get((name, path))
            if r is None:
                cells.append("FAIL")
                continue
            a = r["atomics"]
            total = sum(a.values())
            cells.append("%s / **%s** (%s + %s + %s) / %s" % (
                fmt_count(r["ir"]), fmt_count(total), fmt_count(a["cmpxchg"]), fmt_count(a["xchg"]),
                fmt_count(a["other"]), fmt_count(r["locks"])))
        lines.append("| %s | %s | %s |" % (path, what, " | ".join(cells)))
    lines.append("")
    shared = [(path, what) for path, n, what in paths if path in SHARING_PATHS
              and any("sharing" in (results.get((name, path)) or {}) for name in names)]
    if shared:
        lines += ["**Cache lines that move between the two threads, per operation** (valgrind's "
                  "lackey trace of every load and store; the threads take turns of 4096 operations; "
                  "per turn, the distinct lines written that the other thread touched in its last "
                  "turn / the lines only read that the other thread wrote in its last turn; in "
                  "parentheses, those of them that hold the 32-byte blocks themselves, which any "
                  "allocator writing a link into a freed block must move)", "",
                  "| path | operation | " + " | ".join(names) + " |",
                  "|---|---|" + "---:|" * len(names)]
        for path, what in shared:
            cells = []
            for name in names:
                sh = (results.get((name, path)) or {}).get("sharing")
                cells.append("-" if sh is None else "%s (%s) / %s (%s)" % (
                    fmt_count(sh["writes"] + sh["writes_block"]), fmt_count(sh["writes_block"]),
                    fmt_count(sh["reads"] + sh["reads_block"]), fmt_count(sh["reads_block"])))
            lines.append("| %s | %s | %s |" % (path, what, " | ".join(cells)))
        lines.append("")
    sys_rows = [(path, what) for path, n, what in paths
                if any("syscalls" in (results.get((name, path)) or {}) for name in names)]
    if sys_rows:
        lines += ["**System calls per operation** (strace -f -c, (calls(2N) - calls(N)) / N): "
                  "memory calls (mmap + munmap + madvise + mremap + brk + mprotect; each takes the "
                  "process's mmap lock in the kernel, and munmap and madvise(DONTNEED) shoot down TLB "
                  "entries on every core running the process) / futex", "",
                  "| path | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
        for path, what in sys_rows:
            cells = []
            for name in names:
                sc = (results.get((name, path)) or {}).get("syscalls")
                cells.append("-" if sc is None else "%s / %s" % (
                    fmt_count(sum(v for k, v in sc.items() if k != "futex")), fmt_count(sc["futex"])))
            lines.append("| %s | %s |" % (path, " | ".join(cells)))
        lines.append("")
    for n in notes:
        lines.append("Note: " + n)
        lines.append("")
    return "\n".join(lines)


def main(argv):
    p = argparse.ArgumentParser(prog="paths.py", description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(run.REPO, "build"),
                   help="the CMake build directory (default REPO/build)")
    p.add_argument("--pinheap", default=None, help="path to %s" % run.PINHEAP_SHIM)
    p.add_argument("--allocators", default=None,
                   help="subset of %s (default: every one found)" % ",".join(run.PEERS + ["pinheap"]))
    p.add_argument("--paths", default=",".join(x[0] for x in PATHS),
                   help="subset of the paths (default all)")
    p.add_argument("--out", default=os.path.join(os.getcwd(), "bench-paths"),
                   help="output directory (default ./bench-paths)")
    p.add_argument("--no-syscalls", action="store_true", help="skip the strace count")
    p.add_argument("--no-sharing", action="store_true",
                   help="skip the lackey count of the lines moving between threads")
    p.add_argument("--check", action="store_true",
                   help="smoke test: tiny counts; exit 1 unless every path was counted "
                        "(77, a skip, without cc, valgrind or objdump)")
    a = p.parse_args(argv)
    for tool in ("cc", "valgrind", "objdump"):
        if shutil.which(tool) is None:
            if a.check:
                print("SKIP: paths.py: %s is not installed" % tool)
                return 77
            print("paths.py: %s is not installed" % tool, file=sys.stderr)
            return 2
    try:
        wanted = run.list_parse("--paths", a.paths)
        for w in wanted:
            if w not in [x[0] for x in PATHS]:
                raise run.UsageError("--paths: unknown path '%s'; expected some of %s"
                                     % (w, ",".join(x[0] for x in PATHS)))
        if a.allocators is not None:
            a.allocators = run.list_parse("--allocators", a.allocators)
            for name in a.allocators:
                if name not in run.PEERS + ["pinheap"]:
                    raise run.UsageError("--allocators: unknown allocator '%s'; expected some of %s"
                                         % (name, ",".join(run.PEERS + ["pinheap"])))
        allocators, notes = run.allocators_find(a)
    except run.UsageError as e:
        print("paths.py: " + str(e), file=sys.stderr)
        return 2
    allocators = [(n, path) for n, path in allocators if n != run.FALLBACK]
    paths = [x for x in PATHS if x[0] in wanted]
    if a.check:
        paths = [(w, max(4096, n // 8 // 4096 * 4096) if n % 4096 == 0 else n // 8, what)
                 for w, n, what in paths]
    names = [n for n, _ in allocators]
    tmp = tempfile.mkdtemp(prefix="pinheap-paths-")
    results, failures, dis_cache = {}, [], {}
    try:
        probe = os.path.join(tmp, "probe")
        src = probe + ".c"
        with open(src, "w") as f:
            f.write(PROBE)
        proc = subprocess.run(["cc", "-O2", "-pthread", "-no-pie", src, "-o", probe], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            print("paths.py: cc failed:\n" + proc.stderr, file=sys.stderr)
            return 2
        for name, lib in allocators:
            env = run.env_for(lib)
            if name == "pinheap":
                env["PINHEAP_MODE"] = "on"   # under valgrind pinheap stays off unless told
            for path, n, _ in paths:
                try:
                    r1 = count_run(probe, path, n, env, tmp, dis_cache)
                    r2 = count_run(probe, path, 2 * n, env, tmp, dis_cache)
                except (PathsError, OSError, subprocess.SubprocessError) as e:
                    failures.append("%s %s: %s" % (name, path, e))
                    run.note("paths: %s %s FAILED: %s" % (name, path, e))
                    continue
                # a fast2 round is both threads' turns: two pairs per n
                ops = 2 * n if path == "fast2" else n
                results[(name, path)] = r = per_op(r1, r2, ops)
                if shutil.which("strace") is not None and not a.no_syscalls:
                    try:
                        s1 = syscalls_run(probe, path, n, env, tmp)
                        s2 = syscalls_run(probe, path, 2 * n, env, tmp)
                        r["syscalls"] = {k: (s2[k] - s1[k]) / ops for k in SYSCALLS}
                    except (PathsError, OSError, subprocess.SubprocessError) as e:
                        failures.append("%s %s (strace): %s" % (name, path, e))
                if path in SHARING_PATHS and not a.no_sharing:
                    try:
                        r["sharing"] = sharing_run(probe, path, env, tmp)
                    except (PathsError, OSError, subprocess.SubprocessError) as e:
                        failures.append("%s %s (lackey): %s" % (name, path, e))
                        run.note("paths: %s %s lackey FAILED: %s" % (name, path, e))
                run.note("paths: %-8s %-6s %7.1f instructions, %.3f atomics, %.3f lock calls per op"
                         % (name, path, r["ir"], sum(r["atomics"].values()), r["locks"]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    notes += failures
    notes.append("Peers: " + ", ".join("%s (%s)" % (n, p or "no preload") for n, p in allocators)
                 + ". pinheap runs with PINHEAP_MODE=on (under valgrind it would leave malloc to "
                   "glibc).")
    text = table_markdown(names, paths, results, notes)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "paths.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "paths.json"), "w") as f:
        json.dump({"paths": [{"path": w, "n": n, "operation": what} for w, n, what in paths],
                   "results": [dict(allocator=k[0], path=k[1], **v) for k, v in results.items()],
                   "notes": notes}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(text)
    if a.check:
        missing = ["%s %s" % (n, w) for n in names for w, _, _ in paths
                   if (n, w) not in results or results[(n, w)]["ir"] <= 0
                   or (w in SHARING_PATHS and not a.no_sharing and "sharing" not in results[(n, w)])]
        if failures or missing:
            print("paths.py --check: FAIL: not counted: %s" % ", ".join(missing or failures))
            return 1
        print("paths.py --check: every path counted")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
