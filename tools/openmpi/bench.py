#!/usr/bin/env python3
"""bench.py -- pinheap's Open MPI against Debian's: a rank's start-up and a
real MPI benchmark (NetPIPE 3.7.2's NPmpi, from Debian's archive), with and
without pinheap, mpi_leave_pinned on in every run.

Start-up: tools/openmpi/startup.c, built by each mpicc, spawns itself
--spawns times per round (default 200) and gives the median time from spawn
to main (the loader and the core libraries' constructors: pinheap's decision
and installation), and from spawn to main plus the opening of Open MPI's
memory framework (where memory/patcher does its patching, in MPI_Init; where
memory/pinheap runs its self-test): a component that works before main and
one that works in MPI_Init compare on the second.

Configurations, interleaved round by round (--runs, default 5):
  pinheap     the Open MPI of tools/openmpi/build.sh (OUT_DIR/install), pinheap
              its memory component and serving malloc;
  glibc       the same Open MPI with pinheap forwarding every call to glibc
              (PINHEAP_MODE=off): the allocator's share alone;
  patcher     with --patcher DIR: the same Open MPI (same source, same configure
              options) built without the component by `build.sh
              --without-pinheap DIR`, so Open MPI's own memory/patcher: the
              rank without pinheap that the component's cost is measured
              against;
  debian      Debian's own Open MPI 4.1.4 (/usr/bin/mpicc, mpirun: memory/patcher;
              other configure options, other components).
NPmpi runs under each one's mpirun -np 2 (pml ob1, btl self,vader), sizes 1 byte
to --upper (default 8 MiB), no perturbed sizes (-p 0), with -I (a different
buffer each repetition, so that a registration cache would see new memory).

Prints, per configuration, the medians over the rounds (and the spread) of
the latency of 8-byte messages and the bandwidth at 64 KiB, 1 MiB and the
largest size, and the ratios to debian; writes the table and every run's
raw output under WORK_DIR.

usage: bench.py OUT_DIR WORK_DIR [--runs N] [--spawns N] [--upper BYTES] [--no-netpipe]
                [--patcher DIR]
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tarfile


def sh(argv, cwd=None, env=None):
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench.py: %s failed (rc %d): %s" % (" ".join(argv), p.returncode,
                                                        (p.stderr or p.stdout)[-800:]))
    return p.stdout


def netpipe_source(work):
    """NetPIPE's release tarball from Debian's source package."""
    src = os.path.join(work, "src")
    os.makedirs(src, exist_ok=True)
    found = glob.glob(os.path.join(src, "netpipe_*.orig.tar.gz"))
    if not found:
        # Debian's packaging part may be missing from a snapshot mirror: the
        # release tarball is what is built here.
        subprocess.run(["apt-get", "source", "--download-only", "netpipe"], cwd=src,
                       capture_output=True, text=True)
        found = glob.glob(os.path.join(src, "netpipe_*.orig.tar.gz"))
    if not found:
        sys.exit("bench.py: no NetPIPE source (apt-get source netpipe needs a deb-src "
                 "entry: tools/openmpi/deb-src.sh)")
    top = os.path.join(src, "NetPIPE-3.7.2")
    if not os.path.isdir(top):
        with tarfile.open(found[0]) as t:
            t.extractall(src)
    return top


def build(top, mpicc, name, work):
    exe = os.path.join(work, "NPmpi-" + name)
    if not os.path.exists(exe):
        sh([mpicc, "-O2", "-DMPI", "src/netpipe.c", "src/mpi.c", "-Isrc", "-o", exe], cwd=top)
    return exe


def startup(confs, work, env, rounds, spawns):
    """Spawn-to-main medians (us), round by round interleaved."""
    here = os.path.dirname(os.path.abspath(__file__))
    exes = {}
    for n, (bindir, _) in confs.items():
        exes[n] = os.path.join(work, "startup-" + n)
        sh([os.path.join(bindir, "mpicc"), "-O2", "-o", exes[n], os.path.join(here, "startup.c"),
            "-lopen-pal"])
    # per configuration, per round: (spawn to main, spawn to main + the
    # memory framework's open), each the median of the round's spawns
    vals = {n: ([], []) for n in confs}
    for _ in range(rounds):
        for n, (_, extra) in confs.items():
            e = dict(env)
            e.update(extra)
            out = sh([exes[n], "spawn", str(spawns)], env=e).split("\n")
            vals[n][0].append(float(out[0].split()[0]))
            vals[n][1].append(float(out[1].split()[0]))
    lines = []
    for k, what in enumerate(("spawn to main", "spawn to main + the memory framework's open")):
        v = {n: vals[n][k] for n in confs}
        med = {n: statistics.median(x) for n, x in v.items()}
        cells = "; ".join("%s %.0f [%.0f-%.0f]" % (n, med[n], min(v[n]), max(v[n])) for n in confs)
        # the rounds alternate the configurations, so a round's differences
        # are taken at one moment of the machine's load: their median
        diffs = ["%s - %s %+.0f us (per-round median %+.0f)" %
                 (a, b, med[a] - med[b], statistics.median(x - y for x, y in zip(v[a], v[b])))
                 for a, b in (("pinheap", "patcher"), ("glibc", "patcher"), ("pinheap", "debian"))
                 if a in confs and b in confs]
        lines.append("start-up, %s (us; medians of %d rounds of %d spawns [min-max]): %s; %s" %
                     (what, rounds, spawns, cells, "; ".join(diffs)))
    return lines


def parse(path):
    """NetPIPE's output file: bytes, Mbps, seconds per message."""
    rows = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                rows[int(parts[0])] = (float(parts[1]), float(parts[2]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("work_dir")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--upper", type=int, default=8 << 20)
    ap.add_argument("--spawns", type=int, default=200, help="spawns per start-up round")
    ap.add_argument("--no-netpipe", action="store_true", help="the start-up only")
    ap.add_argument("--patcher", metavar="DIR",
                    help="OUT_DIR of `build.sh --without-pinheap`: the same Open MPI with memory/patcher")
    a = ap.parse_args()
    inst = os.path.join(os.path.abspath(a.out_dir), "install")
    work = os.path.abspath(a.work_dir)
    os.makedirs(work, exist_ok=True)
    confs = {
        "pinheap": (os.path.join(inst, "bin"), {}),
        "glibc": (os.path.join(inst, "bin"), {"PINHEAP_MODE": "off"}),
    }
    if a.patcher:
        pbin = os.path.join(os.path.abspath(a.patcher), "install", "bin")
        if not os.path.exists(os.path.join(pbin, "mpicc")):
            ap.error("--patcher %s: no install/bin/mpicc there (expected the OUT_DIR of "
                     "tools/openmpi/build.sh --without-pinheap)" % a.patcher)
        confs["patcher"] = (pbin, {})
    confs["debian"] = ("/usr/bin", {})
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("OMPI_", "PINHEAP_", "OPAL_", "PMIX_"))}
    base_env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                     "OMPI_MCA_mpi_leave_pinned": "1"})
    lines = startup(confs, work, base_env, a.runs, a.spawns)
    if a.no_netpipe:
        print("\n".join(lines))
        return 0
    top = netpipe_source(work)
    exes = {n: build(top, os.path.join(d, "mpicc"), n, work) for n, (d, _) in confs.items()}
    runs = {n: [] for n in confs}
    for r in range(a.runs):
        for n, (bindir, extra) in confs.items():
            out = os.path.join(work, "np-%s-%d.txt" % (n, r))
            env = dict(base_env)
            env.update(extra)
            argv = [os.path.join(bindir, "mpirun"), "-np", "2", "--bind-to", "core",
                    "--mca", "pml", "ob1", "--mca", "btl", "self,vader",
                    "--mca", "mpi_leave_pinned", "1"]
            for k, v in extra.items():
                argv += ["-x", "%s=%s" % (k, v)]
            sh(argv + [exes[n], "-I", "-p", "0", "-u", str(a.upper), "-o", out], env=env)
            runs[n].append(parse(out))
            print("round %d %s done" % (r + 1, n), flush=True)

    def at(rows, size):
        best = min(rows, key=lambda s: abs(s - size))
        return rows[best]

    sizes = [("lat 8 B (us)", 8, 1), ("bw 64 KiB (Mbps)", 64 << 10, 0), ("bw 1 MiB (Mbps)", 1 << 20, 0)]
    if a.upper > 1 << 20:
        sizes.append(("bw %d MiB (Mbps)" % (a.upper >> 20), a.upper, 0))
    lines.append("NetPIPE 3.7.2 NPmpi -I, mpirun -np 2 --bind-to core, pml ob1, btl self,vader, "
             "mpi_leave_pinned 1; medians of %d interleaved rounds [min-max]" % a.runs)
    med = {}
    for label, size, is_lat in sizes:
        cells = []
        for n in confs:
            vals = [at(rows, size)[1] * 1e6 if is_lat else at(rows, size)[0] for rows in runs[n]]
            med[(label, n)] = statistics.median(vals)
            cells.append("%s %.2f [%.2f-%.2f]" % (n, med[(label, n)], min(vals), max(vals)))
        ratio = " ".join("%s/debian %.3f" % (n, med[(label, n)] / med[(label, "debian")])
                         for n in confs if n != "debian")
        lines.append("%-18s %s; %s" % (label, "; ".join(cells), ratio))
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(work, "netpipe.txt"), "w") as f:
        f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
