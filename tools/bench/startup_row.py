#!/usr/bin/env python3
"""startup_row.py -- what pinheap adds to a process's start-up in the
transitive case, with code patching.  Main entry points: measure() (used by
run.py's Targets table) and main().

Builds two copies of a trivial program linked the way an MPI application
is: program -> libdemompi.so (an "MPI library") -> libdemocore.so (the
"core library").  In copy A the core library holds the pinheap archive
whole (as libopen-pal would); in copy B it is empty.  pinheap sits one
level deep, behind glibc in symbol lookup, so it installs itself by
relocation patching; the runs set the leave-pinned parameter
(OMPI_MCA_mpi_leave_pinned=1 with the default names) so that it does.  The
program calls into the MPI library, makes and frees 64 small blocks and
exits.

The wall time comes from alternated runs, A B, B A, A B, ... (the order
flips every pair), and the figure is the median of the per-pair
differences A - B: a drift of the machine hits both runs of a pair alike
and cancels.  Beside it: each copy's median, the callgrind instruction
counts of one run of each, and the peak RSS (VmHWM) of each (the
trivial-program footprint).  A "who" run of each copy first checks that A
runs on pinheap, installed, and B on glibc.

usage: startup_row.py [--build DIR] [--pairs N] [--check]
Python 3 standard library; needs cc (and valgrind for the instructions).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PAIRS_DEFAULT = 200

CORE = r"""
int democore_version(void);
int democore_version(void) { return 1; }
"""

MPI = r"""
int democore_version(void);
int demompi_init(void);
int demompi_init(void) { return democore_version(); }
"""

APP = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int demompi_init(void);
static long vm_hwm_kb(void)
{
  char line[256];
  long kb = -1;
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL)
    return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmHWM:", 6) == 0)
      kb = atol(line + 6);
  fclose(f);
  return kb;
}
int main(int argc, char **argv)
{
  void *volatile keep[64];
  if (demompi_init() != 1)
    return 1;
  for (int i = 0; i < 64; i++)
    keep[i] = malloc(16 + (size_t)i * 32);
  for (int i = 0; i < 64; i++)
    free(keep[i]);
  if (argc > 1 && strcmp(argv[1], "who") == 0) {
    int (*en)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, PREFIX "enabled");
    const char *(*inst)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, PREFIX "install_text");
    const char *(*dec)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, PREFIX "decision_text");
    printf("{\"enabled\": %d, \"install\": \"%s\", \"decision\": \"%s\", \"vm_hwm_kb\": %ld}\n",
           en ? en() : -1, inst ? inst() : "", dec ? dec() : "", vm_hwm_kb());
  }
  return 0;
}
"""


class StartupError(Exception):
    """The row cannot be measured; the message says why."""


def config_read(build):
    """(symbol prefix, leave-pinned variable) of this build's pinheap_config.h."""
    path = os.path.join(build, "include", "pinheap_config.h")
    try:
        text = open(path).read()
    except OSError as e:
        raise StartupError("%s: %s (configure the build first)" % (path, e.strerror))

    def string(name):
        m = re.search(r'#define %s "([^"]*)"' % name, text)
        if m is None:
            raise StartupError("%s: no %s" % (path, name))
        return m.group(1)
    return (string("PINHEAP_PREFIX_STRING"),
            string("PINHEAP_PARAM_PREFIX_STRING") + string("PINHEAP_PARAM_LEAVE_PINNED_STRING"))


