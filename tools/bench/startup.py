#!/usr/bin/env python3
"""startup.py -- what pinheap adds to a process's start-up, the transitive case.

Issue 30 item 4 / issue 26's start-up target: a trivial program linked with
an "MPI library" that links the core library holding the pinheap archive
(program -> libmpilike.so -> libdemocore.so: pinheap is behind libc in
symbol lookup, so it installs by relocation patching, code patching
included), leave-pinned on (PINHEAP_MODE=on), against the same program and
MPI library with an empty core library of the same name (program A).
Target: < 100 us added.

Method (drift cancels): the programs (A; B, the core library of --build;
C, the one of --baseline, e.g. a build of main) run in rounds, one run of
each per round, the order rotated every round (A B C, B C A, ...):
  * wall time: --pairs rounds (default 400, after 20 to warm up), each run
    timed from posix_spawn to wait4, its CPU time (user + sys) and minor
    page faults from the child's rusage (CPU time is less disturbed by
    other processes on a loaded machine than wall time); reported: each program's median and
    the median of the per-round differences (B - A, C - A, B - C) with
    their interquartile range;
  * instructions: callgrind totals, --cg-pairs rounds, the same way;
  * --strace: syscalls per program (strace -c -f) and which ones differ;
  * --breakdown: inclusive instructions per start-up phase
    (callgrind_annotate --inclusive=yes; PHASES below names the function
    that runs each phase), and how many dl_iterate_phdr walks and lazy PLT
    bindings the core library made (the caller tree's call counts).

usage: startup.py [--build DIR] [--baseline DIR] [--pairs N] [--cg-pairs N]
                  [--mode on|off|...] [--env K=V ...] [--breakdown] [--strace]
                  [--check] [--prefix P]
       startup.py --row [--build DIR] [--archive A] [--pairs N] [--check]
Prints Markdown.  Needs cc; valgrind for instructions (left out without it).

--check (the ctest startup_smoke): A must run on glibc alone and B (and C)
on pinheap with PINHEAP_MODE=on; exit 1 on a failure, 77 (a skip, said on
stdout) when cc is missing.

--row: the runner's start-up row instead (run.py imports row() and
row_markdown()): the core library linked from the build's archive
(--archive, default BUILD/libpinheap.a, so the tests need not be built),
leave-pinned on through Open MPI's variable (<prefix>mpi_leave_pinned=1,
names read from BUILD/include/pinheap_config.h), the program making and
freeing 64 small blocks (STARTUP_BLOCKS=64), --pairs rounds (default
PAIRS_DEFAULT) of A and B, one callgrind run of each and the peak RSS
(VmHWM) of each; with --check (the ctest bench_startup_row) exit 1 unless
the row is measured.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

APP = r"""
#include <stdlib.h>
int mpi_like_init(void);
void mpi_like_who(void);
int main(void)
{
  const char *blocks = getenv("STARTUP_BLOCKS");   /* the row's: 64 small blocks */
  if (mpi_like_init() != 1)
    return 1;
  if (blocks != NULL) {
    void *volatile keep[64];
    int n = atoi(blocks) < 64 ? atoi(blocks) : 64;
    for (int i = 0; i < n; i++)
      keep[i] = malloc(16 + (size_t)i * 32);
    for (int i = 0; i < n; i++)
      free(keep[i]);
  }
  if (getenv("STARTUP_WHO") != NULL)
    mpi_like_who();
  return 0;
}
"""

MPI = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int democore_version(void);
int mpi_like_init(void);
void mpi_like_who(void);
int mpi_like_init(void)
{
  return democore_version();
}
/* Which malloc serves, the installation's account and the peak RSS: asked
 * by --check and the row only (STARTUP_WHO). */
void mpi_like_who(void)
{
  int (*en)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, ENABLED_NAME);
  const char *(*it)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, INSTALL_NAME);
  char line[256];
  long kb = -1;
  FILE *f = fopen("/proc/self/status", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "VmHWM:", 6) == 0)
      kb = atol(line + 6);
  if (f != NULL)
    fclose(f);
  /* the private part: anonymous pages, copy-on-write copies of a file's
   * included (each process pays them; the page cache is shared) */
  long anon = -1;
  f = fopen("/proc/self/smaps_rollup", "r");
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "Anonymous:", 10) == 0)
      anon = atol(line + 10);
  if (f != NULL)
    fclose(f);
  printf("pinheap=%s\n", en == NULL ? "none" : en() ? "1" : "0");
  printf("install=%s\n", it != NULL ? it() : "");
  printf("vm_hwm_kb=%ld\n", kb);
  printf("anon_kb=%ld\n", anon);
}
"""

