#!/usr/bin/env python3
"""openmpi_test.py -- pinheap as the memory component of a real Open MPI.

The Open MPI that tools/openmpi/build.sh built under OUT_DIR (install/):
  info      ompi_info lists memory: pinheap (and no patcher), and
            `ompi_info --param memory pinheap --level 9` lists pinheap's
            parameters with their values and sources;
  ranks     test/fixture/ompi_component.c, built by that mpicc, under that
            mpirun -np 2: with mpi_leave_pinned on (command line, environment,
            $HOME/.openmpi/mca-params.conf) every rank is served by pinheap,
            Open MPI's own support level is FREE|CHUNK|MUNMAP, an Open MPI
            release callback hears every release (frees of 1-32 MiB blocks
            and a trim, munmap, madvise, mremap) before the memory goes, and
            a 4 MiB exchange is right; pml ob1 (btl self,vader) and pml ucx;
            with mpi_leave_pinned 0, glibc serves and the exchange is right.

usage: openmpi_test.py OUT_DIR SOURCE_DIR WORK_DIR [info|ranks]...
Prints "ok"/"FAIL" lines and "N passed, M failed" last; exit 1 on failure.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import mpi_json  # noqa: E402

results = {"passed": 0, "failed": 0}
LEVEL_ALL = 7  # FREE | MUNMAP | CHUNK, in Open MPI's bits and in pinheap's


def check(cond, what):
    results["passed" if cond else "failed"] += 1
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    return cond


def clean_env():
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("OMPI_", "PINHEAP_", "PMIX_", "OPAL_")):
            del env[k]
    env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def info(inst):
    ompi_info = os.path.join(inst, "bin", "ompi_info")
    p = subprocess.run([ompi_info], env=clean_env(), capture_output=True, text=True, timeout=120)
    mem = [l.strip() for l in p.stdout.splitlines() if "MCA memory:" in l]
    check(p.returncode == 0, "ompi_info runs (rc %d: %s)" % (p.returncode, p.stderr[-300:]))
    check(any(" pinheap " in l + " " for l in mem), "ompi_info lists memory: pinheap (%s)" % mem)
    check(not any("patcher" in l for l in mem), "no other memory component is built (%s)" % mem)
    env = clean_env()
    env["OMPI_MCA_memory_pinheap_log_level"] = "error"
    p = subprocess.run([ompi_info, "--param", "memory", "pinheap", "--level", "9", "--parsable"],
                       env=env, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    names = sorted({l.split(":")[4] for l in lines if l.startswith("mca:memory:pinheap:param:")})
    check("memory_pinheap_log_level" in names and "memory_pinheap_mode" in names
          and "memory_pinheap_events" in names,
          "ompi_info --param memory pinheap --level 9 lists pinheap's parameters (%s)" % names)
    val = [l for l in lines if l.startswith("mca:memory:pinheap:param:memory_pinheap_log_level:")]
    check(any(":value:error" in l for l in val) and any("source:environment" in l for l in val),
          "a parameter set in the environment shows its value and source (%s)" % val)
    helps = [l for l in val if ":help:" in l]
    check(any("in effect error (OMPI_MCA_memory_pinheap_log_level)" in l for l in helps),
          "its help says what pinheap itself uses and where from (%s)" % helps)


def build_app(inst, src, work):
    app = os.path.join(work, "ompi_component")
    mpicc = os.path.join(inst, "bin", "mpicc")
    p = subprocess.run([mpicc, "-O2", "-Wall", "-Werror", "-o", app, os.path.join(src, "test/fixture/ompi_component.c"),
                        "-ldl"], env=clean_env(), capture_output=True, text=True, timeout=300)
    if not check(p.returncode == 0, "mpicc builds the rank program (%s)" % p.stderr[-400:]):
        return None
    return app


def mpirun(inst, app, mca, env_extra=None, home=None):
    argv = [os.path.join(inst, "bin", "mpirun"), "-np", "2", "--oversubscribe"]
    for k, v in mca:
        argv += ["--mca", k, v]
    env = clean_env()
    env.update(env_extra or {})
    if home is not None:
        env["HOME"] = home
    p = subprocess.run(argv + [app], env=env, capture_output=True, text=True, timeout=300)
    ranks = mpi_json.by_rank(p.stdout)
    return p, ranks


def ranks_case(inst, app, name, mca, env_extra=None, home=None, on=True):
    p, ranks = mpirun(inst, app, mca, env_extra, home)
    check(p.returncode == 0 and sorted(ranks) == [0, 1],
          "%s: mpirun -np 2 exits 0 and both ranks report (rc %d; %s)"
          % (name, p.returncode, (p.stderr.strip() or p.stdout.strip())[-500:]))
    warned = [l for l in (p.stdout + p.stderr).splitlines() if "pinheap" in l and "warning" in l]
    check(not warned, "%s: no warning from pinheap (%s)" % (name, "; ".join(warned[:2])))
    for r in sorted(ranks):
        d = ranks[r]
        check(d["exchange_ok"] == 1, "%s: rank %d: the 4 MiB exchange is right" % (name, r))
        if not on:
            check(d["enabled"] == 0, "%s: rank %d: leave-pinned off, glibc serves malloc" % (name, r))
            continue
        check(d["enabled"] == 1, "%s: rank %d: pinheap serves malloc" % (name, r))
        check(d["pinheap_level"] == LEVEL_ALL and d["ompi_level"] == LEVEL_ALL,
              "%s: rank %d: support FREE|CHUNK|MUNMAP, pinheap's and Open MPI's own (%d, %d)"
              % (name, r, d["pinheap_level"], d["ompi_level"]))
        check(d["registered"] == 1, "%s: rank %d: Open MPI accepts a release callback" % (name, r))
        check(d["component_known"] == 1,
              "%s: rank %d: pinheap's Open MPI feed knows libopen-pal has no memory/patcher "
              "(nothing to take, no wrapper installed)" % (name, r))
        missed = [k for k, v in d["heard"].items() if v != 1]
        check(not missed and len(d["heard"]) == 9,
              "%s: rank %d: Open MPI's callback heard every release before it went "
              "(missed: %s)" % (name, r, missed))


def ranks(inst, src, work):
    app = build_app(inst, src, work)
    if app is None:
        return
    ob1 = [("pml", "ob1"), ("btl", "self,vader")]
    ucx = [("pml", "ucx"), ("pml_ucx_tls", "any"), ("pml_ucx_devices", "any")]
    ranks_case(inst, app, "command line, ob1", ob1 + [("mpi_leave_pinned", "1")])
    ranks_case(inst, app, "environment, ucx", ucx, {"OMPI_MCA_mpi_leave_pinned": "1"})
    home = tempfile.mkdtemp(prefix="ompi-home-", dir=work)
    os.makedirs(os.path.join(home, ".openmpi"))
    with open(os.path.join(home, ".openmpi", "mca-params.conf"), "w") as f:
        f.write("# as a user writes it\nmpi_leave_pinned = 1\n")
    ranks_case(inst, app, "mca-params.conf, ob1", ob1, home=home)
    ranks_case(inst, app, "leave-pinned off, ob1", ob1 + [("mpi_leave_pinned", "0")], on=False)
    ranks_case(inst, app, "leave-pinned off, ucx", ucx + [("mpi_leave_pinned", "0")], on=False)


def main():
    out, src, work = sys.argv[1], sys.argv[2], sys.argv[3]
    what = sys.argv[4:] or ["info", "ranks"]
    inst = os.path.join(out, "install")
    os.makedirs(work, exist_ok=True)
    if not check(os.path.exists(os.path.join(inst, "bin", "ompi_info")),
                 "the Open MPI built with pinheap is in %s (tools/openmpi/build.sh)" % inst):
        print("0 passed, 1 failed")
        return 1
    if "info" in what:
        info(inst)
    if "ranks" in what:
        ranks(inst, src, work)
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