def cc(args):
    proc = subprocess.run(["cc"] + args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise StartupError("cc %s failed:\n%s" % (" ".join(args), proc.stderr[-800:]))


def programs_build(tmp, archive, prefix):
    """Builds A (pinheap in the core library) and B (empty core library):
    {"A": path, "B": path}."""
    srcs = {}
    for name, text in (("core.c", CORE), ("mpi.c", MPI), ("app.c", APP)):
        srcs[name] = os.path.join(tmp, name)
        with open(srcs[name], "w") as f:
            f.write(text)
    progs = {}
    for case in ("A", "B"):
        d = os.path.join(tmp, case)
        os.makedirs(d)
        core = ["-shared", "-fPIC", "-O2", srcs["core.c"], "-o", os.path.join(d, "libdemocore.so")]
        if case == "A":
            core += ["-Wl,--whole-archive", archive, "-Wl,--no-whole-archive", "-ldl", "-lpthread"]
        cc(core)
        cc(["-shared", "-fPIC", "-O2", srcs["mpi.c"], "-o", os.path.join(d, "libdemompi.so"),
            "-L" + d, "-ldemocore", "-Wl,-rpath,$ORIGIN"])
        progs[case] = os.path.join(d, "app")
        cc(["-O2", '-DPREFIX="%s"' % prefix, srcs["app.c"], "-o", progs[case], "-L" + d,
            "-ldemompi", "-Wl,-rpath,$ORIGIN", "-ldl"])
    return progs


def who(prog, env):
    proc = subprocess.run([prog, "who"], env=env, capture_output=True, text=True, timeout=60)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise StartupError("%s who: exit %d, no result line: %s %s" % (
            prog, proc.returncode, proc.stdout[-300:], proc.stderr[-300:]))


def instructions(prog, env):
    """Callgrind's instruction total of one run, or None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    cg_env = dict(env, PINHEAP_MODE="on")   # under valgrind pinheap stays off unless told
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", prog],
                          env=cg_env, capture_output=True, text=True, timeout=300)
    for line in proc.stderr.splitlines():
        if "Collected" in line:
            return int(line.split()[-1])
    return None


def measure(build, pairs=PAIRS_DEFAULT, archive=None, log=None):
    """The start-up row: a dict with added_ms (median of the per-pair
    differences A - B), a_ms, b_ms (medians), pairs, instructions_a/_b,
    rss_a_kb, rss_b_kb, install (A's install text).  Raises StartupError."""
    if shutil.which("cc") is None:
        raise StartupError("cc is not installed")
    build = os.path.abspath(build)
    archive = archive or os.path.join(build, "libpinheap.a")
    if not os.path.isfile(archive):
        raise StartupError("%s not found: build the pinheap target first" % archive)
    prefix, lp_var = config_read(build)
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), lp_var: "1"}
    tmp = tempfile.mkdtemp(prefix="pinheap-startup-")
    try:
        progs = programs_build(tmp, archive, prefix)
        wa, wb = who(progs["A"], base), who(progs["B"], base)
        if wa.get("enabled") != 1:
            raise StartupError("copy A (pinheap in the core library, %s=1) does not run on pinheap: "
                               "%s" % (lp_var, wa))
        if wb.get("enabled") != -1:
            raise StartupError("copy B (empty core library) found a pinheap: %s" % wb)
        for prog in progs.values():          # warm the page cache
            subprocess.run([prog], env=base, check=True)
        ta, tb, diff = [], [], []
        for i in range(pairs):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            t = {}
            for case in order:
                start = time.perf_counter()
                proc = subprocess.run([progs[case]], env=base)
                t[case] = time.perf_counter() - start
                if proc.returncode != 0:
                    raise StartupError("copy %s exited with %d" % (case, proc.returncode))
            ta.append(t["A"])
            tb.append(t["B"])
            diff.append(t["A"] - t["B"])
        rss_a = statistics.median(who(progs["A"], base)["vm_hwm_kb"] for _ in range(5))
        rss_b = statistics.median(who(progs["B"], base)["vm_hwm_kb"] for _ in range(5))
        row = {"pairs": pairs, "added_ms": statistics.median(diff) * 1e3,
               "a_ms": statistics.median(ta) * 1e3, "b_ms": statistics.median(tb) * 1e3,
               "instructions_a": instructions(progs["A"], base),
               "instructions_b": instructions(progs["B"], base),
               "rss_a_kb": rss_a, "rss_b_kb": rss_b, "install": wa.get("install", ""),
               "decision": wa.get("decision", ""), "leave_pinned": "%s=1" % lp_var}
        if log:
            log("start-up: +%.3f ms (A %.3f, B %.3f ms, %d pairs), install: %s"
                % (row["added_ms"], row["a_ms"], row["b_ms"], pairs, row["install"]))
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def markdown(row):
    ins = ""
    if row.get("instructions_a") is not None and row.get("instructions_b") is not None:
        ins = "; instructions %d against %d (%+d, callgrind, one run each)" % (
            row["instructions_a"], row["instructions_b"],
            row["instructions_a"] - row["instructions_b"])
    return ("**Start-up** (a trivial program -> MPI-like library -> core library; A: pinheap in the "
            "core library, %s, installed by: %s; B: an empty core library; %d alternated pairs): "
            "A %.3f ms, B %.3f ms, **added %+.3f ms** (median of the per-pair differences)%s; "
            "peak RSS %.2f MiB against %.2f MiB (%+.2f MiB)."
            % (row["leave_pinned"], row["install"].strip().rstrip("."), row["pairs"], row["a_ms"], row["b_ms"],
               row["added_ms"], ins, row["rss_a_kb"] / 1024.0, row["rss_b_kb"] / 1024.0,
               (row["rss_a_kb"] - row["rss_b_kb"]) / 1024.0))


def main(argv):
    p = argparse.ArgumentParser(prog="startup_row.py", description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="the CMake build directory")
    p.add_argument("--archive", default=None, help="libpinheap.a (default BUILD/libpinheap.a)")
    p.add_argument("--pairs", default=str(PAIRS_DEFAULT),
                   help="alternated pairs (default %d, at least 1)" % PAIRS_DEFAULT)
    p.add_argument("--check", action="store_true",
                   help="smoke test: exit 1 unless the row is measured (SKIP, 77, without cc)")
    a = p.parse_args(argv)
    try:
        pairs = int(a.pairs)
    except ValueError:
        pairs = 0
    if pairs < 1:
        print("startup_row.py: --pairs: '%s' is not a positive integer" % a.pairs, file=sys.stderr)
        return 2
    if a.check and shutil.which("cc") is None:
        print("SKIP: startup_row.py: cc is not installed")
        return 77
    try:
        row = measure(a.build, pairs, a.archive)
    except StartupError as e:
        print("startup_row.py: " + str(e), file=sys.stderr)
        return 1
    print(markdown(row))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
