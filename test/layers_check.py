#!/usr/bin/env python3
"""layers_check.py -- the archive's layers, checked: no arrow points up.

Layers, lowest first: allocator/ (the allocator, with the base: section
marks, the system call, the logger), config/ (parameters, build settings),
hooks/ (decision, events, installation, bridges to other runtimes).  The
rules that hold:
  - allocator/ and config/ never use hooks/: no #include of a hooks/
    header, no weak extern (a weak declaration hides a dependency), and no
    symbol of an allocator/ or config/ archive member defined by a hooks/
    member;
  - allocator/ and config/ use each other only through named headers:
    allocator/ includes config's params.h (the parameters), config/ includes
    allocator's internal.h, startup.h and raw_syscall.h.
A header is found as the compiler finds it: next to the file, then
allocator/, config/, hooks/ (the archive's -I order), then the top
(rename.h) and the generated include/ (pinheap.h, pinheap_config.h).

usage: layers_check.py SOURCE_DIR [ARCHIVE]     check the tree (and the archive's symbols)
       layers_check.py --selftest               a tree with a forbidden arrow of each
                                                kind must fail, a clean one pass
Prints one "FAIL file: ..." line per forbidden arrow and "ok ..." at the end;
exit 1 on any.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAYERS = ("allocator", "config", "hooks")
SEARCH = ("allocator", "config", "hooks")
# (from, to): None = any header; a set = only those headers
ALLOWED = {
    ("allocator", "allocator"): None,
    ("allocator", "config"): {"params.h"},
    ("config", "config"): None,
    ("config", "allocator"): {"internal.h", "startup.h", "raw_syscall.h"},
    ("hooks", "hooks"): None,
    ("hooks", "allocator"): None,
    ("hooks", "config"): None,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
WEAK = re.compile(r'__attribute__\s*\(\(\s*weak\s*\)\)|#\s*pragma\s+weak')
# A mapping system call, by number or by libc's name.  In allocator/ only the
# OS layer (MAPPER) makes them: every release of heap memory is reported there.
MAPCALL = re.compile(r'\bSYS_(mmap|munmap|mremap|madvise)\b|(?<![\w.>])(mmap|munmap|mremap|madvise)\s*\(')
MAPPER = "allocator/os.c"


def resolve(src, frm_dir, name):
    """The layer of the header name included from a file in frm_dir, or None
    (the top, generated, or not in the tree)."""
    base = os.path.normpath(os.path.join(src, frm_dir, name))
    if os.path.exists(base):
        rel = os.path.relpath(base, src).split(os.sep)
        return rel[0] if rel[0] in LAYERS else None
    for d in SEARCH:
        if os.path.exists(os.path.join(src, d, name)):
            return d
    top = name.split("/")[0]     # from the top: "hooks/events/events.h"
    if top in LAYERS and os.path.exists(os.path.join(src, name)):
        return top
    return None


def check_sources(src):
    bad = []
    for layer in LAYERS:
        folder = os.path.join(src, layer)
        if not os.path.isdir(folder):
            continue
        for fn in sorted(os.listdir(folder)):
            if not fn.endswith((".c", ".h")):
                continue
            path = os.path.join(folder, fn)
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
            for no, line in enumerate(lines, 1):
                m = INCLUDE.match(line)
                if m:
                    name = m.group(1)
                    to = resolve(src, layer, name)
                    if to is None:
                        continue
                    allowed = ALLOWED.get((layer, to), set())
                    if allowed is not None and os.path.basename(name) not in allowed:
                        bad.append("%s/%s:%d: includes %s/%s (%s may not use %s%s)"
                                   % (layer, fn, no, to, os.path.basename(name), layer, to,
                                      "" if not allowed else " but through " +
                                      ", ".join(sorted(allowed))))
                if (layer == "allocator" and "%s/%s" % (layer, fn) != MAPPER
                        and MAPCALL.search(line.split("//")[0])
                        and not line.lstrip().startswith(("*", "/*"))):
                    bad.append("%s/%s:%d: maps or unmaps itself (only %s does, through its "
                               "os_* functions)" % (layer, fn, no, MAPPER))
                if layer != "hooks" and WEAK.search(line) and not line.lstrip().startswith(("*", "/")):
                    bad.append("%s/%s:%d: a weak declaration (it hides a dependency)" % (layer, fn, no))
    return bad


def member_layer(src, member):
    """allocator/heap.c.o -> allocator: the layer of the source the member
    was built from (by its file name)."""
    stem = member[:-2] if member.endswith(".o") else member
    for layer in LAYERS:
        for _, _, files in os.walk(os.path.join(src, layer)):   # hooks/<concern>/ too
            if stem in files:
                return layer
    return None


def check_archive(src, archive):
    out = subprocess.run(["nm", "-A", archive], capture_output=True, text=True)
    if out.returncode != 0:
        return ["%s: nm failed: %s" % (archive, out.stderr.strip())]
    defined, undefined = {}, []
    for line in out.stdout.splitlines():
        head, _, rest = line.rpartition(":")
        member = head.split(":")[-1]
        parts = rest.split()
        if len(parts) == 3 and parts[1] in "TDBRVW":
            defined.setdefault(parts[2], member)
        elif len(parts) == 2 and parts[0] == "U":
            undefined.append((member, parts[1]))
    bad = []
    for member, sym in undefined:
        frm, where = member_layer(src, member), defined.get(sym)
        to = member_layer(src, where) if where else None
        if frm in ("allocator", "config") and to == "hooks":
            bad.append("%s: uses %s, defined in hooks/ (%s)" % (member, sym, where))
    return bad


def selftest():
    """Each kind of forbidden arrow is caught; a clean tree passes."""
    ok = True
    cases = {
        "include": ("allocator/a.c", '#include "h.h"\n'),
        "narrow": ("config/c.c", '#include "chunk.h"\n'),
        "weak": ("allocator/a.c", "extern void f(void) __attribute__((weak));\n"),
        "mapcall": ("allocator/a.c", "  ph_syscall(SYS_munmap, p, n);\n"),
    }
    for what, (path, text) in list(cases.items()) + [("clean", ("allocator/a.c", '#include "b.h"\n'))]:
        d = tempfile.mkdtemp(prefix="layers-")
        try:
            for layer in LAYERS:
                os.makedirs(os.path.join(d, layer))
            for f, t in (("hooks/h.h", ""), ("allocator/b.h", ""), ("allocator/chunk.h", ""),
                         ("allocator/internal.h", ""), ("config/c.c", ""), ("allocator/a.c", "")):
                with open(os.path.join(d, f), "w") as fh:
                    fh.write(t)
            with open(os.path.join(d, path), "w") as fh:
                fh.write(text)
            found = check_sources(d)
            want = what != "clean"
            if bool(found) != want:
                ok = False
                print("FAIL selftest %s: %s" % (what, found or "nothing found"))
            else:
                print("ok   selftest %s: %s" % (what, found[0] if found else "clean"))
        finally:
            shutil.rmtree(d)
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--selftest"]:
        return selftest()
    src = sys.argv[1]
    bad = check_sources(src)
    if len(sys.argv) > 2:
        bad += check_archive(src, sys.argv[2])
    for b in bad:
        print("FAIL " + b)
    if bad:
        return 1
    print("ok   no arrow points up: allocator/ and config/ use no hooks/ header, weak "
          "declaration or symbol; allocator/ and config/ meet only through params.h, "
          "internal.h, startup.h and raw_syscall.h; only allocator/os.c maps and unmaps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
