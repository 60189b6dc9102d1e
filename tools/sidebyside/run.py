#!/usr/bin/env python3
"""run.py -- pinheap and UCX's libucm side by side (issue 10, item 6).

Runs the release scenarios of scenarios.c against each observer:
  pinheap on    pinheap's VM_UNMAPPED events, PINHEAP_MODE=on (its malloc)
  pinheap off   the same, PINHEAP_MODE=off (glibc's malloc)
  ucx           UCX's libucm VM_UNMAPPED events, UCX's defaults
and prints, per scenario, which heard the release ("kept": no release took
place, the memory stayed mapped and resident; "missed": released unheard);
then the start-up each
adds to a trivial program (wall time of `--startup`, interleaved runs,
medians, minus the same program with no observer).

Usage: run.py BINDIR [--runs N] [--check]
  BINDIR   the build's tools/sidebyside directory (sbs_pinheap, sbs_ucx, sbs_none)
  --runs   start-up runs per configuration, interleaved (default 21, at least 5)
  --check  the smoke test: fail ("FAIL ...") unless every observer hears the
           program's own munmap, madvise and mmap(MAP_FIXED), and an unknown
           scenario is refused by name; prints "sidebyside-ok" at the end
"""
import os
import statistics
import subprocess
import sys
import time

CONFIGS = [("pinheap on", "sbs_pinheap", {"PINHEAP_MODE": "on"}),
           ("pinheap off", "sbs_pinheap", {"PINHEAP_MODE": "off"}),
           ("ucx", "sbs_ucx", {})]
MUST_HEAR = ("munmap", "madvise", "mmap_fixed")


def usage(msg):
    print("run.py: " + msg, file=sys.stderr)
    print(__doc__.split("\n\n", 2)[2], file=sys.stderr)
    sys.exit(2)


def clean_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PINHEAP_", "UCX_", "LD_PRELOAD"))}
    env["UCX_LOG_LEVEL"] = "warn"
    env.update(extra)
    return env


def run_scenarios(path, extra):
    p = subprocess.run([path], env=clean_env(extra), capture_output=True, text=True, timeout=300)
    rows = {}
    for line in p.stdout.splitlines():
        parts = line.split(" ", 3)
        if len(parts) >= 3 and parts[2] in ("heard", "kept", "missed", "skip"):
            rows[parts[1]] = parts[2] if parts[2] != "skip" else "skip (%s)" % (
                parts[3] if len(parts) > 3 else "")
    if p.returncode != 0:
        rows["__error__"] = "exit %d: %s%s" % (p.returncode, p.stdout[-300:], p.stderr[-300:])
    return rows


def startup_us(bindir, configs, runs):
    """Median wall time of `--startup` per config, runs interleaved."""
    times = {name: [] for name, _, _ in configs}
    for _ in range(runs):
        for name, binary, extra in configs:
            env = clean_env(extra)
            t0 = time.perf_counter()
            p = subprocess.run([os.path.join(bindir, binary), "--startup"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            dt = time.perf_counter() - t0
            if p.returncode != 0:
                raise SystemExit("FAIL %s --startup exited %d" % (binary, p.returncode))
            times[name].append(dt * 1e6)
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        usage("the first argument must be the build's tools/sidebyside directory")
    bindir, runs, check = args[0], 21, False
    i = 1
    while i < len(args):
        if args[i] == "--runs" and i + 1 < len(args):
            try:
                runs = int(args[i + 1])
            except ValueError:
                usage("--runs '%s' is not a whole number" % args[i + 1])
            i += 2
        elif args[i] == "--check":
            check = True
            i += 1
        else:
            usage("unknown argument '%s'" % args[i])
    if runs < 5:
        usage("--runs %d: runs must be at least 5 (medians of interleaved runs)" % runs)
    if not os.path.exists(os.path.join(bindir, "sbs_pinheap")):
        usage("%s has no sbs_pinheap: build the tools first" % bindir)

    configs = [c for c in CONFIGS if os.path.exists(os.path.join(bindir, c[1]))]
    if len(configs) < len(CONFIGS):
        print("SKIP ucx column: sbs_ucx was not built (UCX's libucm not found; "
              "apt-get install libucx-dev)")
    results = {name: run_scenarios(os.path.join(bindir, binary), extra)
               for name, binary, extra in configs}
    failures = 0
    for name, rows in results.items():
        if "__error__" in rows:
            print("FAIL %s: %s" % (name, rows["__error__"]))
            failures += 1
    scenarios = []
    for rows in results.values():
        for s in rows:
            if s != "__error__" and s not in scenarios:
                scenarios.append(s)
    width = max(len(s) for s in scenarios) + 2
    print("%-*s" % (width, "release") + "".join("%-14s" % n for n, _, _ in configs))
    for s in scenarios:
        print("%-*s" % (width, s) + "".join(
            "%-14s" % results[n].get(s, "-").split(" ")[0] for n, _, _ in configs))
    for name, rows in results.items():
        for s, v in rows.items():
            if v.startswith("skip"):
                print("  %s %s: %s" % (name, s, v))
    heard = {n: sum(1 for v in r.values() if v == "heard") for n, r in results.items()}
    print("heard: " + ", ".join("%s %d of %d" % (n, heard[n], len(scenarios)) for n in heard))

    base = [("none", "sbs_none", {})]
    med = startup_us(bindir, base + configs, runs)
    print("start-up added to a trivial program (median of %d interleaved runs, wall time): "
          % runs + ", ".join("%s %+.0f us" % (n, med[n] - med["none"]) for n, _, _ in configs)
          + " (no observer: %.0f us)" % med["none"])

    if check:
        for name, rows in results.items():
            for s in MUST_HEAR:
                if rows.get(s) != "heard":
                    print("FAIL %s did not hear the program's %s (%s)" % (name, s, rows.get(s)))
                    failures += 1
        p = subprocess.run([os.path.join(bindir, "sbs_none"), "no_such_scenario"],
                           capture_output=True, text=True)
        if p.returncode != 64 or "unknown scenario 'no_such_scenario'" not in p.stderr:
            print("FAIL an unknown scenario is not refused by name: %r" % p.stderr)
            failures += 1
        if failures == 0:
            print("sidebyside-ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
