#!/usr/bin/env python3
"""mpi_test.py -- pinheap one level deep under a real MPI program.

Runs test/fixture/mpi_exchange.c (built by mpicc, linked with libmpifix.so,
which needs libdemocore.so, which holds libpinheap.a) under
`mpirun -np 2 --mca btl self,vader` with mpi_leave_pinned=1 and checks, for
each rank: pinheap enabled and serving the malloc family, support level
FREE|CHUNK|MUNMAP, every exchanged byte right, every large free and the
application's munmap reported to the release listener.

With --log-info, the program runs under PINHEAP_LOG_LEVEL=info and each
rank must say its decision, installation and support level, one line each
(pinheap: info: rank R, pid P: ...), with nothing else changed.

usage: mpi_test.py [--log-info] APP MPIRUN PARAM_PREFIX
Prints "ok"/"FAIL"/"SKIP" lines and "N passed, M failed" last; exit 1 on
failure.  No mpicc or mpirun: one SKIP line with the reason, exit 0.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import mpi_json  # noqa: E402

ENABLED_LEVEL = 7
results = {"passed": 0, "failed": 0}


def check(cond, what):
    results["passed" if cond else "failed"] += 1
    print(("ok   " if cond else "FAIL ") + what)


def main():
    args = sys.argv[1:]
    log_info = args[:1] == ["--log-info"]
    if log_info:
        args = args[1:]
    app, mpirun, prefix = args[0], args[1], args[2]
    if not mpirun or mpirun.endswith("-NOTFOUND") or not os.path.exists(app):
        print("SKIP mpi_exchange: mpicc/mpirun not found (Debian: openmpi-bin libopenmpi-dev)")
        return 0
    argv = [mpirun, "-np", "2", "--oversubscribe", "--mca", "btl", "self,vader",
            "-x", prefix + "mpi_leave_pinned=1"]
    if log_info:
        argv += ["-x", "PINHEAP_LOG_LEVEL=info"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    env = dict(os.environ)
    env.pop("PINHEAP_MODE", None)
    p = subprocess.run(argv + [app], env=env, capture_output=True, text=True, timeout=240)
    ranks = mpi_json.by_rank(p.stdout)
    check(p.returncode == 0, "mpirun -np 2 exits 0 (rc %d; %s)" % (p.returncode, p.stderr.strip()[-400:]))
    lines = (p.stdout + p.stderr).splitlines()
    warned = [l for l in lines if "pinheap:" in l and not l.startswith("pinheap: info: ")]
    check(not warned, "no warning from pinheap (%s)" % "; ".join(warned[:3]))
    said = [l for l in lines if l.startswith("pinheap: info: ")]
    if log_info:
        for r in (0, 1):
            head = r"^pinheap: info: rank %d, pid [0-9]+: " % r
            for what, tail in (("decision", r"decision: enabled: mpi_leave_pinned=1 "),
                               ("installation", r"installation: \S"),
                               ("support level", r"support level: FREE\|CHUNK\|MUNMAP \(7\): ")):
                n = sum(1 for l in said if re.match(head + tail, l))
                check(n == 1, "rank %d says its %s at level info, once (%d lines; %s)"
                      % (r, what, n, "; ".join(said)[:300]))
    else:
        check(not said, "nothing said at level info by default (%s)" % "; ".join(said[:2]))
    check(sorted(ranks) == [0, 1], "both ranks report (%s)" % p.stdout.strip()[-400:])
    for r in sorted(ranks):
        d = ranks[r]
        check(d["enabled"] == 1, "rank %d: pinheap serves malloc (%s)" % (r, d["support"][:300]))
        check(d["level"] == ENABLED_LEVEL,
              "rank %d: support level FREE|CHUNK|MUNMAP (got %d)" % (r, d["level"]))
        check(d["served"] == d["total"] and d["total"] > 0,
              "rank %d: every buffer from pinheap (%d of %d)" % (r, d["served"], d["total"]))
        check(d["errors"] == 0 and d["checked"] > 0,
              "rank %d: data checked (%d buffers received right, %d errors)" % (r, d["checked"], d["errors"]))
        check(d["unreleased"] == 0 and d["released"] > 0,
              "rank %d: every large free reported (%d reported, %d missed)"
              % (r, d["released"], d["unreleased"]))
        check(d["munmap_seen"] == 1, "rank %d: the application's munmap reported" % r)
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
