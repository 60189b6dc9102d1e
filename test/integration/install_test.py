#!/usr/bin/env python3
"""install_test.py -- installation end to end (hooks/install.c).

usage: install_test.py BUILD_TEST_DIR LIBDEMOCORE PINHEAP_INFO PREFIX PARAM_PREFIX

For each way the core library can be loaded, test/fixture/events_loaded.c
makes every memory call (mmap, mmap64, munmap, mremap, madvise, shmat,
shmdt, brk, sbrk) through the application's own relocations and counts the
events a handler sees; pinheap_install_info() must name the method that
took and say it was verified:
  direct      interposition for every symbol; malloc pinheap's
  transitive  relocation patching for every symbol; malloc pinheap's
  late        relocation patching for the memory calls; malloc glibc's and
              the texts say why; with PINHEAP_LATE_MALLOC=1 pinheap's
  PINHEAP_PATCH=0 (transitive): nothing installed, no event seen
Then python3 loads the core library with ctypes (RTLD_LOCAL) and its mmap
module's munmap must be seen, whether the module was loaded before or
after; and pinheap-info under valgrind, and the transitive program built
with AddressSanitizer and with ThreadSanitizer, say nothing was patched and
why.
Prints "ok ..." / "FAIL ..." / "SKIP ..." lines.
"""
import json
import os
import shutil
import subprocess
import sys

failures = 0
INTERPOSE, RELOC, NONE = 1, 2, 0
EVENT_SYMBOLS = ("mmap", "mmap64", "munmap", "mremap", "madvise", "shmat", "shmdt", "brk", "sbrk")
ALL_LEVELS = 7


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures += 1


def base_env(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_", "PINHEAP_", "LD_PRELOAD"))}
    env.update(extra)
    return env


def run_json(argv, extra, timeout=120):
    p = subprocess.run(argv, env=base_env(extra), capture_output=True, text=True, timeout=timeout)
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line), p
            except ValueError:
                break
    return None, p


def check_events(tag, d, method):
    syms = d["symbols"]
    for s in EVENT_SYMBOLS:
        e = syms.get(s)
        if e is None:
            check(False, "%s: %s listed by install_info" % (tag, s))
            continue
        if s in ("shmat", "shmdt") and d["shm_skipped"]:
            print("SKIP %s: %s (shmget refused here)" % (tag, s))
            continue
        check(e["method"] == method, "%s: %s installed by method %d (got %d)"
              % (tag, s, method, e["method"]))
        check(e["calls"] > 0 and e["seen"] >= e["calls"],
              "%s: the application's %s fires its event (%d calls, %d events)"
              % (tag, s, e["calls"], e["seen"]))
        if method == RELOC and e["slots"] == 0:
            check(False, "%s: %s has patched slots (the application calls it)" % (tag, s))
        check(e["verified"] == 1, "%s: %s verified by a call at installation" % (tag, s))


