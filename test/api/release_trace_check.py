#!/usr/bin/env python3
"""release_trace_check.py -- kernel-level proof that pinheap announces every release.

Runs release_trace under
    strace -f -s 256 -e trace=munmap,madvise,mremap,write
and reads the trace.  Between the marker lines "BEGIN pinheap-release-trace"
and "END markers=N" (both written to the program's marker descriptor, whose
number the BEGIN write reveals), every thread's events must alternate:

    write(<marker fd>, "R 0x<addr> 0x<len>\\n")   the listener, exactly once
    munmap(addr, len)                             ... then exactly that range
    madvise(addr, len, ...)                       (or this)
    mremap(old, oldlen, newlen, ...)              (or a shrink whose released
                                                   tail [old+newlen, old+oldlen)
                                                   is the marker's range, or a
                                                   move -- MREMAP_MAYMOVE, a new
                                                   address returned -- whose
                                                   whole old range is)

A release with no marker, a marker followed by another marker or by nothing,
a range that differs, and a failed release syscall are violations.  A growing
mremap in place is not a release and must not consume a marker.  The workload
must also produce at least --min KIND=N releases of each kind, so an empty
trace fails.

Usage:
  release_trace_check.py --strace PATH --program PATH [--program-arg ARG]...
                         [--trace-out FILE] [--min KIND=N]... [--expect-violation KIND]
  release_trace_check.py --check-trace FILE [--min KIND=N]...
  release_trace_check.py --selftest
Main entry point: check_trace().
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

KINDS = ("munmap", "madvise", "mremap")
VIOLATION_KINDS = ("unannounced", "mismatch", "double-marker", "orphan-marker",
                   "failed-release", "window", "too-few", "program")

LINE_RE = re.compile(r"^(?:\[pid\s+)?(\d+)\]?\s+(.*)$")
CALL_RE = re.compile(r"^(\w+)\((.*)\)\s+=\s+(-?\w+)(?:\s.*)?$")
WRITE_RE = re.compile(r'^(\d+),\s*"(.*)",\s*\d+$')
MARKER_RE = re.compile(r"^R (0x[0-9a-f]+) (0x[0-9a-f]+)\\n$")
EXIT_RE = re.compile(r"^\+\+\+ exited with (\d+) \+\+\+$")
KILLED_RE = re.compile(r"^\+\+\+ killed by (\w+)")


def parse_int(text):
    return int(text, 0)


def split_args(text):
    return [a.strip() for a in text.split(",")]


class Result:
    def __init__(self):
        self.violations = []   # (kind, message)
        self.counts = {k: 0 for k in KINDS}
        self.markers = 0
        self.exit_status = None

    def add(self, kind, msg):
        assert kind in VIOLATION_KINDS
        self.violations.append((kind, msg))

    def kinds(self):
        return {k for k, _ in self.violations}


def join_unfinished(lines):
    """Merges strace's '<unfinished ...>' / '<... name resumed>' halves, per pid."""
    pending = {}
    for lineno, raw in enumerate(lines, 1):
        raw = raw.rstrip("\n")
        m = LINE_RE.match(raw)
        if not m:
            yield lineno, None, raw
            continue
        pid, rest = int(m.group(1)), m.group(2)
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            continue
        r = re.match(r"^<\.\.\. \w+ resumed>\s?(.*)$", rest)
        if r and pid in pending:
            rest = pending.pop(pid) + r.group(1)
        yield lineno, pid, rest


