#!/usr/bin/env python3
# run.py [ROUNDS] -- builds rseq_probe.c and runs every mode x thread count
# interleaved ROUNDS times (default 7); prints the medians and the spread.
import json, os, statistics, subprocess, sys, tempfile
here = os.path.dirname(os.path.abspath(__file__))
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
exe = os.path.join(tempfile.mkdtemp(), "rseq_probe")
subprocess.run(["cc", "-O2", "-Wall", "-pthread", os.path.join(here, "rseq_probe.c"), "-o", exe],
               check=True)
cells = [(m, t) for t in (1, 2, 8, 32) for m in ("tls", "rseq", "lock")]
res = {}
for r in range(rounds):
    for m, t in cells:
        p = subprocess.run([exe, m, str(t), str(20000000 // t)], capture_output=True, text=True)
        if p.returncode == 77:
            print(p.stdout.strip()); sys.exit(77)
        if p.returncode != 0:
            sys.exit("rseq_probe %s %d failed: %s%s" % (m, t, p.stdout, p.stderr))
        res.setdefault((m, t), []).append(json.loads(p.stdout))
print("| threads | mode | CPU ns per pop+push pair (median, min-max) | aborts per million pairs (max) |")
print("|---:|---|---:|---:|")
for m, t in cells:
    v = [d["cpu_ns_per_pair"] for d in res[(m, t)]]
    a = max(d["aborts_per_million"] for d in res[(m, t)])
    print("| %d | %s | %.2f (%.2f-%.2f) | %.2f |" % (t, m, statistics.median(v), min(v), max(v), a))