def main():
    global failures
    if len(sys.argv) != 6:
        print(__doc__)
        return 2
    bindir, core, info, prefix, param_prefix = sys.argv[1:]
    lp = {param_prefix + "mpi_leave_pinned": "1"}

    d, p = run_json([os.path.join(bindir, "events_direct"), "direct"], lp)
    check(d is not None, "direct: report (%s)" % p.stderr.strip()[-300:])
    if d:
        check_events("direct", d, INTERPOSE)
        check(d["symbols"]["malloc"]["method"] == INTERPOSE and d["malloc_owner"] == "pinheap"
              and d["level"] == ALL_LEVELS, "direct: malloc interposed and pinheap's, level 7 (%d)"
              % d["level"])

    d, p = run_json([os.path.join(bindir, "events_transitive"), "transitive"], lp)
    check(d is not None, "transitive: report (%s)" % p.stderr.strip()[-300:])
    if d:
        check_events("transitive", d, RELOC)
        m = d["symbols"]["malloc"]
        check(m["method"] == RELOC and m["verified"] == 1 and d["malloc_owner"] == "pinheap",
              "transitive: malloc patched, verified, pinheap's (%s)" % d["install"])
        check(d["level"] == ALL_LEVELS, "transitive: level 7 (got %d: %s)" % (d["level"], d["support"]))
        check("relocation patching" in d["install"], "transitive: the text names the method")

    late = [os.path.join(bindir, "events_late"), "late", core]
    d, p = run_json(late, lp)
    check(d is not None, "late: report (%s)" % p.stderr.strip()[-300:])
    if d:
        check_events("late", d, RELOC)
        check(d["symbols"]["malloc"]["method"] == NONE and d["malloc_owner"] == "glibc"
              and d["enabled"] == 0, "late: malloc left to glibc, enabled() 0")
        check("after start-up (dlopen)" in d["install"] and "malloc stays glibc's" in d["install"]
              and "PINHEAP_LATE_MALLOC=1" in d["install"], "late: the text says why: %s" % d["install"])
        check(d["level"] == 4 and "Fallback in force" in d["support"],
              "late: level MUNMAP, the fallback reported (%d: %s)" % (d["level"], d["support"]))
        check("transitive-link trap" not in d["support"], "late: not called the transitive-link trap")

    d, p = run_json(late, dict(lp, PINHEAP_LATE_MALLOC="1"))
    check(d is not None, "late, PINHEAP_LATE_MALLOC=1: report (%s)" % p.stderr.strip()[-300:])
    if d:
        m = d["symbols"]["malloc"]
        check(m["method"] == RELOC and m["verified"] == 1 and d["malloc_owner"] == "pinheap"
              and d["level"] == ALL_LEVELS,
              "late, PINHEAP_LATE_MALLOC=1: malloc patched and pinheap's, level 7 (%d: %s)"
              % (d["level"], d["support"]))

    d, p = run_json([os.path.join(bindir, "events_transitive"), "transitive"],
                    dict(lp, PINHEAP_PATCH="0"))
    check(d is not None, "PINHEAP_PATCH=0: report (%s)" % p.stderr.strip()[-300:])
    if d:
        none = all(d["symbols"][s]["method"] == NONE for s in EVENT_SYMBOLS + ("malloc",))
        seen = sum(d["symbols"][s]["seen"] for s in EVENT_SYMBOLS)
        check(none and seen == 0, "PINHEAP_PATCH=0: nothing installed, no event (%d seen)" % seen)
        check("PINHEAP_PATCH=0" in d["install"] and d["level"] == 0,
              "PINHEAP_PATCH=0: said, level 0 (%s)" % d["install"])

    # python3 loading the core library late with ctypes.
    py = shutil.which("python3")
    script = r"""
import ctypes, json, mmap, sys
early = mmap.mmap(-1, 1 << 20)
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)
P = sys.argv[2]
seen = []
CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
def on(t, ev, arg):
    seen.append(t)
    return 0
cb = CB(on)
VM_UNMAPPED = 0x20000
h = getattr(lib, P + "set_event_handler")
assert h(VM_UNMAPPED, 0, cb, None) == 0
early.close()
n_early = len(seen)
later = mmap.mmap(-1, 1 << 20)
later.close()
getattr(lib, P + "open")()
st = getattr(lib, P + "support_text"); st.restype = ctypes.c_char_p
it = getattr(lib, P + "install_text"); it.restype = ctypes.c_char_p
print(json.dumps({"early": n_early, "total": len(seen),
                  "level": getattr(lib, P + "support_level")(),
                  "enabled": getattr(lib, P + "enabled")(),
                  "support": st().decode(), "install": it().decode()}))
"""
    if py is None:
        print("SKIP python3 ctypes late load: python3 not found")
    else:
        d, p = run_json([py, "-c", script, core, prefix], lp)
        check(d is not None, "python3 ctypes: report (%s)" % p.stderr.strip()[-400:])
        if d:
            check(d["early"] >= 1, "python3 ctypes: munmap of a mapping made before the load is seen")
            check(d["total"] >= 2, "python3 ctypes: munmap of a mapping made after it is seen")
            check(d["level"] & 4 and d["enabled"] == 0,
                  "python3 ctypes: MUNMAP, malloc left to python's (level %d)" % d["level"])
            check("after start-up (dlopen)" in d["install"], "python3 ctypes: honest text: %s"
                  % d["install"])

    # Memory checkers: pinheap-info under valgrind decides nothing by itself.
    vg = shutil.which("valgrind")
    if vg is None:
        print("SKIP valgrind: not installed")
    else:
        j = None
        if not os.path.exists(info):
            print("SKIP valgrind: pinheap-info not built in this tree (%s)" % info)
        else:
            p = subprocess.run([vg, "-q", "--error-exitcode=9", info, "--json"], env=base_env(lp),
                               capture_output=True, text=True, timeout=240)
            try:
                j = json.loads(p.stdout)
            except ValueError:
                j = None
            check(j is not None, "valgrind: pinheap-info --json runs (%s)" % p.stderr.strip()[-300:])
        if j:
            dec = j["process"]["decision"]
            check(dec.startswith("disabled") and "valgrind" in dec,
                  "valgrind: the decision names it: %s" % dec)
            check("valgrind" in j["installation"]["text"] or
                  "every call is interposed" in j["installation"]["text"],
                  "valgrind: the info tool's installation text: %s" % j["installation"]["text"])
        # A program that would be patched (the core library behind libc).
        p = subprocess.run([vg, "-q", os.path.join(bindir, "events_transitive"), "transitive"],
                           env=base_env(lp), capture_output=True, text=True, timeout=240)
        d = None
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
        check(d is not None, "valgrind: transitive program runs (%s)" % p.stderr.strip()[-300:])
        if d:
            relocs = [s for s, e in d["symbols"].items() if e["method"] != NONE]
            check(not relocs and "valgrind" in d["install"] and d["malloc_owner"] == "glibc",
                  "valgrind: nothing patched, malloc left to it, said (%s; %s)" % (relocs, d["install"]))
    # Sanitizers: the transitive program built with ASan or TSan (the core
    # library a plain build): nothing patched, malloc left to the tool, said.
    for san, tool in (("address", "AddressSanitizer"), ("thread", "ThreadSanitizer")):
        prog = os.path.join(bindir, "events_" + san)
        if not os.path.exists(prog):
            print("SKIP %s: the compiler cannot build with -fsanitize=%s here" % (tool, san))
            continue
        env = dict(lp, ASAN_OPTIONS="detect_leaks=0", TSAN_OPTIONS="report_bugs=0")
        p = subprocess.run([prog, "transitive"], env=base_env(env), capture_output=True, text=True,
                           timeout=240)
        d = None
        for line in p.stdout.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
        check(d is not None, "%s: transitive program runs (%s)" % (tool, p.stderr.strip()[-300:]))
        if d:
            patched = [s_ for s_, e in d["symbols"].items() if e["method"] == RELOC]
            check(not patched and ("Running under %s" % tool) in d["install"]
                  and d["malloc_owner"] != "pinheap",
                  "%s: nothing patched, malloc left to it, said (%s; %s)" % (tool, patched, d["install"]))
            check(("stands aside: %s" % tool) in d["support"] and "Fallback" not in d["support"],
                  "%s: the support text says whose malloc is in use, no glibc fallback: %s"
                  % (tool, d["support"]))
            check(tool in d.get("decision", ""),
                  "%s: the decision names it: %s" % (tool, d.get("decision")))

    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
