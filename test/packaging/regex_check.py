#!/usr/bin/env python3
"""regex_check.py -- no test's pass or fail expression is cut in pieces.

CMake stores a test's PASS_REGULAR_EXPRESSION and FAIL_REGULAR_EXPRESSION as
lists: a ';' inside one splits it into alternatives, and ctest passes a test
when any alternative matches -- so "warned; then X" passes on the warning
alone, whatever follows.  A literal ';' must be written [;] (CMake keeps
what is inside brackets whole).  Reads every
CTestTestfile.cmake under BUILD_DIR and prints one FAIL line per test whose
expression holds a ';'.

usage: regex_check.py BUILD_DIR
"""
import glob
import os
import re
import sys

PROPS = re.compile(r'set_tests_properties\(\[=\[(.*?)\]=\] PROPERTIES(.*?)\)\n', re.S)
EXPR = re.compile(r'(PASS_REGULAR_EXPRESSION|FAIL_REGULAR_EXPRESSION) "((?:[^"\\]|\\.)*)"', re.S)


def split_at(expr):
    """Whether CMake's list handling splits expr: a ';' outside brackets
    (it keeps "[...]" whole, so a character class [;] is safe)."""
    depth = 0
    for c in expr:
        if c == "[":
            depth += 1
        elif c == "]" and depth > 0:
            depth -= 1
        elif c == ";" and depth == 0:
            return True
    return False


def main():
    build = sys.argv[1]
    files = glob.glob(os.path.join(build, "**", "CTestTestfile.cmake"), recursive=True)
    bad = seen = 0
    for f in files:
        with open(f) as fh:
            text = fh.read()
        for m in PROPS.finditer(text):
            for e in EXPR.finditer(m.group(2)):
                seen += 1
                if split_at(e.group(2)):
                    bad += 1
                    print("FAIL %s: its %s holds ';' (CMake splits it there; write [;])"
                          % (m.group(1), e.group(1)))
    if seen == 0:
        print("FAIL no test expression found under %s" % build)
        return 1
    print("ok   %d expressions in %d files, none split" % (seen, len(files)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
