import subprocess, sys, statistics, collections
def run(p):
    out = subprocess.run([p], env={"PATH":"/usr/bin:/bin","OMPI_MCA_mpi_leave_pinned":"1"}, capture_output=True, text=True).stdout
    d = collections.Counter(); tot = 0
    for l in out.splitlines():
        parts = l.split()
        if parts[0] == "anon": continue
        n = int(parts[0]); tot += n
        name = parts[-1] if len(parts) == 5 else "anon"
        key = name.split("/")[-1] + ":" + parts[1] + ":" + parts[2]
        if name == "anon" or len(parts) < 5: key = "anon"
        d[key] += n
    d["TOTAL"] = tot
    return d
progs = sys.argv[1:]
res = {p: [] for p in progs}
for i in range(61):
    for p in progs: res[p].append(run(p))
keys = sorted(set(k for p in progs for r in res[p] for k in r))
for k in keys:
    print("%-40s" % k[:40], " ".join("%6.1f %6.1f" % (statistics.median(r.get(k, 0) for r in res[p]), statistics.mean(r.get(k, 0) for r in res[p])) for p in progs))
