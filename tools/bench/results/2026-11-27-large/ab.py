import subprocess, json, sys, statistics, os
B='/tmp/largeblk/benchbin/pinheap-bench'
libs={'base':'/tmp/largeblk/base.so','after':'/tmp/largeblk/after.so','tc':'/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4'}
wls=sys.argv[1].split(','); threads=sys.argv[2].split(','); runs=int(sys.argv[3]); names=sys.argv[4].split(',')
res={}
for r in range(runs):
  for w in wls:
    for t in threads:
      for n in names:
        env=dict(os.environ, LD_PRELOAD=libs[n], PINHEAP_MODE='on')
        p=subprocess.run(['/usr/bin/time','-f','FLT %R',B,w,'1',t],env=env,capture_output=True,text=True)
        d=json.loads([l for l in p.stdout.splitlines() if l.startswith('{')][-1])
        flt=int([l for l in p.stderr.splitlines() if l.startswith('FLT')][-1].split()[1])
        e=d.get('extra',{})
        res.setdefault((w,t,n),[]).append((d['seconds'],d['peak_rss_kb']/1024,flt,e.get('hit_rate',0)))
for k in sorted(res):
  v=res[k]; m=lambda i: statistics.median([x[i] for x in v])
  print("%-10s t=%s %-5s time %.3f  peak %.1f MiB  faults %d  hit %.4f   (n=%d; times %s)"%(k[0],k[1],k[2],m(0),m(1),m(2),m(3),len(v)," ".join("%.3f"%x[0] for x in v)))
