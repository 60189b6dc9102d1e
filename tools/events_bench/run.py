#!/usr/bin/env python3
"""run.py -- what installation and memory events cost (issue 9's targets).

usage: run.py BUILD_DIR [--runs N] [--iterations N] [--no-callgrind] [--json FILE]

Start-up.  events_startup is a trivial program whose core library
(libeventscore.so, libpinheap.a whole) is a dependency of a dependency, so
pinheap is behind libc in symbol lookup and installation patches relocations
before main.  Six configurations run interleaved, N times each:
the decision disabled or enabled (OMPI_MCA_mpi_leave_pinned=1: the malloc
family is patched too), each with PINHEAP_PATCH=1 (code patching of libc's
eight memory functions included), PINHEAP_PATCH=1 PINHEAP_CODE_PATCH=0, and
PINHEAP_PATCH=0.  Reported:
  - the installation time pinheap measures itself (its support text says
    "Installation took N us"), median;
  - the wall time of the whole process (fork, exec, ld.so, constructors,
    exit), median, and the difference PATCH=1 minus PATCH=0;
  - what code patching adds: installation time and wall time with
    PINHEAP_CODE_PATCH=1 minus =0 (paired per run), and instructions;
  - when valgrind is installed: the instructions the process executes under
    callgrind (PINHEAP_MODE=on, since pinheap stands aside under valgrind
    otherwise), PATCH=1 minus PATCH=0 -- stable where the clock is not;
  - for reference, the wall time UCX's libucs adds to the same program
    (LD_PRELOAD=libucs.so.0) when it is installed.

Event cost.  events_munmap_cost times map+unmap pairs through pinheap's
munmap with no handler, one VM_UNMAPPED handler and one MUNMAP handler,
against the bare system call (medians of 9 interleaved rounds), and glibc's
own munmap -- code-patched to jump to pinheap -- with one VM_UNMAPPED
handler, and, under callgrind, counts the instructions each adds per call.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

LIBUCS = "/usr/lib/x86_64-linux-gnu/libucs.so.0"


def die(msg):
    print("run.py: " + msg, file=sys.stderr)
    sys.exit(2)


def env_for(enabled, patch, extra=None, code=1):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("PINHEAP_", "OMPI_MCA_mpi_leave_pinned")) or k == "LD_PRELOAD":
            del env[k]
    env["PINHEAP_PATCH"] = "1" if patch else "0"
    env["PINHEAP_CODE_PATCH"] = "1" if code else "0"
    if enabled:
        env["OMPI_MCA_mpi_leave_pinned"] = "1"
    if extra:
        env.update(extra)
    return env


def run_once(prog, env):
    t0 = time.perf_counter()
    p = subprocess.run([prog], env=env, capture_output=True, text=True)
    wall = (time.perf_counter() - t0) * 1e6
    if p.returncode != 0:
        die("%s exited with %d: %s" % (prog, p.returncode, p.stderr.strip()))
    m = re.search(r"Installation took (\d+) us", p.stdout)
    if m is None:
        die("%s printed no installation time: %r" % (prog, p.stdout[:300]))
    if "pinheap:" in p.stderr:
        die("%s warned: %s" % (prog, p.stderr.strip()))
    return int(m.group(1)), wall, p.stdout


def callgrind_ir(argv, env):
    # --smc-check=all: code patching rewrites libc's text after it is mapped
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        "--smc-check=all"] + argv,
                       env=env, capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", p.stderr)
    if p.returncode != 0 or m is None:
        die("callgrind of %s failed: %s" % (" ".join(argv), p.stderr.strip()[-500:]))
    return int(m.group(1))


def startup(bdir, runs, use_cg):
    prog = os.path.join(bdir, "tools", "events_bench", "events_startup")
    if not os.access(prog, os.X_OK):
        die("no %s: build the project first (cmake --build %s)" % (prog, bdir))
    # (decision enabled, PINHEAP_PATCH, PINHEAP_CODE_PATCH)
    configs = [(e, p, c) for e in (0, 1) for (p, c) in ((1, 1), (1, 0), (0, 1))]
    inst = {c: [] for c in configs}
    wall = {c: [] for c in configs}
    texts = {}
    ucs = []
    have_ucs = os.path.exists(LIBUCS)
    def env_of(c, extra=None):
        return env_for(c[0], c[1], extra, code=c[2])
    for c in configs:                     # warm the page cache
        run_once(prog, env_of(c))
    for r in range(runs):
        k = r % len(configs)
        order = configs[k:] + configs[:k]
        for c in order:
            us, w, out = run_once(prog, env_of(c))
            inst[c].append(us)
            wall[c].append(w)
            texts[c] = out.strip()
        if have_ucs:
            _, w, _ = run_once(prog, env_of((0, 0, 1), {"LD_PRELOAD": LIBUCS}))
            ucs.append(w)
    res = {"runs": runs, "configs": []}
    for e in (0, 1):
        on, nocode, off = (e, 1, 1), (e, 1, 0), (e, 0, 1)
        row = {"decision": "enabled" if e else "disabled",
               "install_us_median": statistics.median(inst[on]),
               "install_us_nocode_median": statistics.median(inst[nocode]),
               "install_us_patch0_median": statistics.median(inst[off]),
               "code_install_added_us": statistics.median(
                   [a - b for a, b in zip(inst[on], inst[nocode])]),
               "wall_us_patch1": statistics.median(wall[on]),
               "wall_us_nocode": statistics.median(wall[nocode]),
               "wall_us_patch0": statistics.median(wall[off]),
               "wall_added_us": statistics.median(
                   [a - b for a, b in zip(wall[on], wall[off])]),
               "code_wall_added_us": statistics.median(
                   [a - b for a, b in zip(wall[on], wall[nocode])]),
               "text": texts[on]}
        if use_cg and e:
            i1 = callgrind_ir([prog], env_of(on, {"PINHEAP_MODE": "on"}))
            inc = callgrind_ir([prog], env_of(nocode, {"PINHEAP_MODE": "on"}))
            i0 = callgrind_ir([prog], env_of(off, {"PINHEAP_MODE": "on"}))
            row["instructions_patch1"] = i1
            row["instructions_nocode"] = inc
            row["instructions_patch0"] = i0
            row["instructions_added"] = i1 - i0
            row["code_instructions_added"] = i1 - inc
        res["configs"].append(row)
    if have_ucs:
        res["libucs_wall_added_us"] = statistics.median(
            [a - b for a, b in zip(ucs, wall[(0, 0, 1)])])
    return res


def munmap_cost(bdir, iterations, use_cg):
    prog = os.path.join(bdir, "tools", "events_bench", "events_munmap_cost")
    p = subprocess.run([prog, str(iterations)], env=env_for(0, 1), capture_output=True, text=True)
    if p.returncode != 0:
        die("%s failed: %s" % (prog, p.stderr.strip()))
    res = json.loads(p.stdout)
    if use_cg:
        per = {}
        cfgs = ("raw", "none", "vm_unmapped", "munmap")
        if res.get("patched_added_ns") is not None:
            cfgs += ("patched",)
        for cfg in cfgs:
            # under valgrind pinheap patches libc's code only when forced
            env = env_for(0, 1, {"PINHEAP_MODE": "on"} if cfg == "patched" else None)
            a = callgrind_ir([prog, "--only", cfg, "1000"], env)
            b = callgrind_ir([prog, "--only", cfg, "3000"], env)
            per[cfg] = (b - a) / 2000.0
        res["instructions_per_pair"] = per
        res["instructions_added"] = {k: per[k] - per["raw"] for k in cfgs if k != "raw"}
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("--runs", type=int, default=31)
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--no-callgrind", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.runs < 5:
        die("--runs must be at least 5 (medians), got %d" % a.runs)
    if a.iterations <= 0:
        die("--iterations must be positive, got %d" % a.iterations)
    use_cg = not a.no_callgrind and shutil.which("valgrind") is not None
    if not use_cg and not a.no_callgrind:
        print("run.py: valgrind not installed: no instruction counts", file=sys.stderr)

    s = startup(a.build_dir, a.runs, use_cg)
    m = munmap_cost(a.build_dir, a.iterations, use_cg)

    print("Start-up of a trivial program, core library behind libc "
          "(medians of %d interleaved runs per configuration)" % s["runs"])
    print("%-9s %12s %12s %12s %14s %12s %12s %14s" % (
        "decision", "install us", "wall +us", "wall us", "instr added" if use_cg else "",
        "code inst+us", "code wall+us", "code instr+" if use_cg else ""))
    for r in s["configs"]:
        print("%-9s %12.0f %12.0f %12.0f %14s %12.0f %12.0f %14s" % (
            r["decision"], r["install_us_median"], r["wall_added_us"], r["wall_us_patch1"],
            "{:,}".format(r["instructions_added"]) if "instructions_added" in r else "",
            r["code_install_added_us"], r["code_wall_added_us"],
            "{:,}".format(r["code_instructions_added"]) if "code_instructions_added" in r else ""))
    if "libucs_wall_added_us" in s:
        print("reference: loading UCX's libucs into the same program adds %.0f us of wall time"
              % s["libucs_wall_added_us"])
    print("  install us: pinheap's own clock around installation (PATCH=1);")
    print("  wall +us: process wall time PINHEAP_PATCH=1 minus PINHEAP_PATCH=0, paired per run;")
    print("  code ...: what code patching of libc's eight memory functions adds (PINHEAP_CODE_PATCH"
          "=1 minus =0,\n  paired per run): installation time, wall time, instructions;")
    if use_cg:
        print("  instr added: the same difference in instructions under callgrind, with "
              "PINHEAP_MODE=on\n  (under valgrind pinheap patches only when forced, which also "
              "enables the decision).")
    print()
    print("munmap of one page, added to a bare system call (map+unmap pair %.0f ns, "
          "medians of %d rounds)" % (m["raw_pair_ns"], m["rounds"]))
    print("%-22s %10s %14s" % ("handlers", "ns added", "instr added" if use_cg else ""))
    for k, label in (("none", "none"), ("vm_unmapped", "one VM_UNMAPPED"), ("munmap", "one MUNMAP"),
                     ("patched", "glibc's, one VM_UNM.")):
        if m.get(k + "_added_ns") is None:
            print("%-22s %10s   (glibc's munmap is not code-patched)" % (label, "-"))
            continue
        print("%-22s %10.1f %14s" % (label, m[k + "_added_ns"],
                                     "%.0f" % m["instructions_added"][k] if use_cg else ""))
    print("  glibc's: a call of glibc's own munmap, which code patching made jump to pinheap")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"startup": s, "munmap": m}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
