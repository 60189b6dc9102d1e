#!/usr/bin/env python3
"""fork_cost.py -- what fork costs a process on the shared heap (issue 25).

Runs the test worker (test/shm_worker fork_time N KIB: KIB KiB allocated
in blocks, then N forks of which each child _exits at once, the parent
waits; the median of the N) with and without the shared heap, for 64 KiB,
1 MiB and 16 MiB allocated, interleaved, ROUNDS rounds, and prints the
median of the rounds' medians with their spread:
  plain   no shared heap (PINHEAP_SHM_SIZE unset): pinheap's private heap
  region  PINHEAP_SHM_SIZE=1G: a region of 1 GiB, the blocks in it (the
          child's snapshot copies what the region holds: fork's cost grows
          with the data, where a plain fork shares the pages copy-on-write)

Usage: fork_cost.py BUILD [--rounds N] [--forks N]
"""
import os
import statistics
import subprocess
import sys


def one(worker, env_extra, forks, job, kib):
    env = dict(os.environ)
    for k in ("PINHEAP_SHM_SIZE", "SM_SIZE", "PINHEAP_SHM_JOB"):
        env.pop(k, None)
    env.update(env_extra)
    env["PINHEAP_SHM_JOB"] = job
    args = [worker, "fork_time", str(forks), str(kib)]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300).stdout
    for line in out.splitlines():
        if line.startswith("fork_time "):
            return float(line.split()[1])
    raise SystemExit("fork_cost.py: the worker said: %r" % out)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    build = sys.argv[1]
    rounds, forks = 7, 51
    a = sys.argv[2:]
    for i, v in enumerate(a):
        if v == "--rounds":
            rounds = int(a[i + 1])
        if v == "--forks":
            forks = int(a[i + 1])
    worker = os.path.join(build, "test", "shm_worker")
    settings = [("plain", {}), ("region", {"PINHEAP_SHM_SIZE": "1G"})]
    print("fork + child _exit + wait, us: median of %d rounds (each the median of %d forks), "
          "min-max" % (rounds, forks))
    for kib in (64, 1024, 16384):
        res = {k: [] for k, _ in settings}
        for r in range(rounds):
            for k, extra in settings:
                res[k].append(one(worker, extra, forks, "forkcost%d_%d" % (os.getpid(), r), kib))
        base = statistics.median(res["plain"])
        for k, _ in settings:
            v = res[k]
            print("  %6d KiB %-7s %8.1f  (%.1f-%.1f)  %.2fx plain" % (
                kib, k, statistics.median(v), min(v), max(v), statistics.median(v) / base))


main()