EMPTY_CORE = r"""
int democore_version(void);
int democore_version(void)
{
  return 1;
}
"""

# The start-up phases, by the function that runs each (without the build's
# name prefix; a phase whose function the compiler inlined shows "-"):
# (label, [function names; the first one found counts]).
PHASES = [
    ("the constructor, whole", ["dispatch_ctor"]),
    ("decision (dispatch_decide)", ["dispatch_decide"]),
    ("  parameters: environment and files (params_get)", ["params_get"]),
    ("    of which Open MPI's parameter files (pfile_scan)", ["pfile_scan"]),
    ("  OS-bypass probe (not run when PINHEAP_MODE decides)",
     ["probe_run", "probe_devices", "probe_scan", "probe_found"]),
    ("fork handlers (forks_init)", ["forks_init"]),
    ("installation, whole (install_run)", ["install_run"]),
    ("  loaded at start-up?, and (a)'s answers from the symbol tables (reloc_startup_resolve)",
     ["reloc_startup_resolve", "reloc_loaded_at_startup"]),
    ("  (a) interposition (inlined; a dlsym per name the tables leave unsure: the dlsym row)",
     ["install_interpose"]),
    ("  libc's entries found (patch_find)", ["patch_find"]),
    ("  other patchers (peers_find)", ["peers_find"]),
    ("  (b) relocation patching (reloc_install_flags)", ["reloc_install_flags"]),
    ("    GOT slots of every object (reloc_pass_run)", ["reloc_pass_run"]),
    ("    definitions in libc's symbol table (reloc_defs_patch)", ["reloc_defs_patch"]),
    ("  (b') code patching of libc (patch_apply)", ["patch_apply"]),
    ("  (c) verification of the memory calls", ["install_verify_calls"]),
    ("  (c) verification of the malloc family", ["install_verify_family"]),
    ("  the other caches (feeds_attach)", ["feeds_attach"]),
    ("self-test said (selftest_say)", ["selftest_say"]),
    ("first heap / thread cache (front_init)", ["front_init"]),
    ("all dlsym calls", ["dlsym@@GLIBC_2.34", "dlsym"]),
    ("all dl_iterate_phdr walks", ["dl_iterate_phdr"]),
]


PAIRS_DEFAULT = 200              # the row's rounds (run.py --startup-pairs)


class StartupError(Exception):
    """A measurement failed; the message says why."""


def die(msg):
    sys.stderr.write("startup.py: " + msg + "\n")
    sys.exit(2)


def skip(msg):
    print("SKIP: startup.py: " + msg)
    sys.exit(77)


