#!/usr/bin/env python3
"""bench.py -- pinheap's Open MPI against Debian's: a rank's start-up and a
real MPI benchmark (NetPIPE 3.7.2's NPmpi, from Debian's archive), with and
without pinheap, mpi_leave_pinned on in every run.

Start-up: tools/openmpi/startup.c, built by each mpicc, spawns itself 200
times per round and gives the median time from spawn to main (the loader
and the core libraries' constructors: pinheap's decision and installation).

Configurations, interleaved round by round (--runs, default 5):
  pinheap     the Open MPI of tools/openmpi/build.sh (OUT_DIR/install), pinheap
              its memory component and serving malloc;
  glibc       the same Open MPI with pinheap forwarding every call to glibc
              (PINHEAP_MODE=off): the allocator's share alone;
  debian      Debian's own Open MPI 4.1.4 (/usr/bin/mpicc, mpirun: memory/patcher).
NPmpi runs under each one's mpirun -np 2 (pml ob1, btl self,vader), sizes 1 byte
to --upper (default 8 MiB), no perturbed sizes (-p 0), with -I (a different
buffer each repetition, so that a registration cache would see new memory).

Prints, per configuration, the medians over the rounds (and the spread) of
the latency of 8-byte messages and the bandwidth at 64 KiB, 1 MiB and the
largest size, and the ratios to debian; writes the table and every run's
raw output under WORK_DIR.

usage: bench.py OUT_DIR WORK_DIR [--runs N] [--upper BYTES] [--no-netpipe]
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


def startup(confs, work, env, rounds):
    """Spawn-to-main medians (us), round by round interleaved."""
    here = os.path.dirname(os.path.abspath(__file__))
    exes = {}
    for n, (bindir, _) in confs.items():
        exes[n] = os.path.join(work, "startup-" + n)
        sh([os.path.join(bindir, "mpicc"), "-O2", "-o", exes[n], os.path.join(here, "startup.c")])
    vals = {n: [] for n in confs}
    for _ in range(rounds):
        for n, (_, extra) in confs.items():
            e = dict(env)
            e.update(extra)
            vals[n].append(float(sh([exes[n], "spawn", "200"], env=e).split()[0]))
    med = {n: statistics.median(v) for n, v in vals.items()}
    cells = "; ".join("%s %.0f [%.0f-%.0f]" % (n, med[n], min(vals[n]), max(vals[n])) for n in confs)
    return ["start-up, spawn to main (us; medians of %d rounds of 200 spawns [min-max]): %s; "
            "pinheap - debian %+.0f us" % (rounds, cells, med["pinheap"] - med["debian"])]


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
    ap.add_argument("--no-netpipe", action="store_true", help="the start-up only")
    a = ap.parse_args()
    inst = os.path.join(os.path.abspath(a.out_dir), "install")
    work = os.path.abspath(a.work_dir)
    os.makedirs(work, exist_ok=True)
    confs = {
        "pinheap": (os.path.join(inst, "bin"), {}),
        "glibc": (os.path.join(inst, "bin"), {"PINHEAP_MODE": "off"}),
        "debian": ("/usr/bin", {}),
    }
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("OMPI_", "PINHEAP_", "OPAL_", "PMIX_"))}
    base_env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                     "OMPI_MCA_mpi_leave_pinned": "1"})
    lines = startup(confs, work, base_env, a.runs)
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