def check_trace(lines, minimums):
    """Checks one strace output (a list of lines).  Returns a Result."""
    res = Result()
    marker_fd = None
    begun = ended = False
    pending = {}   # pid -> (addr, len, lineno) announced, not yet released

    for lineno, pid, rest in join_unfinished(lines):
        if pid is None:
            continue
        m = EXIT_RE.match(rest)
        if m:
            res.exit_status = int(m.group(1))
            continue
        if KILLED_RE.match(rest):
            res.exit_status = -1
            continue
        call = CALL_RE.match(rest)
        if not call:
            continue   # signals, "--- SIG..." lines and the like
        name, args, ret = call.group(1), call.group(2), call.group(3)

        if name == "write":
            w = WRITE_RE.match(args)
            if not w:
                continue
            fd, text = int(w.group(1)), w.group(2)
            if text.startswith("BEGIN pinheap-release-trace"):
                if begun:
                    res.add("window", "line %d: a second BEGIN" % lineno)
                marker_fd, begun = fd, True
                continue
            if not begun or ended or fd != marker_fd:
                continue
            if text.startswith("END markers="):
                ended = True
                claimed = int(text[len("END markers="):].replace("\\n", ""))
                if claimed != res.markers:
                    res.add("window", "line %d: the program counted %d listener calls, the "
                            "trace holds %d markers" % (lineno, claimed, res.markers))
                continue
            if text.startswith("FAIL "):
                res.add("program", "line %d: release_trace failed: %s" % (lineno, text))
                continue
            mk = MARKER_RE.match(text)
            if not mk:
                res.add("window", "line %d: unexpected text on the marker fd: %r" % (lineno, text))
                continue
            res.markers += 1
            rng = (parse_int(mk.group(1)), parse_int(mk.group(2)), lineno)
            if rng[1] == 0:
                res.add("mismatch", "line %d: the listener was called with length 0" % lineno)
            if pid in pending:
                old = pending[pid]
                res.add("double-marker", "line %d: marker [0x%x, +0x%x) follows the marker of "
                        "line %d [0x%x, +0x%x) with no release in between"
                        % (lineno, rng[0], rng[1], old[2], old[0], old[1]))
            pending[pid] = rng
            continue

        if name not in KINDS or not begun or ended:
            continue
        a = split_args(args)
        try:
            addr, length = parse_int(a[0]), parse_int(a[1])
        except (ValueError, IndexError):
            res.add("window", "line %d: cannot parse %s(%s)" % (lineno, name, args))
            continue
        if name == "mremap":
            newlen = parse_int(a[2])
            moved = ("MREMAP_MAYMOVE" in args and not ret.startswith("-")
                     and parse_int(ret) != addr)
            if moved:              # the whole old range left the process
                want = (addr, length)
            elif newlen >= length:   # growth in place: not a release
                if pid in pending:
                    p = pending.pop(pid)
                    res.add("orphan-marker", "line %d: marker [0x%x, +0x%x) of line %d is "
                            "followed by a growing mremap, not a release" % (lineno, p[0], p[1], p[2]))
                continue
            else:
                want = (addr + newlen, length - newlen)
        else:
            want = (addr, length)
        if ret.startswith("-"):
            res.add("failed-release", "line %d: %s(%s) failed: %s" % (lineno, name, args, rest))
        p = pending.pop(pid, None)
        if p is None:
            res.add("unannounced", "line %d: %s of [0x%x, +0x%x) with no listener call before it"
                    % (lineno, name, want[0], want[1]))
            continue
        if (p[0], p[1]) != want:
            res.add("mismatch", "line %d: %s of [0x%x, +0x%x) but the listener was told "
                    "[0x%x, +0x%x) (line %d)" % (lineno, name, want[0], want[1], p[0], p[1], p[2]))
            continue
        res.counts[name] += 1

    if not begun:
        res.add("window", "no BEGIN line: the workload never started (or the trace is empty)")
    elif not ended:
        res.add("window", "no END line: the workload did not finish")
    for pid, p in pending.items():
        res.add("orphan-marker", "marker [0x%x, +0x%x) of line %d (pid %d) was never followed "
                "by its release" % (p[0], p[1], p[2], pid))
    for kind, n in minimums.items():
        if res.counts[kind] < n:
            res.add("too-few", "only %d %s release(s) after BEGIN, expected at least %d"
                    % (res.counts[kind], kind, n))
    if res.exit_status not in (None, 0):
        res.add("program", "release_trace exited with status %s" % res.exit_status)
    return res


