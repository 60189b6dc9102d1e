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
(Open MPI as shipped, glibc's malloc).

Usage: run.py BINDIR [--max SIZE] [--bytes SIZE] [--runs N] [--out DIR] [--check]
  BINDIR   the build's tools/bench/shm directory (holding shm_bench)
  --max    largest message (default 64M; suffixes K, M)
  --bytes  bytes moved per size and run (default 512M): iterations = bytes/size,
           from 4 to 20000
  --runs   rounds (default 5, at least 5): medians over them
  --out    where table.txt and chart.png go (default BINDIR/latest)
  --check  smoke mode: fail ("FAIL ...") if a method fails or checks bad data;
           prints "shm-bench-ok"
"""
import os
import statistics
import subprocess
import sys

METHODS = ("mpi", "heap", "raw", "cma", "ring")


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


def mpirun_argv(binary, method, maxsize, per_size):
    argv = ["mpirun", "-np", "2", "--bind-to", "core", "--map-by", "core",
            "--mca", "btl", "self,vader"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    return argv + [binary, method, str(maxsize), str(per_size)]


def env_for(method, maxsize):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PINHEAP_", "SM_", "LD_PRELOAD"))}
    if method == "heap":
        env["PINHEAP_MODE"] = "on"
        # the two ranks' buffers and Open MPI's own blocks, with room
        env["PINHEAP_SHM_SIZE"] = str(max(4 * maxsize + (256 << 20), 1 << 30))
        env["PINHEAP_SHM_JOB"] = "shmbench%d" % os.getpid()
    elif method == "raw":
        # pinheap serving malloc as for heap: the two differ only in where
        # the buffer lives (Open MPI's own small messages get slower with
        # pinheap's malloc, which would otherwise count against the heap)
        env["PINHEAP_MODE"] = "on"
    else:
        env["PINHEAP_MODE"] = "off"     # Open MPI as shipped: glibc's malloc
    return env


def run_one(binary, method, maxsize, per_size):
    p = subprocess.run(mpirun_argv(binary, method, maxsize, per_size),
                       env=env_for(method, maxsize), capture_output=True, text=True, timeout=900)
    rows = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[1] == method:
            rows[int(f[0])] = (float(f[2]), float(f[3]))
    return p, rows


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
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("--max", "--bytes", "--runs", "--out") and i + 1 < len(args):
            v = args[i + 1]
            if a == "--max":
                maxsize = parse_size(v, "--max")
            elif a == "--bytes":
                per_size = parse_size(v, "--bytes")
            elif a == "--runs":
                try:
                    runs = int(v)
                except ValueError:
                    usage("--runs '%s' is not a whole number" % v)
            else:
                out = v
            i += 2
        elif a == "--check":
            check = True
            i += 1
        else:
            usage("unknown argument '%s'" % a)
    if runs < 5:
        usage("--runs %d: at least 5 rounds (medians of interleaved runs)" % runs)
    if maxsize < 1024:
        usage("--max %d: at least 1K" % maxsize)
    binary = os.path.join(bindir, "shm_bench")
    if not os.path.exists(binary):
        usage("%s not found: build the tools first (needs mpicc)" % binary)
    out = out or os.path.join(bindir, "latest")
    os.makedirs(out, exist_ok=True)

    samples = {m: {} for m in METHODS}
    failed = {}
    for r in range(runs):
        order = METHODS[r % len(METHODS):] + METHODS[:r % len(METHODS)]
        for m in order:
            if m in failed:
                continue
            p, rows = run_one(binary, m, maxsize, per_size)
            if p.returncode != 0 or not rows:
                failed[m] = (p.stdout + p.stderr).strip()[-600:]
                continue
            for n, v in rows.items():
                samples[m].setdefault(n, {})[r] = v
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

    def ratio(a, b, n):
        # per round (the two runs were next to each other), then the median:
        # this VM's core-to-core latency flips between two modes (host vCPU
        # placement), and a ratio of two medians can pair a fast round of
        # one method with a slow round of the other
        if n not in samples[a] or n not in samples[b]:
            return "-"
        both = sorted(set(samples[a][n]) & set(samples[b][n]))
        if not both:
            return "-"
        return "%.2f" % statistics.median(samples[b][n][r][0] / samples[a][n][r][0] for r in both)

    lines = ["time per message, us (bandwidth GB/s), median of %d interleaved rounds; "
             "sender and receiver on different cores" % runs,
             "%-6s" % "size" + "".join("%-20s" % m for m in shown)
             + "  heap/mpi raw/mpi heap~raw raw/ring"]
    for n in sizes:
        cells = "".join("%-20s" % ("%.2f (%.2f)" % (med[m][n][0], gbs(m, n)) if n in med[m] else "-")
                        for m in shown)
        lines.append("%-6s" % fmt_size(n) + cells + "  %-8s %-7s %-8s %s" % (
            ratio("heap", "mpi", n), ratio("raw", "mpi", n), ratio("heap", "raw", n),
            ratio("raw", "ring", n)))
    lines.append("")
    lines.append("spread: the rounds' own ratios, min-max (heap/mpi, heap~raw) and the time "
                 "per message of heap, min-max us")

    def spread(a, b, n):
        if n not in samples[a] or n not in samples[b]:
            return "-"
        rs = [samples[b][n][r][0] / samples[a][n][r][0]
              for r in set(samples[a][n]) & set(samples[b][n])]
        return "%.2f-%.2f" % (min(rs), max(rs)) if rs else "-"

    for n in sizes:
        ts = [v[0] for v in samples["heap"][n].values()] if n in samples["heap"] else []
        lines.append("%-6s heap/mpi %-12s heap~raw %-12s heap %s" % (
            fmt_size(n), spread("heap", "mpi", n), spread("heap", "raw", n),
            "%.2f-%.2f" % (min(ts), max(ts)) if ts else "-"))
    lines.append("")
    lines.append("sender CPU time per message, us (until the send returned)")
    lines.append("%-6s" % "size" + "".join("%-12s" % m for m in shown))
    for n in sizes:
        lines.append("%-6s" % fmt_size(n) + "".join(
            "%-12s" % ("%.2f" % med[m][n][1] if n in med[m] else "-") for m in shown))
    lines.append("(ratios: speed of the first over the second, >1 is faster, the median of "
                 "the rounds' own ratios; heap~raw near 1.00 means the heap adds nothing to "
                 "the copy)")
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
        for m in ("mpi", "heap", "raw", "ring"):
            if not med[m]:
                print("FAIL %s produced no result" % m)
                failures += 1
        if failures == 0:
            print("shm-bench-ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
