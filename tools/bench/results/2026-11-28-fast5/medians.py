#!/usr/bin/env python3
"""Medians and spread (min-max) of timing.sh's output, per test and build.
Usage: medians.py FILE"""
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    name, build, sec = line.split()
    if (name, build) not in runs:
        order.append((name, build))
    runs[(name, build)].append(float(sec))
for name, build in order:
    v = runs[(name, build)]
    print(f"{name:10} {build:28} n={len(v)} median {statistics.median(v):.4f} s "
          f"(min {min(v):.4f}, max {max(v):.4f})")