def report(res, out=sys.stdout):
    print("release_trace_check: %d markers; matched releases: %s"
          % (res.markers, ", ".join("%s %d" % (k, res.counts[k]) for k in KINDS)), file=out)
    for kind, msg in res.violations[:40]:
        print("  VIOLATION [%s] %s" % (kind, msg), file=out)
    if len(res.violations) > 40:
        print("  ... and %d more" % (len(res.violations) - 40), file=out)


def parse_minimums(items):
    mins = {}
    for item in items or []:
        kind, _, n = item.partition("=")
        if kind not in KINDS or not n.isdigit():
            raise SystemExit("release_trace_check: --min '%s' is not KIND=N with KIND one of %s "
                             "and N a non-negative integer" % (item, ", ".join(KINDS)))
        mins[kind] = int(n)
    return mins


def run_program(args, mins):
    if args.strace and os.sep not in args.strace:
        args.strace = shutil.which(args.strace) or args.strace
    if not args.strace or not os.access(args.strace, os.X_OK):
        print("release_trace_check: strace not found (got '%s'); install it (Debian: apt-get "
              "install strace) and reconfigure" % (args.strace or ""), file=sys.stderr)
        return 1
    if not os.access(args.program, os.X_OK):
        print("release_trace_check: program '%s' is not executable" % args.program, file=sys.stderr)
        return 1
    out = args.trace_out or "release_trace.strace"
    cmd = [args.strace, "-f", "-s", "256", "-e", "trace=munmap,madvise,mremap,write",
           "-o", out, args.program] + (args.program_arg or [])
    env = dict(os.environ)
    # LeakSanitizer cannot run under ptrace; the rest of ASan/UBSan can.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=240, env=env)
    if proc.returncode != 0 and not args.expect_violation:
        print("release_trace_check: '%s' exited with %d\n%s" % (" ".join(cmd), proc.returncode,
              proc.stderr[-2000:]), file=sys.stderr)
        if "ptrace" in proc.stderr or "Operation not permitted" in proc.stderr:
            print("release_trace_check: strace could not trace (ptrace refused?)", file=sys.stderr)
        return 1
    with open(out) as f:
        lines = f.readlines()
    res = check_trace(lines, mins)
    report(res)
    if args.expect_violation:
        if args.expect_violation in res.kinds():
            print("release_trace_check: the expected '%s' violation was caught" % args.expect_violation)
            return 0
        print("release_trace_check: FAILED: expected a '%s' violation, got %s"
              % (args.expect_violation, sorted(res.kinds()) or "none"))
        return 1
    if res.violations:
        print("release_trace_check: FAILED (%d violation(s)); trace kept in %s"
              % (len(res.violations), out))
        return 1
    print("release_trace_check: OK")
    return 0


# ---- self test: hand-made traces the checker must accept or reject ----------

_GOOD = """\
100 write(2, "release_trace: marker fd 3\\n", 27) = 27
100 munmap(0x7f0000000000, 4096)      = 0
100 write(3, "BEGIN pinheap-release-trace\\n", 28) = 28
100 write(3, "R 0x7f1000000000 0x200000\\n", 26) = 26
100 munmap(0x7f1000000000, 2097152)   = 0
100 mremap(0x7f2000000000, 8388608, 12582912, 0) = 0x7f2000000000
100 write(3, "R 0x7f2000300000 0x100000\\n", 26) = 26
100 mremap(0x7f2000000000, 4194304, 3145728, 0) = 0x7f2000000000
100 write(3, "R 0x7f3000001000 0x3000\\n", 24) = 24
100 madvise(0x7f3000001000, 12288, MADV_DONTNEED) = 0
100 write(3, "R 0x7f7000000000 0x200000\\n", 26) = 26
100 mremap(0x7f7000000000, 2097152, 8388608, MREMAP_MAYMOVE|MREMAP_FIXED, 0x7f8000000000) = 0x7f8000000000
101 write(3, "R 0x7f4000000000 0x10000\\n", 25 <unfinished ...>
100 write(1, "unrelated\\n", 10) = 10
101 <... write resumed>) = 25
101 munmap(0x7f4000000000, 65536) = 0
100 write(3, "END markers=5\\n", 14) = 14
100 munmap(0x7f5000000000, 4096)      = 0
100 +++ exited with 0 +++
"""