def cc(args):
    p = subprocess.run(["cc"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        raise StartupError("cc %s failed:\n%s" % (" ".join(args), p.stderr[-800:]))


def build_fixtures(tmp, cores, prefix):
    """The programs, identical but for the core library behind the MPI one:
    A with an empty core library, then one per entry of cores (tag, path:
    a built libdemocore.so, or an archive linked whole into one)."""
    for name, text in (("app.c", APP), ("mpi.c", MPI), ("core.c", EMPTY_CORE)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    empty_dir = os.path.join(tmp, "empty")
    os.mkdir(empty_dir)
    cc(["-O2", "-shared", "-fPIC", "-Wl,-soname,libdemocore.so",
        os.path.join(tmp, "core.c"), "-o", os.path.join(empty_dir, "libdemocore.so")])
    progs = {}
    dirs = [("A", empty_dir)]
    for tag, core in cores:
        if core.endswith(".a"):       # an archive: a core library holding it whole
            cdir = os.path.join(tmp, "core" + tag)
            os.mkdir(cdir)
            cc(["-O2", "-shared", "-fPIC", "-Wl,-soname,libdemocore.so", os.path.join(tmp, "core.c"),
                "-o", os.path.join(cdir, "libdemocore.so"), "-Wl,--whole-archive", core,
                "-Wl,--no-whole-archive", "-ldl", "-lpthread"])
            dirs.append((tag, cdir))
        else:
            dirs.append((tag, os.path.dirname(core)))
    for tag, cdir in dirs:
        d = os.path.join(tmp, tag)
        os.mkdir(d)
        names = ['-DENABLED_NAME="%senabled"' % prefix, '-DINSTALL_NAME="%sinstall_text"' % prefix]
        cc(["-O2", "-shared", "-fPIC"] + names +
           [os.path.join(tmp, "mpi.c"), "-o", os.path.join(d, "libmpilike.so"),
            "-L" + cdir, "-ldemocore", "-Wl,-rpath," + cdir, "-ldl"])
        prog = os.path.join(d, "app")
        cc(["-O2", os.path.join(tmp, "app.c"), "-o", prog, "-L" + d,
            "-lmpilike", "-Wl,-rpath," + d])
        progs[tag] = prog
    return progs


def spawn_time(prog, env):
    """One run: its wall time, posix_spawn to wait4 (the spawner's own cost
    is the same for every program and cancels in the differences), and its
    minor page faults and CPU time (the child's rusage)."""
    t = time.perf_counter()
    pid = os.posix_spawn(prog, [prog], env)
    _, status, ru = os.wait4(pid, 0)
    dt = time.perf_counter() - t
    if status != 0:
        raise StartupError("%s exited with status %d" % (prog, status))
    return dt, ru.ru_minflt, ru.ru_utime + ru.ru_stime


def quartiles(xs):
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def alternated(measure, progs, env, rounds, warm=0):
    """measure(prog, env) for every program, round after round, the order
    rotated each round (A B C, B C A, ...): {tag: [values]}, index = round."""
    tags = sorted(progs)
    for _ in range(warm):         # the page cache and the loader warm
        for tag in tags:
            measure(progs[tag], env)
    out = {tag: [] for tag in tags}
    for i in range(rounds):
        k = i % len(tags)
        for tag in tags[k:] + tags[:k]:
            out[tag].append(measure(progs[tag], env))
    return out


def callgrind_total(prog, env, out="/dev/null"):
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, prog],
                       env=env, capture_output=True, text=True)
    for line in p.stderr.splitlines():
        if "Collected" in line:
            return int(line.split()[-1])
    raise StartupError("no callgrind total for %s: %s" % (prog, p.stderr[-400:]))


def breakdown(prog, env, prefix, tmp):
    """B's inclusive instruction counts per start-up phase."""
    out = os.path.join(tmp, "cg.out")
    total = callgrind_total(prog, env, out)
    p = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                       capture_output=True, text=True)
    incl = {}
    for line in p.stdout.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(\S+?):(\S+?)(?:'\d+)?\s", line + " ")
        if m is None:
            m = re.match(r"\s*([\d,]+)\s+(\S+?):(\S+?)(?:'\d+)?\s", line + " ")
        if m is None:
            continue
        n = int(m.group(1).replace(",", ""))
        fn = m.group(3)
        for name in (fn, fn[len(prefix):] if fn.startswith(prefix) else None):
            if name is not None and n > incl.get(name, -1):
                incl[name] = n
    rows = []
    for label, names in PHASES:
        for n in names:
            if n in incl:
                rows.append((label, n, incl[n]))
                break
        else:
            rows.append((label, "-", 0))
    return total, rows, call_counts(out, "libdemocore")


def call_counts(out, core):
    """From callgrind file out: how many dl_iterate_phdr walks and how many
    lazy PLT bindings (_dl_runtime_resolve) the object whose path contains
    core made: {"walks": N, "bindings": N} (callers' "(Nx)" in the caller
    tree)."""
    p = subprocess.run(["callgrind_annotate", "--tree=caller", "--threshold=100", out],
                       capture_output=True, text=True)
    counts = {"walks": 0, "bindings": 0}
    for block in p.stdout.split("\n\n"):
        lines = block.strip().splitlines()
        star = [line for line in lines if re.search(r"\*  ", line)]
        if not star:
            continue
        key = ("walks" if re.search(r":dl_iterate_phdr[ @]", star[0]) else
               "bindings" if "_dl_runtime_resolve" in star[0] else None)
        if key is None:
            continue
        for line in lines:
            m = re.search(r"<.*\((\d+)x\) \[([^\]]*)\]", line)
            if m is not None and core in m.group(2):
                counts[key] += int(m.group(1))
    return counts


def strace_counts(prog, env, tmp):
    out = os.path.join(tmp, "strace.txt")
    subprocess.run(["strace", "-c", "-f", "-o", out, prog], env=env, capture_output=True)
    calls, per = 0, {}
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
                n = int(parts[3])
                per[parts[-1]] = n
                calls += n
    return calls, per


def who_all(prog, env):
    """Program prog's account of itself: {"pinheap": "none", "0" or "1",
    "install": the installation's text, "vm_hwm_kb": its peak RSS}."""
    p = subprocess.run([prog], env=dict(env, STARTUP_WHO="1"), capture_output=True, text=True)
    out = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    if "pinheap" not in out:
        out["pinheap"] = "?: " + (p.stdout + p.stderr).strip()[-300:]
    return out


def who(prog, env):
    """What program prog runs on: "pinheap=...", and the installation's
    account when pinheap is there."""
    w = who_all(prog, env)
    return "pinheap=" + w["pinheap"], w.get("install", "")


def diff_cell(xs, ys, scale, unit):
    """The median of the per-round differences ys - xs, with its IQR."""
    q = quartiles([(y - x) * scale for x, y in zip(xs, ys)])
    f = "%+.1f" if unit else "%+.0f"
    return ("**" + f + "%s** (" + f + " .. " + f + ")") % (q[1], unit, q[0], q[2])


def config_read(build):
    """(symbol prefix, leave-pinned variable) of this build's pinheap_config.h."""
    path = os.path.join(build, "include", "pinheap_config.h")
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise StartupError("%s: %s (configure the build first)" % (path, e.strerror))

    def string(name):
        m = re.search(r'#define %s "([^"]*)"' % name, text)
        if m is None:
            raise StartupError("%s: no %s" % (path, name))
        return m.group(1)
    return (string("PINHEAP_PREFIX_STRING"),
            string("PINHEAP_PARAM_PREFIX_STRING") + string("PINHEAP_PARAM_LEAVE_PINNED_STRING"))


def row(build, pairs=PAIRS_DEFAULT, archive=None, log=None):
    """The runner's start-up row (run.py): the programs of main(), B's core
    library linked from the archive, leave-pinned on (<prefix>mpi_leave_pinned=1),
    pairs alternated rounds of A and B.  A dict, named as the runner's table
    has always named them ("a": the pinheap program, B here; "b": the empty
    core library's, A here): added_ms (median of the per-round differences),
    a_ms, b_ms (medians), pairs, instructions_a/_b (one callgrind run each,
    PINHEAP_MODE=on; None without valgrind), rss_a_kb, rss_b_kb (VmHWM,
    median of 5), anon_a_kb, anon_b_kb (the anonymous pages of the same
    runs, copy-on-write copies included: the private part, which every
    process pays, where the rest is page cache shared by every process
    mapping the same files), install, leave_pinned.  Raises StartupError."""
    if shutil.which("cc") is None:
        raise StartupError("cc is not installed")
    build = os.path.abspath(build)
    archive = archive or os.path.join(build, "libpinheap.a")
    if not os.path.isfile(archive):
        raise StartupError("%s not found: build the pinheap target first" % archive)
    prefix, lp_var = config_read(build)
    # the program makes and frees 64 small blocks, as the row's always did
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), lp_var: "1", "STARTUP_BLOCKS": "64"}
    tmp = tempfile.mkdtemp(prefix="pinheap-startup-")
    try:
        progs = build_fixtures(tmp, [("B", archive)], prefix)
        wa, wb = who_all(progs["B"], env), who_all(progs["A"], env)
        if wa["pinheap"] != "1":
            raise StartupError("the program with pinheap in its core library (%s=1) does not run "
                               "on pinheap: %s" % (lp_var, wa))
        if wb["pinheap"] != "none":
            raise StartupError("the program with an empty core library found a pinheap: %s" % wb)
        runs = alternated(spawn_time, progs, env, pairs, warm=5)
        ta, tb = [r[0] for r in runs["B"]], [r[0] for r in runs["A"]]
        ws = {t: [who_all(progs[t], env) for _ in range(5)] for t in progs}
        rss = {t: statistics.median(int(w.get("vm_hwm_kb", -1)) for w in ws[t]) for t in progs}
        anon = {t: statistics.median(int(w.get("anon_kb", -1)) for w in ws[t]) for t in progs}
        ins = {t: None for t in progs}
        if shutil.which("valgrind") is not None:    # under valgrind pinheap stays off unless told
            ins = {t: v[0] for t, v in alternated(callgrind_total, progs,
                                                  dict(env, PINHEAP_MODE="on"), 1).items()}
        out = {"pairs": pairs, "added_ms": statistics.median(a - b for a, b in zip(ta, tb)) * 1e3,
               "a_ms": statistics.median(ta) * 1e3, "b_ms": statistics.median(tb) * 1e3,
               "instructions_a": ins["B"], "instructions_b": ins["A"],
               "rss_a_kb": rss["B"], "rss_b_kb": rss["A"],
               "anon_a_kb": anon["B"], "anon_b_kb": anon["A"], "install": wa.get("install", ""),
               "leave_pinned": "%s=1" % lp_var}
        if log:
            log("start-up: +%.3f ms (A %.3f, B %.3f ms, %d pairs), install: %s"
                % (out["added_ms"], out["a_ms"], out["b_ms"], pairs, out["install"]))
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def row_markdown(r):
    """The row as the runner's table.md shows it."""
    ins = ""
    if r.get("instructions_a") is not None and r.get("instructions_b") is not None:
        ins = "; instructions %d against %d (%+d, callgrind, one run each)" % (
            r["instructions_a"], r["instructions_b"], r["instructions_a"] - r["instructions_b"])
    return ("**Start-up** (a trivial program -> MPI-like library -> core library; A: pinheap in the "
            "core library, %s, installed by: %s; B: an empty core library; %d alternated pairs): "
            "A %.3f ms, B %.3f ms, **added %+.3f ms** (median of the per-pair differences)%s; "
            "peak RSS %.2f MiB against %.2f MiB (%+.2f MiB)%s."
            % (r["leave_pinned"], r["install"].strip().rstrip("."), r["pairs"], r["a_ms"], r["b_ms"],
               r["added_ms"], ins, r["rss_a_kb"] / 1024.0, r["rss_b_kb"] / 1024.0,
               (r["rss_a_kb"] - r["rss_b_kb"]) / 1024.0, anon_text(r)))


