#!/usr/bin/env python3
"""targets_test.py -- checks run.py's targets_check() on made-up rows whose
answers are known.  Main entry point: main().  Exit 0 when every check
holds, 1 with the failed checks listed.  Python 3 standard library only."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

failed = []


def expect(what, got, want):
    if got != want:
        failed.append("%s: got %r, expected %r" % (what, got, want))


def cell(t_glibc, t_best, rss_glibc, rss_kb):
    return {"time_vs_glibc": t_glibc, "time_vs_best_peer": t_best, "rss_vs_glibc": rss_glibc,
            "median_peak_rss_kb": rss_kb}


def rows_make(table):
    """table: {(workload, threads): {allocator: (time, rss)}} -> run.py's rows,
    with the ratios run.summarize() would compute."""
    rows = {}
    for key, allocs in table.items():
        best = min(v[0] for n, v in allocs.items() if n in run.PEERS)
        g = allocs["glibc"]
        rows[key] = {"allocators": {n: cell(v[0] / g[0], v[0] / best, v[1] / g[1], v[1])
                                    for n, v in allocs.items()}}
    return rows


def by_prefix(checks, prefix):
    hits = [c for c in checks if c["target"].startswith(prefix)]
    return hits[0] if len(hits) == 1 else None


def main():
    # Two rows at 1-2 threads.  tcmalloc: 0.5x glibc on both; pinheap: 0.4x
    # on a, 0.6x on b (geometric mean 0.49, not <= 0.40); row b is 1.2x its
    # best peer (tcmalloc 0.5); peak RSS 0.9x and 1.6x glibc's (geometric
    # mean 1.2, row b above 1.3).
    few = rows_make({
        ("a", 1): {"glibc": (1.0, 10), "tcmalloc": (0.5, 20), "pinheap": (0.4, 9)},
        ("b", 2): {"glibc": (1.0, 10), "tcmalloc": (0.5, 20), "pinheap": (0.6, 16)},
    })
    checks = run.targets_check(["glibc", "tcmalloc", "pinheap"], few, {"pinheap": 71.0, "tcmalloc": 79.0})
    c = by_prefix(checks, "1/2 threads: geometric-mean time vs glibc")
    expect("geomean vs glibc", (round(c["value"], 4), c["met"]) if c else None, (0.4899, False))
    expect("no 1/2-thread target against the best peer's geometric mean",
           by_prefix(checks, "1/2 threads: geometric-mean time vs the best peer's"), None)
    c = by_prefix(checks, "1/2 threads: slowest row vs its best peer (b-2)")
    expect("slowest row", (round(c["value"], 2), c["met"], c["detail"]) if c else None,
           (1.2, True, "above: none"))
    c = by_prefix(checks, "1/2 threads: geometric-mean peak RSS")
    expect("geomean rss", (round(c["value"], 4), c["met"]) if c else None, (1.2, False))
    c = by_prefix(checks, "1/2 threads: largest row peak RSS vs glibc (b-2)")
    expect("largest rss row", (round(c["value"], 2), c["met"], c["detail"]) if c else None,
           (1.6, False, "above: b-2 1.60x"))
    c = by_prefix(checks, "fast path")
    expect("fast path", (c["value"], c["met"], c["detail"].startswith("best peer tcmalloc 79.0"))
           if c else None, (71.0, False, True))
    expect("no 8/32 targets without such rows", [x for x in checks if x["target"].startswith("8/32")], [])

    # At 8 and 32 threads: pinheap 0.69x glibc against mimalloc's 0.70x on
    # geometric means (0.99x, not <= 0.9), and one row 1.6x its best peer.
    many = rows_make({
        ("c", 8): {"glibc": (1.0, 10), "mimalloc": (0.49, 10), "pinheap": (0.3, 10)},
        ("d", 32): {"glibc": (1.0, 10), "mimalloc": (1.0, 10), "pinheap": (1.6, 10)},
        ("e", 4): {"glibc": (1.0, 10), "mimalloc": (1.0, 10), "pinheap": (9.0, 10)},
    })
    checks = run.targets_check(["glibc", "mimalloc", "pinheap"], many, {})
    c = by_prefix(checks, "8/32 threads: geometric-mean time vs the best peer's (mimalloc)")
    expect("8/32 geomean vs best peer", (round(c["value"], 4), c["met"]) if c else None, (0.9897, False))
    c = by_prefix(checks, "8/32 threads: slowest row vs its best peer (d-32)")
    expect("8/32 slowest row", (round(c["value"], 2), c["met"], c["detail"]) if c else None,
           (1.6, False, "above: d-32 1.60x"))
    expect("4 threads not judged, no fast path without callgrind", len(checks), 2)
    expect("no subject, no checks", run.targets_check(["glibc", "mimalloc"], many, {}), [])

    lines = run.targets_markdown(run.targets_check(["glibc", "mimalloc", "pinheap"], many, {}))
    expect("markdown marks the miss", any("| **no** |" in x for x in lines), True)

    # A trivial program: fixed at 1 thread, 1843 KiB against glibc's 1536
    # (0.30 MiB more, not within 0.2); and the start-up row, whose added
    # time must be strictly below 0.1 ms and whose program's RSS is 0.15 MiB
    # over the empty core library's.
    trivial = rows_make({("fixed", 1): {"glibc": (1.0, 1536), "pinheap": (0.5, 1843)}})
    startup = {"added_ms": 0.1, "a_ms": 1.2, "b_ms": 1.1, "pairs": 200, "rss_a_kb": 1357.6,
               "rss_b_kb": 1204.0, "instructions_a": 300000, "instructions_b": 150000}
    checks = run.targets_check(["glibc", "pinheap"], trivial, {}, startup)
    c = by_prefix(checks, "trivial program (fixed-1, preloaded)")
    expect("trivial rss", (round(c["value"], 2), c["met"]) if c else None, (0.3, False))
    c = by_prefix(checks, "trivial program linked transitively")
    expect("transitive rss", (round(c["value"], 2), c["met"]) if c else None, (0.15, True))
    c = by_prefix(checks, "start-up added")
    expect("start-up at the limit misses", (c["value"], c["met"], c["op"]) if c else None,
           (0.1, False, "<"))
    startup["added_ms"] = 0.099
    c = by_prefix(run.targets_check(["glibc", "pinheap"], trivial, {}, startup), "start-up added")
    expect("start-up under the limit", c["met"] if c else None, True)
    lines = run.targets_markdown(checks)
    expect("markdown shows the strict limit", any("| < 0.1 |" in x for x in lines), True)
    expect("no start-up check without the row",
           by_prefix(run.targets_check(["glibc", "pinheap"], trivial, {}), "start-up"), None)

    for f in failed:
        print("targets_test: " + f, file=sys.stderr)
    if not failed:
        print("targets_test: all checks hold")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
