#!/usr/bin/env python3
"""sweep.py -- choosing heapsplit's split point and threshold (issue 25, item 7).

Runs shm_bench (through tools/bench/shm/run.py's run_one: the same mpirun
line and environment as the table) for heap and for heapsplit with every
message split (SPLIT_MIN 1K) at several sender shares, the configurations
interleaved within each round (the order rotating), each run on a quiet
machine (run.py --quiet), and prints per size the
median time per message of each, and each split configuration's speed over
heap (the median of the rounds' own ratios, with min-max).

Usage: sweep.py BINDIR [--rounds N] [--shares 25,40,50,60] [--max SIZE]
                [--also NAME=BINARY]
  BINDIR  the build's tools/bench/shm directory
  --also  one more configuration: heapsplit (every message split, 50%) of
          another build of shm_bench.c (e.g. a variant in which the sender
          copies the head of the message and the receiver the tail)
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shm"))
import run  # noqa: E402  (tools/bench/shm/run.py)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    bindir, rounds, shares, maxsize, also = args[0], 9, [25, 40, 50, 60], 64 << 20, None
    i = 1
    while i + 1 < len(args):
        if args[i] == "--rounds":
            rounds = int(args[i + 1])
        elif args[i] == "--shares":
            shares = [int(x) for x in args[i + 1].split(",")]
        elif args[i] == "--also":
            also = args[i + 1].split("=", 1)
        elif args[i] == "--max":
            maxsize = run.parse_size(args[i + 1], "--max")
        else:
            print("sweep.py: unknown argument %s" % args[i], file=sys.stderr)
            return 2
        i += 2
    binary = os.path.join(bindir, "shm_bench")
    configs = [("heap", None, binary)] + [("heapsplit", (1024, s), binary) for s in shares]
    names = ["heap"] + ["split%d" % s for s in shares]
    if also:
        configs.append(("heapsplit", (1024, 50), also[1]))
        names.append(also[0])
    samples = {k: {} for k in names}
    for r in range(rounds):
        k0 = r % len(configs)
        for name, (m, split, b) in (list(zip(names, configs))[k0:] + list(zip(names, configs))[:k0]):
            p, rows, _ = run.run_quiet(b, m, maxsize, 512 << 20, split)
            if p.returncode != 0 or not rows:
                print("FAIL %s: %s" % (name, (p.stdout + p.stderr)[-400:]))
                return 1
            for n, v in rows.items():
                samples[name].setdefault(n, {})[r] = v[0]
        print("round %d done, load %.2f" % (r + 1, os.getloadavg()[0]), file=sys.stderr)
    sizes = sorted(samples["heap"])
    print("time per message, us, median of %d interleaved rounds (heap: the receiver copies "
          "all; splitP: heapsplit, every message split, the sender copying P%%)" % rounds)
    print("%-6s" % "size" + "".join("%-12s" % k for k in names))
    for n in sizes:
        print("%-6s" % run.fmt_size(n) + "".join(
            "%-12.2f" % statistics.median(samples[k][n].values()) for k in names))
    print()
    print("speed over heap, the median of the rounds' own ratios (min-max)")
    print("%-6s" % "size" + "".join("%-22s" % k for k in names[1:]))
    for n in sizes:
        cells = []
        for k in names[1:]:
            rs = [samples["heap"][n][r] / samples[k][n][r] for r in samples[k][n]]
            cells.append("%-22s" % ("%.2f (%.2f-%.2f)" % (statistics.median(rs), min(rs), max(rs))))
        print("%-6s" % run.fmt_size(n) + "".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
