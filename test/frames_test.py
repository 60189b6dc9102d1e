#!/usr/bin/env python3
"""frames_test.py -- runs the frame-level proof (test/fixture/frames.c).

For each configuration of the core library -- direct, transitive, late
(dlopen RTLD_LOCAL) -- with leave-pinned on: zero missed notifications; and
on x86-64 with pinheap disabled (glibc's malloc) and libc's entry points
code patched: zero missed notifications through glibc's own releases.
The same program with no listener registered must see misses (the check
itself is not blind).  Spurious invalidations are reported, not judged.

usage: frames_test.py TEST_BUILD_DIR
Prints "ok"/"FAIL"/"SKIP" lines and "N passed, M failed"; exit 1 on failure.
"""
import json
import os
import platform
import subprocess
import sys

results = {"passed": 0, "failed": 0}


def check(cond, what):
    results["passed" if cond else "failed"] += 1
    print(("ok   " if cond else "FAIL ") + what)


def run(build, cfg, blind=False, extra=None):
    core = os.path.join(build, "libdemocore.so") if cfg == "late" else "libdemocore.so"
    argv = [os.path.join(build, "frames_" + cfg), cfg, core] + (["blind"] if blind else [])
    env = dict(os.environ)
    env.pop("PINHEAP_MODE", None)
    env.pop("PINHEAP_CODE_PATCH", None)
    env["OMPI_MCA_mpi_leave_pinned"] = "1"
    env.update(extra or {})
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), p
    except (ValueError, IndexError):
        return None, p


# (label, configuration, environment): pinheap's malloc in the three ways
# the core library can be loaded; then glibc's malloc (pinheap disabled)
# with libc's entry points code patched, x86-64 only: glibc's own frees,
# trims, arena shrinking and stack releases must be heard too.
RUNS = [("direct", "direct", {}), ("transitive", "transitive", {}), ("late", "late", {})]
if platform.machine() == "x86_64":
    RUNS.append(("disabled, code patched", "transitive", {"PINHEAP_MODE": "off"}))


def main():
    build = sys.argv[1]
    if platform.machine() != "x86_64":
        print("SKIP disabled, code patched: no code patching on %s" % platform.machine())
    for label, cfg, extra in RUNS:
        d, p = run(build, cfg, extra=extra)
        check(d is not None and p.returncode == 0,
              "%s: the program reports (rc %d; %s)" % (label, p.returncode, p.stderr.strip()[-300:]))
        if d is None:
            continue
        if "skipped" in d:
            print("SKIP %s: %s" % (label, d["skipped"]))
            continue
        missed = ", ".join("%s %d" % (s["name"], s["misses"]) for s in d["steps"] if s["misses"])
        check(d["misses"] == 0, "%s: zero missed notifications (%d missed: %s; level %d; %s)"
              % (label, d["misses"], missed or "-", d["level"], d["support"][:200]))
        if extra.get("PINHEAP_MODE") == "off":
            check(d["enabled"] == 0 and d["level"] == 7,
                  "%s: glibc's malloc in use, support level FREE|CHUNK|MUNMAP (enabled %d, "
                  "level %d)" % (label, d["enabled"], d["level"]))
        print("     %s: %d events heard, %d spurious invalidations, %d steps"
              % (label, d["events"], d["spurious"], len(d["steps"])))
        b, p = run(build, cfg, blind=True, extra=extra)
        check(b is not None and b.get("misses", 0) > 0,
              "%s, no listener: misses seen (%s)" % (label, b and b.get("misses")))
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
