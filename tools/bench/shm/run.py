#!/usr/bin/env python3
"""run.py -- the shared-heap messaging benchmark (issue 11, item 6).

Runs shm_bench under `mpirun -np 2 --bind-to core` (rank 0 sends, rank 1
receives, each on its own core; `--mca btl self,vader`) once per method per
round, the methods interleaved within each round, and prints per size the
median time per message and bandwidth of each method, the ratios the issue's
targets name, and the sender's CPU time per message; writes table.txt and
chart.png (gnuplot) to the output directory.

Methods: mpi (MPI_Send/MPI_Recv), heap (pinheap's shared heap, one copy:
PINHEAP_MODE=on with PINHEAP_SHM_SIZE set), raw (a raw shared mapping, one
copy, PINHEAP_MODE=on as for heap), cma (process_vm_readv), ring (pipelined
two copies through a shared ring); mpi, cma and ring with PINHEAP_MODE=off
(Open MPI as shipped, glibc's malloc).  heapsplit and rawsplit (issue 25,
item 7): heap and raw with the receive buffer shared too, a message of at
least --split-min bytes copied once by both ranks at the same time, the
sender taking --split-share percent of it (shm_bench.c says how).

Usage: run.py BINDIR [--max SIZE] [--bytes SIZE] [--runs N] [--out DIR]
              [--split-min SIZE] [--split-share PERCENT] [--quiet] [--resume] [--check]
  BINDIR   the build's tools/bench/shm directory (holding shm_bench)
  --max    largest message (default 64M; suffixes K, M)
  --bytes  bytes moved per size and run (default 512M): iterations = bytes/size,
           from 4 to 20000
  --runs   rounds (default 5, at least 5): medians over them
  --out    where table.txt and chart.png go (default BINDIR/latest)
  --split-min    smallest message heapsplit/rawsplit split (default: shm_bench's,
                 64K; with --check 16K, so the smoke run splits too)
  --split-share  the sender's percent of a split message (default: shm_bench's, 50)
  --quiet  for a machine shared with others: before each run wait (up to 10
           min) until the machine is idle for a second, and run again (up to
           5 times) a run during which other processes took more than 10% of
           the two cores; the table counts the runs done again
  --resume go on from the rounds DIR/samples.json holds (written after every
           round: each run's rows), with the same options
  --check  smoke mode: fail ("FAIL ...") if a method fails or checks bad data,
           or a split method did not split from --split-min on; prints
           "shm-bench-ok"
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time

METHODS = ("mpi", "heap", "raw", "cma", "ring", "heapsplit", "rawsplit")
SPLIT = ("heapsplit", "rawsplit")
DEFAULT_SPLIT_MIN, DEFAULT_SPLIT_SHARE = 64 << 10, 50     # shm_bench.c's SPLIT_*_DEFAULT


def usage(msg):
    print("run.py: " + msg, file=sys.stderr)
    print(__doc__.split("\n\n", 3)[3], file=sys.stderr)
    sys.exit(2)


def parse_size(s, what):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        if s and s[-1].upper() in mult:
            return int(s[:-1]) * mult[s[-1].upper()]
        return int(s)
    except ValueError:
        usage("%s '%s' is not a size (a whole number, optionally K, M or G)" % (what, s))


def mpirun_argv(binary, method, maxsize, per_size, split=None):
    """split: (min, share) for the split methods, None for shm_bench's defaults"""
    argv = ["mpirun", "-np", "2", "--bind-to", "core", "--map-by", "core",
            "--mca", "btl", "self,vader"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    extra = []
    if method in SPLIT and split is not None:
        extra = [str(split[0]), str(split[1])]
    return argv + [binary, method, str(maxsize), str(per_size)] + extra


def env_for(method, maxsize):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PINHEAP_", "SM_", "LD_PRELOAD"))}
    if method in ("heap", "heapsplit"):
        env["PINHEAP_MODE"] = "on"
        # the two ranks' buffers and Open MPI's own blocks, with room
        env["PINHEAP_SHM_SIZE"] = str(max(4 * maxsize + (256 << 20), 1 << 30))
        env["PINHEAP_SHM_JOB"] = "shmbench%d" % os.getpid()
    elif method in ("raw", "rawsplit"):
        # pinheap serving malloc as for heap: the two differ only in where
        # the buffer lives (Open MPI's own small messages get slower with
        # pinheap's malloc, which would otherwise count against the heap)
        env["PINHEAP_MODE"] = "on"
    else:
        env["PINHEAP_MODE"] = "off"     # Open MPI as shipped: glibc's malloc
    return env


def run_one(binary, method, maxsize, per_size, split=None):
    """rows: size -> (us per message, sender CPU us, bytes the sender copied)"""
    p = subprocess.run(mpirun_argv(binary, method, maxsize, per_size, split),
                       env=env_for(method, maxsize), capture_output=True, text=True, timeout=900)
    rows = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 5 and f[1] == method:
            rows[int(f[0])] = (float(f[2]), float(f[3]), int(f[4]))
    return p, rows


def part(samples, m, n):
    """the bytes the sender copied of a message of N bytes (the same every round)"""
    return max(v[2] for v in samples[m][n].values())


def cpu_seconds():
    """(busy, all) CPU seconds of the whole machine since boot, /proc/stat"""
    with open("/proc/stat") as f:
        t = [int(x) for x in f.readline().split()[1:9]]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(t) - t[3] - t[4]) / hz, sum(t) / hz


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wait_idle(limit=600.0):
    """wait until the machine was at least 90% idle for a second (at most LIMIT s)"""
    t_end = time.time() + limit
    while True:
        b0, a0 = cpu_seconds()
        time.sleep(1.0)
        b1, a1 = cpu_seconds()
        if (b1 - b0) <= 0.1 * (a1 - a0) or time.time() > t_end:
            return


