#!/usr/bin/env python3
"""replace_test.py -- the decision and replacement path, end to end.

Runs the fixture application (test/fixture/demoapp.c, linked against
libdemocore.so, which holds libpinheap.a whole) in subprocesses with a
controlled environment, for every cell of the leave-pinned matrix and every
switch, and checks who really served the memory, the self-test's support
level, glibc-internal allocations, every release path, the transitive-link
trap and real programs under the preload shim.

usage: replace_test.py GROUP BUILD_DIR PREFIX
  GROUP: matrix | switches | glibc | releases | transitive | preload
Prints one line per check ("ok", "FAIL", or "SKIP" with the reason for a
check that cannot run here) and "N passed, M failed" last; exit 1 on failure.
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

results = {"passed": 0, "failed": 0}


def check(cond, what):
    if cond:
        results["passed"] += 1
        print("ok   " + what)
    else:
        results["failed"] += 1
        print("FAIL " + what)


def base_env(extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}
    if "ASAN_OPTIONS" in os.environ:
        env["ASAN_OPTIONS"] = os.environ["ASAN_OPTIONS"]
    for k, v in extra.items():
        if v is not None:
            env[k] = v
    return env


def run_json(argv, extra, timeout=120):
    p = subprocess.run(argv, env=base_env(extra), capture_output=True, text=True, timeout=timeout)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1]), p
    except (ValueError, IndexError):
        return None, p


def fake_trees(tmp):
    empty = os.path.join(tmp, "empty")
    rdma = os.path.join(tmp, "rdma")
    os.makedirs(empty)
    os.makedirs(os.path.join(rdma, "dev", "infiniband"))
    open(os.path.join(rdma, "dev", "infiniband", "uverbs0"), "w").close()
    return empty, rdma


# The matrix, rows lp, columns lpp (Open MPI's ptmalloc2 notes).
YES, NO, RT, NF = "1", "0", "-1", None
MATRIX = {
    YES: {YES: "yes", NO: "yes", RT: "yes", NF: "yes"},
    NO: {YES: "yes", NO: "no", RT: "no", NF: "no"},
    RT: {YES: "yes", NO: "no", RT: "runtime", NF: "runtime"},
    NF: {YES: "yes", NO: "no", RT: "runtime", NF: "runtime"},
}
NAMES = {YES: "yes", NO: "no", RT: "runtime", NF: "unset"}
ENABLED_LEVEL = 7   # FREE | CHUNK | MUNMAP
# disabled, glibc's malloc: its own releases are seen where libc's entry
# points are code patched (x86-64), else MUNMAP only
DISABLED_LEVEL = 7 if platform.machine() == "x86_64" else 4


def expect_state(d, enabled, label):
    if d is None:
        check(False, label + ": no JSON from demoapp")
        return
    check(d["enabled"] == (1 if enabled else 0), "%s: enabled=%s (got %s: %s)"
          % (label, enabled, d["enabled"], d["decision"]))
    check(d["malloc_owner"] == ("pinheap" if enabled else "glibc"),
          "%s: malloc served by %s" % (label, d["malloc_owner"]))
    want = ENABLED_LEVEL if enabled else DISABLED_LEVEL
    check(d["level"] == want, "%s: support level %d (want %d; %s)" % (label, d["level"], want, d["support"]))
    check(d["decision"].startswith("enabled: " if enabled else "disabled: "),
          "%s: decision text '%s'" % (label, d["decision"]))


def group_matrix(build, tmp):
    app = os.path.join(build, "test", "demoapp")
    empty, rdma = fake_trees(tmp)
    for lp in (YES, NO, RT, NF):
        for lpp in (YES, NO, RT, NF):
            for found, root in ((True, rdma), (False, empty)):
                cell = MATRIX[lp][lpp]
                enabled = cell == "yes" or (cell == "runtime" and found)
                d, _ = run_json([app, "state"], {
                    "OMPI_MCA_mpi_leave_pinned": lp,
                    "OMPI_MCA_mpi_leave_pinned_pipeline": lpp,
                    "PINHEAP_PROBE_ROOT": root})
                expect_state(d, enabled, "lp=%s lpp=%s probe=%s" % (NAMES[lp], NAMES[lpp],
                                                                    "found" if found else "none"))
    # spellings
    for v, enabled in (("true", True), ("yes", True), ("false", False), ("no", False)):
        d, _ = run_json([app, "state"], {"OMPI_MCA_mpi_leave_pinned": v, "PINHEAP_PROBE_ROOT": rdma})
        expect_state(d, enabled, "lp=%s (spelling)" % v)


def group_switches(build, tmp):
    app = os.path.join(build, "test", "demoapp")
    empty, rdma = fake_trees(tmp)
    on = {"OMPI_MCA_mpi_leave_pinned": "1", "PINHEAP_PROBE_ROOT": rdma}
    for var, val in (("OMPI_MCA_memory_ptmalloc2_disable", "1"), ("FAKEROOTKEY", "42"),
                     ("FAKED_MODE", "unknown-is-root"), ("SANDBOX_ON", "1"), ("PINHEAP_MODE", "off")):
        d, _ = run_json([app, "state"], dict(on, **{var: val}))
        expect_state(d, False, "lp=1 with %s=%s" % (var, val))
        if d:
            check(var in d["decision"] or "off" in d["decision"], "%s named in '%s'" % (var, d["decision"]))
    d, _ = run_json([app, "state"], dict(on, OMPI_MCA_memory_ptmalloc2_disable="0"))
    expect_state(d, True, "lp=1 with disable=0")
    d, _ = run_json([app, "state"], {"PINHEAP_MODE": "on", "PINHEAP_PROBE_ROOT": empty})
    expect_state(d, True, "PINHEAP_MODE=on, nothing else")
    d, p = run_json([app, "state"], {"OMPI_MCA_mpi_leave_pinned": "maybe", "PINHEAP_PROBE_ROOT": empty})
    expect_state(d, False, "lp=maybe (unparsable: not found, no driver)")
    warn = [l for l in p.stderr.splitlines() if "warning" in l]
    check(len(warn) == 1 and "OMPI_MCA_mpi_leave_pinned" in warn[0] and "maybe" in warn[0],
          "one warning naming variable and value: %r" % warn)
    d, p = run_json([app, "state"], {"OMPI_MCA_mpi_leave_pinned": "maybe", "PINHEAP_PROBE_ROOT": rdma})
    expect_state(d, True, "lp=maybe with a driver (runtime cell)")


def group_glibc(build, tmp):
    app = os.path.join(build, "test", "demoapp")
    for lp, enabled in (("1", True), ("0", False)):
        d, p = run_json([app, "glibc"], {"OMPI_MCA_mpi_leave_pinned": lp})
        check(d is not None and p.returncode == 0 and d["ok"],
              "glibc-internal allocations, %s: %s %s" % ("enabled" if enabled else "disabled",
                                                        d and d["failed"], p.stderr.strip()[-300:]))
        check(d is not None and d["enabled"] == (1 if enabled else 0), "glibc run mode %s" % enabled)


def report_skips(d, label):
    """Checks the fixture could not run here are said, never passed."""
    if d is not None and d.get("skipped"):
        print("SKIP %s: %s" % (label, d["skipped"]))


def group_releases(build, tmp):
    app = os.path.join(build, "test", "demoapp")
    for lp, enabled in (("1", True), ("0", False)):
        d, p = run_json([app, "releases"], {"OMPI_MCA_mpi_leave_pinned": lp})
        report_skips(d, "releases, %s" % ("enabled" if enabled else "disabled"))
        check(d is not None and p.returncode == 0 and d["ok"],
              "every release path reported, %s: %s %s" % ("enabled" if enabled else "disabled",
                                                          d and d["failed"], p.stderr.strip()[-300:]))
    d, p = run_json([app, "reentrant"], {"OMPI_MCA_mpi_leave_pinned": "1"}, timeout=60)
    check(d is not None and p.returncode == 0 and d["ok"],
          "a listener that mallocs and frees: no deadlock, bounded (%s)" % (d and d["calls"]))


def group_transitive(build, tmp):
    app = os.path.join(build, "test", "demoapp_transitive")
    d, p = run_json([app], {"OMPI_MCA_mpi_leave_pinned": "1"})
    check(d is not None, "transitive fixture prints its report (%s)" % p.stderr.strip()[-200:])
    if d is None:
        return
    # Behind libc in lookup: installed by relocation patching, fully served.
    check(d["enabled"] == 1, "transitive: pinheap serves malloc (%s)" % d["support"])
    check(d["malloc_owner"] == "pinheap", "transitive: malloc really is pinheap's")
    check(d["level"] == ENABLED_LEVEL, "transitive: FREE|CHUNK|MUNMAP (got %d: %s)"
          % (d["level"], d["support"]))
    check("loaded at start-up" in d["install"] and "relocation patching" in d["install"],
          "transitive: the installation's text says how: %s" % d["install"])
    check(d["foreign_ok"] == 1, "transitive: a block glibc handed out stays glibc's (realloc, free)")
    # Patching switched off: nothing pretended, the cause named, the fallback on.
    d, p = run_json([app], {"OMPI_MCA_mpi_leave_pinned": "1", "PINHEAP_PATCH": "0"})
    check(d is not None, "transitive, PINHEAP_PATCH=0: report (%s)" % p.stderr.strip()[-200:])
    if d is None:
        return
    check(d["enabled"] == 0 and d["malloc_owner"] == "glibc" and d["level"] == 0,
          "transitive, PINHEAP_PATCH=0: glibc's malloc, level 0 (got %d, %s, %d)"
          % (d["enabled"], d["malloc_owner"], d["level"]))
    check("PINHEAP_PATCH=0" in d["support"] and "Fallback in force" in d["support"],
          "transitive, PINHEAP_PATCH=0: cause and fallback named: %s" % d["support"])
    check(d["foreign_ok"] == 1, "transitive, PINHEAP_PATCH=0: glibc's blocks work")
    # The same libraries linked directly work.
    d2, _ = run_json([os.path.join(build, "test", "demoapp"), "state"], {"OMPI_MCA_mpi_leave_pinned": "1"})
    check(d2 is not None and d2["level"] == ENABLED_LEVEL, "direct link: FREE|CHUNK|MUNMAP")


def group_preload(build, tmp, prefix):
    shim = os.path.join(build, "tools", "libpinheap-preload.so")
    check(os.path.exists(shim), "preload shim built at " + shim)
    probe = "import ctypes; print(ctypes.CDLL(None).%senabled())" % prefix
    py = shutil.which("python3")
    p = subprocess.run([py, "-c", probe], env=base_env({"LD_PRELOAD": shim}), capture_output=True,
                       text=True, timeout=60)
    check(p.stdout.strip() == "1", "python3 under the shim runs on pinheap (got %r %s)"
          % (p.stdout.strip(), p.stderr.strip()[-200:]))
    p = subprocess.run([py, "-c", probe], env=base_env({"LD_PRELOAD": shim, "PINHEAP_MODE": "off"}),
                       capture_output=True, text=True, timeout=60)
    check(p.stdout.strip() == "0", "PINHEAP_MODE=off wins over the shim (got %r)" % p.stdout.strip())

    work = os.path.join(tmp, "work")
    os.makedirs(work)
    programs = [
        ("python3", [py, "-c", "import json,hashlib,re,collections,zlib;"
                     "d={str(i):list(range(i%50)) for i in range(20000)};"
                     "s=json.dumps(d,sort_keys=True);"
                     "print(hashlib.sha256(s.encode()).hexdigest(),len(zlib.compress(s.encode())),"
                     "len(re.findall(r'[0-9]+',s)),collections.Counter(s).most_common(3))"]),
        ("perl", ["perl", "-e", "my %h; $h{$_ % 977} .= chr(65 + $_ % 26) x 7 for 1..200000;"
                  "my $n = 0; $n += length($h{$_}) for keys %h; my @s = sort { $a <=> $b } keys %h;"
                  "print scalar(keys %h), ' ', $n, ' ', join(',', @s[0..9]), qq{\\n};"]),
        ("sqlite3", ["sqlite3", ":memory:",
                     "create table t(a integer, b text); "
                     "with recursive c(x) as (select 1 union all select x+1 from c where x<50000) "
                     "insert into t select x, printf('%08d', x*7919 % 100003) from c; "
                     "create index i on t(b); select count(*), sum(a), min(b), max(b) from t;"]),
        ("git", None),
    ]
    for name, argv in programs:
        exe = shutil.which(name if name != "python3" else py)
        if exe is None:
            check(False, "%s is installed (needed for the preload test)" % name)
            continue
        if name == "git":
            script = ("set -e; cd \"$1\"; rm -rf r; git init -q r; cd r; "
                      "for i in $(seq 1 200); do echo line $i >> f; done; git add f; "
                      "git -c user.name=t -c user.email=t@t commit -q -m one; "
                      "git log --format=%s; git cat-file -p HEAD^{tree}; git count-objects")
            argv = ["sh", "-c", script, "sh", work]
        plain = subprocess.run(argv, env=base_env({"HOME": work}), capture_output=True, timeout=300)
        pre = subprocess.run(argv, env=base_env({"HOME": work, "LD_PRELOAD": shim}),
                             capture_output=True, timeout=300)
        check(plain.returncode == 0 and pre.returncode == 0 and plain.stdout == pre.stdout
              and len(plain.stdout) > 0,
              "%s prints exactly the same under the shim (%d bytes; rc %d/%d) %s"
              % (name, len(plain.stdout), plain.returncode, pre.returncode, pre.stderr[-200:]))


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    group, build, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
    groups = {"matrix": group_matrix, "switches": group_switches, "glibc": group_glibc,
              "releases": group_releases, "transitive": group_transitive}
    tmp = tempfile.mkdtemp(prefix="pinheap-replace-")
    try:
        if group == "preload":
            group_preload(build, tmp, prefix)
        elif group in groups:
            groups[group](build, tmp)
        else:
            sys.stderr.write("replace_test.py: unknown group '%s' (expected %s, preload)\n"
                             % (group, ", ".join(groups)))
            return 2
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (results["passed"], results["failed"]))
    return 1 if results["failed"] or results["passed"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
