#!/usr/bin/env python3
"""anon_pages.py RUNS PROG... : the start-up row's program reading its own
/proc/self/smaps at the end of main (startup3's scripts/app2.c, built by
mk.py against each core library), run RUNS times alternated, with the
row's environment.  Per program: resident pages of anonymous mappings
without a name and glibc's [heap] (the arenas, the caches, the maps, .bss beyond the file),
those of 1 MiB or more (pinheap's arena segments) or
glibc's [heap] (counted in both), and all resident pages:
medians and means."""
import statistics, subprocess, sys
ENV = {"PATH": "/usr/bin:/bin", "OMPI_MCA_mpi_leave_pinned": "1", "PINHEAP_MODE": "on"}
runs, progs = int(sys.argv[1]), sys.argv[2:]
res = {p: {"anon": [], "segs": [], "all": []} for p in progs}
for r in range(runs):
    for p in progs[r % len(progs):] + progs[:r % len(progs)]:
        out = subprocess.run([p], env=ENV, capture_output=True, text=True, check=True).stdout
        anon, tot, big = 0, 0, []
        for line in out.splitlines():
            f = line.split()
            if f[0] == "anon":
                continue
            n = int(f[0])
            tot += n
            if len(f) == 4 and f[1] == "rw-p":       # no name: anonymous
                anon += n
                if int(f[3]) >= 256:                  # a 1 MiB segment or larger
                    big.append(n)
            elif len(f) == 5 and f[4] == "[heap]":    # glibc's heap (program A)
                anon += n
                big.append(n)
        res[p]["anon"].append(anon)
        res[p]["segs"].append(sum(big))
        res[p]["all"].append(tot)
for p in progs:
    print("%-40s" % p[-40:], "  ".join("%s median %g mean %.1f" % (k, statistics.median(v), statistics.mean(v))
                                        for k, v in res[p].items()))
