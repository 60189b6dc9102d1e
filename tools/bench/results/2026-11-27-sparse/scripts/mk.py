#!/usr/bin/env python3
"""mk.py TAG ARCHIVE : startup.py's programs around ARCHIVE (A: an empty
core library, B: one holding ARCHIVE) in /tmp/sp/fx_TAG, plus app2 beside
each: the row's program that lists its resident pages per mapping at the
end of main (../../2026-11-27-startup3/scripts/app2.c)."""
import os, shutil, sys
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", ".."))          # tools/bench
import startup
tag, archive = sys.argv[1], os.path.abspath(sys.argv[2])
d = "/tmp/sp/fx_" + tag
shutil.rmtree(d, ignore_errors=True)
os.makedirs(d)
progs = startup.build_fixtures(d, [("B", archive)], "pinheap_")
app2 = os.path.join(here, "..", "..", "2026-11-27-startup3", "scripts", "app2.c")
for prog in progs.values():
    pdir = os.path.dirname(prog)
    startup.cc(["-O2", app2, "-o", os.path.join(pdir, "app2"), "-L" + pdir, "-lmpilike",
                "-Wl,-rpath," + pdir])
print(progs)
