#!/usr/bin/env python3
"""frames_test.py -- runs the frame-level proof (test/fixture/frames.c).

The registration cache hears releases from one consumer (--consumer):

pinheap (default): pinheap's own release listeners.  For each configuration
  of the core library -- direct, transitive, late (dlopen RTLD_LOCAL) --
  with leave-pinned on: zero missed notifications; and on x86-64 with
  pinheap disabled (glibc's malloc) and libc's entry points code patched:
  zero missed notifications through glibc's own releases.
patcher: test/fixture/fakepatcher.c, a code patcher of libc that pinheap
  does not know by name, installed after pinheap started (direct,
  transitive, preload) or before (late).  Zero misses with pinheap enabled
  and disabled, except where a libc patcher cannot hear anything whoever
  serves malloc: dlclose (ld.so unmaps with its own munmap), punch_hole and
  ftruncate (no memory call is made).  x86-64 only.
opal: Open MPI's memory hooks, in an mpicc-built program under
  mpirun -np 2 (each rank checks its own frames): preload, direct,
  transitive, and late (Open MPI's patcher on before the core library is
  loaded), pinheap enabled and disabled: zero misses on every rank; and
  with Open MPI's patcher excluded (--mca memory ^patcher; the program sets
  Open MPI's support level as a memory component would), preload and
  transitive: zero misses from pinheap's feed alone.
ucx: UCX's own registration cache (ucs_rcache): a registration is stale
  when a get of its range hits while a frame behind it changed.  Preload,
  direct, transitive, pinheap enabled and disabled: zero stale ones.

Every configuration also runs with no callback registered: it must see
misses (the check itself is not blind).  Spurious invalidations are
reported, not judged.

usage: frames_test.py TEST_BUILD_DIR [--consumer pinheap|patcher|opal|ucx]
                      [--shim PRELOAD_SHIM] [--mpirun MPIRUN]
                      [--param-prefix OMPI_MCA_]
Prints "ok"/"FAIL"/"SKIP" lines and "N passed, M failed"; exit 1 on failure.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

results = {"passed": 0, "failed": 0}
# Steps no consumer hooking libc's memory calls can hear, whoever serves
# malloc: ld.so unmaps with its own munmap (dlclose); a hole punched in a
# mapped file and a mapped file cut short release pages with no memory call
# at all (pinheap hears them at fallocate and ftruncate, hooks/files.c).
LIBC_BLIND = {"patcher": {"dlclose", "punch_hole", "ftruncate"}}


def check(cond, what):
    results["passed" if cond else "failed"] += 1
    print(("ok   " if cond else "FAIL ") + what)


def reports(stdout):
    out = []
    for line in stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def run(args, exe, cfg, blind=False, extra=None):
    """The reports of one run (one per rank under mpirun), and the process."""
    build = args.build
    core = {"late": os.path.join(build, "libdemocore.so"), "preload": args.shim}.get(
        cfg, "libdemocore.so")
    argv = [os.path.join(build, exe + "_" + cfg), cfg, core] + (["blind"] if blind else [])
    env = dict(os.environ)
    env.pop("PINHEAP_MODE", None)
    env.pop("PINHEAP_CODE_PATCH", None)
    env["OMPI_MCA_mpi_leave_pinned"] = "1"
    env[args.param_prefix + "mpi_leave_pinned"] = "1"
    env["FRAMES_CONSUMER"] = args.consumer
    env.update(extra or {})
    if cfg == "preload":
        env["LD_PRELOAD"] = args.shim
    outdir = None
    if args.consumer == "opal":
        # each rank writes its report to a file: mpirun forwards output in
        # 2 KiB pieces and interleaves the two ranks' lines
        outdir = tempfile.mkdtemp(prefix="frames-")
        env["FRAMES_REPORT_DIR"] = outdir
        fwd = []
        for k in ("OMPI_MCA_mpi_leave_pinned", args.param_prefix + "mpi_leave_pinned",
                  "FRAMES_CONSUMER", "PINHEAP_MODE", "LD_PRELOAD", "FRAMES_OPAL_PATCHER",
                  "OMPI_MCA_memory", "FRAMES_REPORT_DIR"):
            if k in env:
                fwd += ["-x", k]
        argv = [args.mpirun, "-np", "2", "--oversubscribe", "--mca", "btl", "self,vader"] + fwd + (
            ["--allow-run-as-root"] if os.geteuid() == 0 else []) + argv
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=400)
    if outdir is None:
        return reports(p.stdout), p
    text = ""
    for name in sorted(os.listdir(outdir)):
        with open(os.path.join(outdir, name)) as f:
            text += f.read()
    shutil.rmtree(outdir, ignore_errors=True)
    return reports(text + p.stdout), p


def judge(label, d, consumer):
    blind_steps = LIBC_BLIND.get(consumer, set())
    missed = [s for s in d["steps"] if s["misses"] and s["name"] not in blind_steps]
    check(not missed, "%s: zero missed notifications (%s; level %d; %s)"
          % (label, ", ".join("%s %d" % (s["name"], s["misses"]) for s in missed) or "none",
             d["level"], d["support"][:160]))
    print("     %s: %d events heard, %d spurious invalidations, %d steps"
          % (label, d["events"], d["spurious"], len(d["steps"])))


def one(args, exe, label, cfg, extra, ranks):
    if cfg == "preload" and not args.shim:
        print("SKIP %s: no preload shim in this build (PINHEAP_BUILD_TOOLS=OFF)" % label)
        return
    got, p = run(args, exe, cfg, extra=extra)
    check(p.returncode == 0 and len(got) == ranks,
          "%s: the program reports (rc %d, %d of %d reports; %s)"
          % (label, p.returncode, len(got), ranks, p.stderr.strip()[-300:]))
    if not got:
        return
    if any("skipped" in d for d in got):
        print("SKIP %s: %s" % (label, got[0].get("skipped")))
        return
    for i, d in enumerate(got):
        judge(label + (" rank %d" % i if ranks > 1 else ""), d, args.consumer)
        if extra.get("PINHEAP_MODE") == "off":
            check(d["enabled"] == 0, "%s: pinheap disabled, glibc's malloc in use" % label)
        elif cfg != "late":        # a late load leaves malloc to glibc (PINHEAP_LATE_MALLOC)
            check(d["enabled"] == 1, "%s: pinheap serves malloc" % label)
    blind, p = run(args, exe, cfg, blind=True, extra=extra)
    check(bool(blind) and all(b.get("misses", 0) > 0 for b in blind),
          "%s, no callback: misses seen (%s)" % (label, [b.get("misses") for b in blind]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--consumer", default="pinheap", choices=["pinheap", "patcher", "opal", "ucx"])
    ap.add_argument("--shim", default="")
    ap.add_argument("--mpirun", default="")
    ap.add_argument("--param-prefix", default="OMPI_MCA_")
    args = ap.parse_args()
    x86 = platform.machine() == "x86_64"
    on, off = {}, {"PINHEAP_MODE": "off"}

    if args.consumer == "pinheap":
        # pinheap's malloc in the three ways the core library can be loaded;
        # then glibc's malloc (pinheap disabled) with libc's entry points
        # code patched, x86-64 only: glibc's own frees, trims, arena
        # shrinking and stack releases must be heard too.
        runs = [("direct", "direct", on), ("transitive", "transitive", on), ("late", "late", on)]
        if x86:
            runs.append(("disabled, code patched", "transitive", off))
        else:
            print("SKIP disabled, code patched: no code patching on %s" % platform.machine())
        for label, cfg, extra in runs:
            got, p = run(args, "frames", cfg, extra=extra)
            d = got[0] if got else None
            check(d is not None and p.returncode == 0,
                  "%s: the program reports (rc %d; %s)" % (label, p.returncode, p.stderr.strip()[-300:]))
            if d is None:
                continue
            if "skipped" in d:
                print("SKIP %s: %s" % (label, d["skipped"]))
                continue
            judge(label, d, "pinheap")
            if extra.get("PINHEAP_MODE") == "off":
                check(d["enabled"] == 0 and d["level"] == 7,
                      "%s: glibc's malloc in use, support level FREE|CHUNK|MUNMAP (enabled %d, "
                      "level %d)" % (label, d["enabled"], d["level"]))
            b, p = run(args, "frames", cfg, blind=True, extra=extra)
            check(bool(b) and b[0].get("misses", 0) > 0,
                  "%s, no listener: misses seen (%s)" % (label, b and b[0].get("misses")))
    elif args.consumer == "patcher":
        if not x86:
            print("SKIP frames_patcher: the fixture patcher writes x86-64 code, this is %s"
                  % platform.machine())
        else:
            for cfg, when in (("direct", "after"), ("transitive", "after"), ("preload", "after"),
                              ("late", "before")):
                for mode, extra in (("enabled", on), ("disabled", off)):
                    one(args, "frames_patcher", "%s, patcher %s pinheap, %s" % (cfg, when, mode),
                        cfg, extra, 1)
            # hooks whose "original" is pinheap's interposer: back into
            # pinheap for the same call, which must then go to the kernel
            for cfg in ("direct", "transitive"):
                one(args, "frames_patcher", "%s, patcher chaining to pinheap's munmap" % cfg,
                    cfg, {"FAKEPATCHER_CHAIN": "next"}, 1)
    elif args.consumer == "ucx":
        if not os.path.exists(os.path.join(args.build, "frames_ucx_direct")):
            print("SKIP frames_ucx: UCX (ucs/memory/rcache.h, libucs, libucm) not found: "
                  "apt-get install libucx-dev")
        else:
            for cfg in ("preload", "direct", "transitive"):
                for mode, extra in (("enabled", on), ("disabled", off)):
                    one(args, "frames_ucx", "%s, %s, UCX's ucs_rcache" % (cfg, mode), cfg, extra, 1)
    else:
        if not args.mpirun or args.mpirun.endswith("-NOTFOUND") or not os.path.exists(
                os.path.join(args.build, "frames_opal_direct")):
            print("SKIP frames_opal: mpicc/mpirun not found (Debian: openmpi-bin libopenmpi-dev)")
        else:
            for cfg in ("preload", "direct", "transitive", "late"):
                for mode, extra in (("enabled", on), ("disabled", off)):
                    one(args, "frames_opal", "%s, %s, Open MPI's hooks" % (cfg, mode), cfg, extra, 2)
            # Open MPI's patcher excluded: its callbacks hear pinheap alone
            nopatch = {"FRAMES_OPAL_PATCHER": "off", "OMPI_MCA_memory": "^patcher"}
            for cfg in ("preload", "transitive"):
                for mode, extra in (("enabled", on), ("disabled", off)):
                    one(args, "frames_opal", "%s, %s, Open MPI's hooks without its patcher"
                        % (cfg, mode), cfg, dict(extra, **nopatch), 2)
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