def run_quiet(binary, method, maxsize, per_size, split, ncpu=2, tries=5):
    """run_one on a quiet machine: the run is done again while others took
    more than 10% of the NCPU cores during it; returns p, rows, runs done again"""
    for k in range(tries):
        wait_idle()
        b0, c0, t0 = cpu_seconds()[0], children_cpu(), time.time()
        p, rows = run_one(binary, method, maxsize, per_size, split)
        others = (cpu_seconds()[0] - b0) - (children_cpu() - c0)
        if others <= 0.1 * ncpu * (time.time() - t0) or p.returncode != 0:
            break
    return p, rows, k


def fmt_size(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return str(n)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        usage("the first argument must be the build's tools/bench/shm directory")
    bindir = args[0]
    maxsize, per_size, runs, out, check = 64 << 20, 512 << 20, 5, None, False
    split_min, split_share, quiet, resume = None, None, False, False
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("--max", "--bytes", "--runs", "--out", "--split-min", "--split-share") \
                and i + 1 < len(args):
            v = args[i + 1]
            if a == "--max":
                maxsize = parse_size(v, "--max")
            elif a == "--bytes":
                per_size = parse_size(v, "--bytes")
            elif a == "--split-min":
                split_min = parse_size(v, "--split-min")
            elif a in ("--runs", "--split-share"):
                try:
                    if a == "--runs":
                        runs = int(v)
                    else:
                        split_share = int(v)
                except ValueError:
                    usage("%s '%s' is not a whole number" % (a, v))
            else:
                out = v
            i += 2
        elif a == "--check":
            check = True
            i += 1
        elif a == "--quiet":
            quiet = True
            i += 1
        elif a == "--resume":
            resume = True
            i += 1
        else:
            usage("unknown argument '%s'" % a)
    if runs < 5:
        usage("--runs %d: at least 5 rounds (medians of interleaved runs)" % runs)
    if maxsize < 1024:
        usage("--max %d: at least 1K" % maxsize)
    if split_share is not None and not 1 <= split_share <= 99:
        usage("--split-share %d: a percent from 1 to 99" % split_share)
    if check and split_min is None:
        split_min = 16 << 10
    split = None
    if split_min is not None or split_share is not None:
        split = (split_min if split_min is not None else DEFAULT_SPLIT_MIN,
                 split_share if split_share is not None else DEFAULT_SPLIT_SHARE)
    binary = os.path.join(bindir, "shm_bench")
    if not os.path.exists(binary):
        usage("%s not found: build the tools first (needs mpicc)" % binary)
    out = out or os.path.join(bindir, "latest")
    os.makedirs(out, exist_ok=True)

    samples = {m: {} for m in METHODS}
    failed = {}
    redone, first = 0, 0
    saved = os.path.join(out, "samples.json")
    if resume and os.path.exists(saved):
        with open(saved) as f:
            j = json.load(f)
        samples = {m: {int(n): {int(r): tuple(v) for r, v in rs.items()}
                       for n, rs in j["samples"].get(m, {}).items()} for m in METHODS}
        redone, first = j["redone"], j["rounds"]
    for r in range(first, runs):
        order = METHODS[r % len(METHODS):] + METHODS[:r % len(METHODS)]
        for m in order:
            if m in failed:
                continue
            if quiet:
                p, rows, k = run_quiet(binary, m, maxsize, per_size, split)
                redone += k
            else:
                p, rows = run_one(binary, m, maxsize, per_size, split)
            if p.returncode != 0 or not rows:
                failed[m] = (p.stdout + p.stderr).strip()[-600:]
                continue
            for n, v in rows.items():
                samples[m].setdefault(n, {})[r] = v
        with open(saved, "w") as f:
            json.dump({"rounds": r + 1, "redone": redone, "samples": samples}, f)
        print("round %d of %d done (%s)%s" % (r + 1, runs, time.strftime("%H:%M:%S"),
                                             ", %d runs done again" % redone if quiet else ""),
              file=sys.stderr, flush=True)
    failures = 0
    for m, why in failed.items():
        said = [l for l in why.splitlines() if l.startswith("shm_bench")]
        said = said[0] if said else why.splitlines()[-1] if why else "no output"
        if m == "cma" and "process_vm_readv" in why:
            print("SKIP cma: CMA refused here (%s)" % said)
        else:
            print("FAIL %s: %s" % (m, why))
            failures += 1

    sizes = sorted({n for m in METHODS for n in samples[m]})
    med = {m: {n: (statistics.median(v[0] for v in samples[m][n].values()),
                   statistics.median(v[1] for v in samples[m][n].values()))
               for n in samples[m]} for m in METHODS}
    shown = [m for m in METHODS if med[m]]

    def gbs(m, n):
        return n / med[m][n][0] / 1e3 if n in med[m] else None

    def round_ratios(a, b, n):
        # per round (the two runs were next to each other): this VM's
        # core-to-core latency flips between two modes (host vCPU placement),
        # and a ratio of two medians can pair a fast round of one method with
        # a slow round of the other
        if n not in samples[a] or n not in samples[b]:
            return []
        return [samples[b][n][r][0] / samples[a][n][r][0]
                for r in sorted(set(samples[a][n]) & set(samples[b][n]))]

    def ratio(a, b, n):
        rs = round_ratios(a, b, n)
        return "%.2f" % statistics.median(rs) if rs else "-"

    def spread(a, b, n):
        rs = round_ratios(a, b, n)
        return "%.2f-%.2f" % (min(rs), max(rs)) if rs else "-"

    lines = ["time per message, us (bandwidth GB/s), median of %d interleaved rounds; "
             "sender and receiver on different cores%s" % (
                 runs, "; --quiet: %d of %d runs done again (others were busy)" % (
                     redone, runs * len(METHODS) + redone) if quiet else ""),
             "%-6s" % "size" + "".join("%-20s" % m for m in shown)]
    for n in sizes:
        lines.append("%-6s" % fmt_size(n) + "".join(
            "%-20s" % ("%.2f (%.2f)" % (med[m][n][0], gbs(m, n)) if n in med[m] else "-")
            for m in shown).rstrip())
    pairs = (("heap", "mpi"), ("raw", "mpi"), ("heap", "raw"), ("raw", "ring"),
             ("heapsplit", "mpi"), ("rawsplit", "mpi"), ("heapsplit", "rawsplit"),
             ("heapsplit", "heap"), ("heapsplit", "ring"))

    def pair_name(a, b):
        sep = "~" if (a, b) in (("heap", "raw"), ("heapsplit", "rawsplit")) else "/"
        return a.replace("split", "S") + sep + b.replace("split", "S")

    lines.append("")
    lines.append("ratios, the median of the rounds' own (heapS, rawS: heapsplit, rawsplit)")
    lines.append("%-6s" % "size" + "".join("%-13s" % pair_name(a, b) for a, b in pairs))
    for n in sizes:
        lines.append("%-6s" % fmt_size(n) + "".join(
            "%-13s" % ratio(a, b, n) for a, b in pairs).rstrip())
    lines.append("")
    lines.append("spread: the rounds' own ratios, min-max, and the time per message of heap "
                 "and heapsplit, min-max us")
    for n in sizes:
        ts = {m: [v[0] for v in samples[m][n].values()] if n in samples[m] else []
              for m in ("heap", "heapsplit")}
        lines.append("%-6s heap/mpi %-10s heap~raw %-10s heapS/mpi %-10s heapS~rawS %-10s "
                     "heap %-18s heapS %s" % (
                         fmt_size(n), spread("heap", "mpi", n), spread("heap", "raw", n),
                         spread("heapsplit", "mpi", n), spread("heapsplit", "rawsplit", n),
                         "%.2f-%.2f" % (min(ts["heap"]), max(ts["heap"])) if ts["heap"] else "-",
                         "%.2f-%.2f" % (min(ts["heapsplit"]), max(ts["heapsplit"]))
                         if ts["heapsplit"] else "-"))
    lines.append("")
    lines.append("sender CPU time per message, us (until the send returned; for the split "
                 "methods this includes the sender's part of the copy), and the sender's part")
    split_shown = [m for m in SPLIT if m in shown]
    lines.append("%-6s" % "size" + "".join("%-12s" % m for m in shown)
                 + "".join("%-14s" % (m.replace("split", "S") + " part") for m in split_shown))
    for n in sizes:
        lines.append("%-6s" % fmt_size(n) + "".join(
            "%-12s" % ("%.2f" % med[m][n][1] if n in med[m] else "-") for m in shown)
            + "".join("%-14s" % ("%.0f%%" % (100.0 * part(samples, m, n) / n)
                                 if n in samples[m] else "-") for m in split_shown))
    lines.append("(ratios: speed of the first over the second, >1 is faster; heap~raw near "
                 "1.00 means the heap adds nothing to the copy; split: %s)" % (
                     "messages >= %s, the sender %d%%" % (fmt_size(split[0]), split[1])
                     if split else "shm_bench's defaults"))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(out, "table.txt"), "w") as f:
        f.write(text + "\n")

    dat = os.path.join(out, "bandwidth.dat")
    with open(dat, "w") as f:
        f.write("# size " + " ".join(shown) + "\n")
        for n in sizes:
            f.write("%d " % n + " ".join(
                "%.4f" % gbs(m, n) if n in med[m] else "NaN" for m in shown) + "\n")
    png = os.path.join(out, "chart.png")
    plot = ["set terminal png size 900,560", "set output '%s'" % png, "set logscale x 2",
            "set xlabel 'message size (bytes)'", "set ylabel 'GB/s'", "set key top left",
            "set title 'rank 0 -> rank 1, one node (pinheap shared heap vs MPI, raw, CMA, ring)'",
            "plot " + ", ".join("'%s' using 1:%d with linespoints title '%s'" % (dat, k + 2, m)
                                for k, m in enumerate(shown))]
    try:
        g = subprocess.run(["gnuplot"], input="\n".join(plot), text=True, capture_output=True)
        if g.returncode == 0:
            print("chart: %s" % png)
        else:
            print("no chart: gnuplot failed: %s" % g.stderr.strip()[-200:])
    except FileNotFoundError:
        print("no chart: gnuplot not found (apt-get install gnuplot-nox)")

    if check:
        for m in ("mpi", "heap", "raw", "ring") + SPLIT:
            if not med[m]:
                print("FAIL %s produced no result" % m)
                failures += 1
        for m in SPLIT:
            for n in samples[m]:
                if (part(samples, m, n) > 0) != (n >= split[0]):
                    print("FAIL %s at %s: the sender copied %d bytes (split from %s on)" % (
                        m, fmt_size(n), part(samples, m, n), fmt_size(split[0])))
                    failures += 1
        if failures == 0:
            print("shm-bench-ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