def _mutate(old, new):
    assert old in _GOOD, old
    return _GOOD.replace(old, new, 1)


_BAD = {
    "unannounced": _mutate('100 write(3, "R 0x7f1000000000 0x200000\\n", 26) = 26\n', ""),
    "mismatch": _mutate("munmap(0x7f1000000000, 2097152)", "munmap(0x7f1000000000, 2101248)"),
    "double-marker": _mutate('100 munmap(0x7f1000000000, 2097152)   = 0\n',
                             '100 write(3, "R 0x7f1000000000 0x200000\\n", 26) = 26\n'
                             '100 munmap(0x7f1000000000, 2097152)   = 0\n'),
    "orphan-marker": _mutate('100 write(3, "END markers=5\\n", 14) = 14\n',
                             '100 write(3, "R 0x7f6000000000 0x1000\\n", 24) = 24\n'
                             '100 write(3, "END markers=6\\n", 14) = 14\n'),
    "failed-release": _mutate("munmap(0x7f4000000000, 65536) = 0",
                              "munmap(0x7f4000000000, 65536) = -1 EINVAL (Invalid argument)"),
    "window": "".join(l + "\n" for l in _GOOD.splitlines() if "BEGIN" not in l),
    "unannounced:move": _mutate('100 write(3, "R 0x7f7000000000 0x200000\\n", 26) = 26\n', ""),
    "program": _mutate("exited with 0", "exited with 2"),
}


def selftest():
    failures = 0
    mins = {"munmap": 2, "madvise": 1, "mremap": 1}
    res = check_trace(_GOOD.splitlines(True), mins)
    if res.violations or res.counts != {"munmap": 2, "madvise": 1, "mremap": 2}:
        print("selftest: the good trace was not accepted as expected:")
        report(res)
        failures += 1
    for kind, text in _BAD.items():
        res = check_trace(text.splitlines(True), mins)
        if kind.split(":")[0] not in res.kinds():   # "kind:case"
            print("selftest: a trace with a '%s' fault was not rejected for it (got %s)"
                  % (kind, sorted(res.kinds())))
            failures += 1
    res = check_trace(_GOOD.splitlines(True), {"munmap": 3})
    if "too-few" not in res.kinds():
        print("selftest: --min munmap=3 on a trace with 2 munmaps was not rejected")
        failures += 1
    res = check_trace([], {})
    if "window" not in res.kinds():
        print("selftest: an empty trace was accepted")
        failures += 1
    print("release_trace_check selftest: %s (%d good, %d bad traces, 2 edge cases)"
          % ("FAILED" if failures else "OK", 1, len(_BAD)))
    return 1 if failures else 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--strace")
    ap.add_argument("--program")
    ap.add_argument("--program-arg", action="append")
    ap.add_argument("--trace-out")
    ap.add_argument("--check-trace", metavar="FILE")
    ap.add_argument("--min", action="append", metavar="KIND=N")
    ap.add_argument("--expect-violation", choices=VIOLATION_KINDS)
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args(argv)
    mins = parse_minimums(args.min)
    if args.selftest:
        return selftest()
    if args.check_trace:
        with open(args.check_trace) as f:
            res = check_trace(f.readlines(), mins)
        report(res)
        return 1 if res.violations else 0
    if not args.program:
        ap.error("--program (with --strace), --check-trace or --selftest is required")
    return run_program(args, mins)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
