#!/usr/bin/env python3
"""fixtures.py BUILD OUTDIR -- build startup.py's programs (A: empty core,
B: BUILD's libdemocore.so) into OUTDIR and keep them, to run callgrind,
strace or perf on them by hand (startup.py removes its own)."""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import startup  # noqa: E402

build, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
os.makedirs(out, exist_ok=True)
progs = startup.build_fixtures(out, [("B", os.path.join(build, "test", "libdemocore.so"))],
                               "pinheap_")
for tag, prog in sorted(progs.items()):
    print(tag, prog)
