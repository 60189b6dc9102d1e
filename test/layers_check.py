#!/usr/bin/env python3
"""layers_check.py -- the archive's layers, checked: no arrow points up.

The layers, lowest first, each a folder:
    allocator/base    types, the system call, start-up marks, the logger, the lock
    config            parameters (sees the allocator only through allocator/base)
    allocator/os      the OS layer, the owner and kind maps
    allocator/heap    a heap's state, arenas, bins, segments, huge chunks, sources
    allocator/shm     the shared-memory heap
    allocator/front   thread caches, slab pages, the malloc family's start
    allocator/api     malloc, mspaces, statistics, the checker
    hooks             decision, events, interception, bridges (its subfolders)
The rules that hold, for every file of those folders:
  - an #include of a header of the tree names its path from the top
    ("allocator/heap/chunk.h"), so the folder shows; the generated
    pinheap.h and pinheap_config.h are the only others;
  - no include of a header of a higher layer, nor of another folder's
    private header (shm_region.h, slab.h, params_internal.h, *_impl.h);
  - no weak declaration outside hooks/ (it hides a dependency);
  - no mapping system call (mmap, munmap, mremap, madvise) in allocator/
    but in allocator/os/os.c, where every release is reported;
  - and, on the archive: no member uses a symbol another member of a higher
    layer defines (members are named by their source's file name, unique).

usage: layers_check.py SOURCE_DIR [ARCHIVE]     check the tree (and the archive's symbols)
       layers_check.py --selftest               trees with a forbidden arrow of each
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

LAYERS = ("allocator/base", "config", "allocator/os", "allocator/heap", "allocator/shm",
          "allocator/front", "allocator/api", "hooks")
GENERATED = ("pinheap.h", "pinheap_config.h")
PRIVATE = {"allocator/shm/shm_region.h": "allocator/shm", "allocator/front/slab.h": "allocator/front",
           "config/params_internal.h": "config"}
MAPPER = "allocator/os/os.c"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
WEAK = re.compile(r'__attribute__\s*\(\(\s*weak\s*\)\)|#\s*pragma\s+weak')
MAPCALL = re.compile(r'\bSYS_(mmap|munmap|mremap|madvise)\b|(?<![\w.>])(mmap|munmap|mremap|madvise)\s*\(')


def layer_of(rel):
    """The rank of the layer a path (from the top) lies in, or None."""
    best = None
    for rank, folder in enumerate(LAYERS):
        if rel == folder or rel.startswith(folder + "/"):
            best = rank
    return best


def private_owner(rel):
    if rel in PRIVATE:
        return PRIVATE[rel]
    if rel.endswith("_impl.h"):
        return os.path.dirname(rel)
    return None


def product_files(src):
    for folder in ("allocator", "config", "hooks"):
        for root, _dirs, files in os.walk(os.path.join(src, folder)):
            for fn in sorted(files):
                if fn.endswith((".c", ".h", ".h.in")):
                    path = os.path.join(root, fn)
                    yield os.path.relpath(path, src).replace(os.sep, "/"), path


def check_sources(src):
    bad = []
    for rel, path in product_files(src):
        rank = layer_of(rel)
        if rank is None:
            bad.append("%s: lies in no layer (%s)" % (rel, ", ".join(LAYERS)))
            continue
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
        for no, line in enumerate(lines, 1):
            where = "%s:%d" % (rel, no)
            comment = line.lstrip().startswith(("*", "/*", "//"))
            m = INCLUDE.match(line)
            if m:
                name = m.group(1)
                if name in GENERATED:
                    pass
                elif not os.path.isfile(os.path.join(src, name)):
                    bad.append("%s: includes \"%s\", not a path from the top of the tree" % (where, name))
                else:
                    to = layer_of(name)
                    owner = private_owner(name)
                    if to is not None and to > rank:
                        bad.append("%s: includes %s, of a higher layer (%s may not use %s)"
                                   % (where, name, LAYERS[rank], LAYERS[to]))
                    elif owner is not None and os.path.dirname(rel) != owner:
                        bad.append("%s: includes %s, private to %s/" % (where, name, owner))
            if not rel.startswith("hooks/") and WEAK.search(line) and not comment:
                bad.append("%s: a weak declaration (it hides a dependency)" % where)
            if (rel.startswith("allocator/") and rel != MAPPER and not comment
                    and MAPCALL.search(re.sub(r"/\*.*?\*/", "", line).split("//")[0])):
                bad.append("%s: maps or unmaps itself (only %s does, through its os_* functions)"
                           % (where, MAPPER))
    return bad


def member_sources(src):
    """Archive member name (file.c.o) -> its source's path from the top."""
    out, dup = {}, []
    for rel, _path in product_files(src):
        if rel.endswith(".c"):
            key = os.path.basename(rel) + ".o"
            if key in out:
                dup.append("%s and %s: one member name (%s)" % (out[key], rel, key))
            out[key] = rel
    return out, dup