def anon_text(r):
    """The private part of the row's RSS difference, or "" (an older row)."""
    if r.get("anon_a_kb", -1) < 0 or r.get("anon_b_kb", -1) < 0:
        return ""
    return ("; of it private to each process (anonymous pages, copy-on-write copies included) "
            "%+.2f MiB, %d kB against %d, the rest page cache that every process mapping the "
            "same files shares" % ((r["anon_a_kb"] - r["anon_b_kb"]) / 1024.0, r["anon_a_kb"],
                                   r["anon_b_kb"]))


def row_main(a):
    """--row: prints the runner's row; exit 1 when it cannot be measured."""
    if a.check and shutil.which("cc") is None:
        skip("cc is not installed")
    try:
        print(row_markdown(row(a.build, a.pairs, a.archive)))
    except StartupError as e:
        sys.stderr.write("startup.py: " + str(e) + "\n")
        sys.exit(1)
    sys.exit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    ap.add_argument("--baseline", metavar="DIR",
                    help="another build (e.g. of main): its core library is program C, measured "
                         "in the same rotation (C - A, B - C)")
    ap.add_argument("--pairs", type=int, default=None, help="alternated wall-time rounds (default 400)")
    ap.add_argument("--cg-pairs", type=int, default=3, help="alternated callgrind rounds (default 3)")
    ap.add_argument("--mode", default="on", help="PINHEAP_MODE for every program (default on)")
    ap.add_argument("--env", action="append", default=[], help="K=V added to every program's env")
    ap.add_argument("--breakdown", action="store_true", help="per-phase inclusive instructions")
    ap.add_argument("--strace", action="store_true", help="syscall counts (strace -c -f)")
    ap.add_argument("--check", action="store_true", help="fail unless each program runs on its malloc")
    ap.add_argument("--prefix", default="pinheap_", help="the build's symbol prefix (default pinheap_)")
    ap.add_argument("--row", action="store_true",
                    help="the runner's start-up row (default %d pairs) instead" % PAIRS_DEFAULT)
    ap.add_argument("--archive", help="--row: libpinheap.a (default BUILD/libpinheap.a)")
    a = ap.parse_args()
    if a.row:
        a.pairs = PAIRS_DEFAULT if a.pairs is None else a.pairs
    elif a.pairs is None:
        a.pairs = 400
    if a.pairs < 1 or a.cg_pairs < 0:
        die("--pairs must be positive and --cg-pairs not negative (got %d, %d)" % (a.pairs, a.cg_pairs))
    if a.row:
        row_main(a)
    cores = [("B", os.path.join(os.path.abspath(a.build), "test", "libdemocore.so"))]
    if a.baseline:
        cores.append(("C", os.path.join(os.path.abspath(a.baseline), "test", "libdemocore.so")))
    for _, core in cores:
        if not os.path.exists(core):
            die("%s not found: build the project with tests first" % core)
    if shutil.which("cc") is None:
        (skip if a.check else die)("cc is not installed")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PINHEAP_MODE": a.mode}
    for kv in a.env:
        if "=" not in kv:
            die("--env expects K=V, got %r" % kv)
        k, v = kv.split("=", 1)
        env[k] = v
    names = {"A": "A: empty core", "B": "B: pinheap core (--build)", "C": "C: pinheap core (--baseline)"}

    tmp = tempfile.mkdtemp(prefix="pinheap-startup-")
    failures = []
    try:
        main_measure(a, cores, env, names, tmp, failures)
    except StartupError as e:
        die(str(e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.check:
        for f in failures:
            print("FAIL: " + f)
        sys.exit(1 if failures else 0)


def main_measure(a, cores, env, names, tmp, failures):
    """main()'s measurements, printed; failures: --check's."""
    progs = build_fixtures(tmp, cores, a.prefix)
    tags = sorted(progs)
    for tag in tags:
        got, account = who(progs[tag], env)
        want = "pinheap=none" if tag == "A" else "pinheap=1" if a.mode == "on" else None
        print("%s: %s%s" % (names[tag], got, ("\n  " + account[:400]) if account else ""))
        if want is not None and got != want:
            failures.append("%s ran on the wrong malloc: %r, expected %r" % (tag, got, want))
    pairs = [("B", "A")] + ([("C", "A"), ("B", "C")] if "C" in progs else [])
    print()
    print("| measure (PINHEAP_MODE=%s%s) | %s | %s |" %
          (a.mode, "".join(", " + kv for kv in a.env), " | ".join(names[t] for t in tags),
           " | ".join("%s - %s, median of per-round differences (IQR)" % p for p in pairs)))
    print("|---|" + "---:|" * (len(tags) + len(pairs)))
    runs = alternated(spawn_time, progs, env, a.pairs, warm=20)
    wall = {t: [r[0] for r in runs[t]] for t in tags}
    faults = {t: [r[1] for r in runs[t]] for t in tags}
    cpu = {t: [r[2] for r in runs[t]] for t in tags}
    print("| wall time, %d rounds | %s | %s |" % (
        a.pairs, " | ".join("%.1f us" % (statistics.median(wall[t]) * 1e6) for t in tags),
        " | ".join(diff_cell(wall[y], wall[x], 1e6, " us") for x, y in pairs)))
    print("| CPU time (user + sys, rusage), the same runs | %s | %s |" % (
        " | ".join("%.1f us" % (statistics.median(cpu[t]) * 1e6) for t in tags),
        " | ".join(diff_cell(cpu[y], cpu[x], 1e6, " us") for x, y in pairs)))
    print("| minor page faults (rusage), the same runs | %s | %s |" % (
        " | ".join("%d" % statistics.median(faults[t]) for t in tags),
        " | ".join(diff_cell(faults[y], faults[x], 1, "") for x, y in pairs)))
    have_vg = shutil.which("valgrind") is not None
    if a.cg_pairs > 0 and have_vg:
        ins = alternated(callgrind_total, progs, env, a.cg_pairs)
        print("| instructions (callgrind), %d rounds | %s | %s |" % (
            a.cg_pairs, " | ".join("%d" % statistics.median(ins[t]) for t in tags),
            " | ".join(diff_cell(ins[y], ins[x], 1, "") for x, y in pairs)))
    elif a.cg_pairs > 0:
        print("(valgrind not installed: no instruction counts)")
    if a.strace and shutil.which("strace") is not None:
        sc = {t: strace_counts(progs[t], env, tmp) for t in tags}
        print("| syscalls (strace -c -f) | %s | %s |" % (
            " | ".join("%d" % sc[t][0] for t in tags),
            " | ".join("**%+d**" % (sc[x][0] - sc[y][0]) for x, y in pairs)))
        for x, y in pairs:
            px, py = sc[x][1], sc[y][1]
            extra = sorted(((px.get(k, 0) - py.get(k, 0), k) for k in set(px) | set(py)), reverse=True)
            print("\nSyscalls %s makes beyond %s: %s" %
                  (x, y, ", ".join("%s %+d" % (k, n) for n, k in extra if n != 0) or "none"))
    if a.breakdown and have_vg:
        bd = {t: breakdown(progs[t], env, a.prefix, tmp) for t in tags if t != "A"}
        print()
        print("Start-up phases, inclusive instructions (callgrind_annotate --inclusive=yes; "
              "totals: %s):" % ", ".join("%s %d" % (t, bd[t][0]) for t in bd))
        print()
        print("| phase | function | %s |" % " | ".join(names[t] for t in bd))
        print("|---|---|" + "---:|" * len(bd))
        for i, (label, _) in enumerate(PHASES):
            fns = [bd[t][1][i][1] for t in bd]
            print("| %s | %s | %s |" % (label, next((f for f in fns if f != "-"), "-"),
                                        " | ".join("%d" % bd[t][1][i][2] for t in bd)))
        print("| calls: dl_iterate_phdr walks by the core library | - | %s |" %
              " | ".join("%d" % bd[t][2]["walks"] for t in bd))
        print("| calls: lazy PLT bindings of the core library's imports | - | %s |" %
              " | ".join("%d" % bd[t][2]["bindings"] for t in bd))


if __name__ == "__main__":
    main()
