#!/usr/bin/env python3
"""Interleaved A/B: [RT=prio] [BENCH=prog] python3 ab.py WORKLOADS THREADS RUNS NAME=SO,...

Each run: every workload x threads x allocator in turn (the order rotated
run by run), under /usr/bin/time; prints medians of the bench's time, user
and sys seconds, peak RSS, page faults (perf), TLB flushes (perf's
tlb:tlb_flush: remote IPIs sent, remote shootdowns received, local mm-wide
flushes) and the regcache hit rate.  Raw
lines go to stdout too (prefixed RAW) for the record.  The command line is
run.py's: pinheap-bench WORKLOAD 1 THREADS --expect-malloc <basename>,
LD_PRELOAD=<so>, no PINHEAP_MODE.  BENCH env picks the bench binary
(default /tmp/large3/pinheap-bench, a copy of build/tools/bench's); RT=N
runs each one under chrt -f N (SCHED_FIFO: the threads get the CPUs).  The
name tc is the reference of the x-ratios.  perf writes /tmp/large3/perf.out."""
import json, os, statistics, subprocess, sys

bench = os.environ.get("BENCH", "/tmp/large3/pinheap-bench")
wls = sys.argv[1].split(","); threads = sys.argv[2].split(","); runs = int(sys.argv[3])
libs = dict(x.split("=", 1) for x in sys.argv[4].split(","))
names = list(libs)
res = {}
for r in range(runs):
    order = names[r % len(names):] + names[:r % len(names)]
    for w in wls:
        for t in threads:
            for n in order:
                env = dict(os.environ, LD_PRELOAD=libs[n])
                env.pop("PINHEAP_MODE", None)
                ev = []
                for reason in (1, 3, 4):
                    ev += ["-e", "tlb:tlb_flush", "--filter", "reason==%d" % reason]
                cmd = (["chrt", "-f", os.environ["RT"]] if os.environ.get("RT") else []) + ["/usr/bin/time", "-f", "TIME %U %S %R %c %w",
                       "perf", "stat", "-x,", "-o", "/tmp/large3/perf.out"] + ev + ["-e", "page-faults",
                       bench, w, "1", t, "--expect-malloc", os.path.basename(libs[n])]
                p = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if p.returncode != 0:
                    sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr[-800:]))
                d = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
                u, s, flt, ivcs, vcs = [l for l in p.stderr.splitlines() if l.startswith("TIME")][-1].split()[1:]
                pc = [int(l.split(",")[0]) for l in open("/tmp/large3/perf.out") if "," in l and l.split(",")[0].isdigit()]
                flt = pc[3]
                hit = d.get("extra", {}).get("hit_rate", 0)
                row = (d["seconds"], float(u), float(s), d["peak_rss_kb"] / 1024, int(flt), hit, pc[2], pc[0], pc[1])
                res.setdefault((w, t, n), []).append(row)
                print("RAW %s %s %s run%d time %.4f user %.3f sys %.3f peak %.1f faults %d hit %.4f ipi_sent %d ipi_recv %d local_mm %d"
                      % ((w, t, n, r) + row), flush=True)
for w in wls:
    for t in threads:
        ref = statistics.median(x[0] for x in res.get((w, t, "tc"), [(0,)]))
        for n in names:
            v = res[(w, t, n)]
            m = lambda i: statistics.median(x[i] for x in v)
            print("%-10s t=%s %-6s time %.4f (%.2fx tc) user %.3f sys %.3f peak %6.1f MiB faults %6d hit %.4f ipi %d/%d mmflush %d (n=%d)"
                  % (w, t, n, m(0), m(0) / ref if ref else 0, m(1), m(2), m(3), m(4), m(5), m(6), m(7), m(8), len(v)))