def check_archive(src, archive):
    out = subprocess.run(["nm", "-A", archive], capture_output=True, text=True)
    if out.returncode != 0:
        return ["%s: nm failed: %s" % (archive, out.stderr.strip())]
    sources, bad = member_sources(src)
    defined, undefined = {}, []
    for line in out.stdout.splitlines():
        head, _, rest = line.rpartition(":")
        member = head.split(":")[-1]
        parts = rest.split()
        if len(parts) == 3 and parts[1] in "TDBRVW":
            defined.setdefault(parts[2], member)
        elif len(parts) == 2 and parts[0] == "U":
            undefined.append((member, parts[1]))
    seen = 0
    for member, sym in undefined:
        frm_src, where = sources.get(member), defined.get(sym)
        if frm_src is None or where is None or where == member:
            continue
        to_src = sources.get(where)
        if to_src is None:
            continue
        seen += 1
        frm, to = layer_of(frm_src), layer_of(to_src)
        if frm is not None and to is not None and to > frm:
            bad.append("%s: uses %s, defined in %s, of a higher layer" % (frm_src, sym, to_src))
    if seen == 0:
        bad.append("%s: no symbol of one member used by another: not the archive of %s?"
                   % (archive, src))
    return bad


def selftest():
    """Each kind of forbidden arrow is caught; a clean tree passes."""
    clean = {
        "allocator/base/base.h": "",
        "allocator/heap/heap.h": '#include "allocator/base/base.h"\n',
        "allocator/shm/shm_region.h": "",
        "allocator/heap/a.c": '#include "allocator/heap/heap.h"\nint f(void) { return 1; }\n',
        "allocator/api/b.c": '#include "pinheap.h"\nint f(void);\nint g(void) { return f(); }\n',
        "allocator/os/os.c": "void m(void) { mmap(0, 0, 0, 0, -1, 0); }\n",
        "config/c.c": '#include "allocator/base/base.h"\n',
        "hooks/events/h.c": "extern int w(void) __attribute__((weak));\n",
    }
    cases = {
        "upward include": ("allocator/heap/a.c", '#include "allocator/api/api.h"\n'),
        "config beyond base": ("config/c.c", '#include "allocator/heap/heap.h"\n'),
        "bare include": ("allocator/heap/a.c", '#include "heap.h"\n'),
        "private header": ("allocator/api/b.c", '#include "allocator/shm/shm_region.h"\n'),
        "weak": ("allocator/heap/a.c", "extern void f(void) __attribute__((weak));\n"),
        "mapcall": ("allocator/heap/a.c", "  ph_syscall(SYS_munmap, p, n);\n"),
        "no layer": ("allocator/misc/x.c", "\n"),
        "symbol": None,
    }
    ok = True
    for what, change in list(cases.items()) + [("clean", "clean")]:
        d = tempfile.mkdtemp(prefix="layers-")
        try:
            files = dict(clean)
            if what == "symbol":
                files["allocator/heap/a.c"] = "int g(void);\nint f(void) { return g(); }\n"
            elif change != "clean":
                files[change[0]] = files.get(change[0], "") + change[1]
            for f, t in files.items():
                os.makedirs(os.path.join(d, os.path.dirname(f)), exist_ok=True)
                with open(os.path.join(d, f), "w") as fh:
                    fh.write(t)
            for h in ("allocator/api/api.h",):
                with open(os.path.join(d, h), "w") as fh:
                    fh.write("")
            found = check_sources(d)
            if what in ("symbol", "clean"):
                objs = []
                for c, o in (("allocator/heap/a.c", "a.c.o"), ("allocator/api/b.c", "b.c.o")):
                    subprocess.run(["cc", "-c", "-x", "c", "-o", os.path.join(d, o), "-"],
                                   input="\n".join(l for l in files[c].splitlines()
                                                   if not l.startswith("#include")),
                                   text=True, check=True)
                    objs.append(os.path.join(d, o))
                subprocess.run(["ar", "rc", os.path.join(d, "lib.a")] + objs, check=True)
                found += check_archive(d, os.path.join(d, "lib.a"))
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
    print("ok   no arrow points up: " + " < ".join(LAYERS) + "; every include names its "
          "folder; private headers stay home; only allocator/os/os.c maps and unmaps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
