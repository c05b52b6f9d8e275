#!/usr/bin/env python3
"""make sabotage: undo one guard at a time and insist that its tests fail.

usage: tools/sabotage.py [--list] [--tag TAG] [--only NAME[,NAME...]]
                         [--table FILE] [--keep] [--no-baseline] [--python PY]

The table (tests/sabotage/*.toml, README there) lists mutations:
each undoes one guard of the server (a find/replace in one file, or a
unified diff) and names the tests that must fail under it. For each one
this runner

  1. applies it in a scratch worktree (build/sabotage/wt: a `git worktree`
     of HEAD with the checkout's uncommitted changes and untracked files
     copied in; the checkout itself is never written),
  2. rebuilds only what changed there (make's own dependencies),
  3. runs only the named tests against the scratch tree's binary,
  4. restores the file, and reports `caught` (a named test failed) or
     `SURVIVED` (every named test passed under the mutation).

It fails (exit 1) when any mutation survives, when an edit no longer
applies (STALE: the guard's code moved; update the table with the
refactor), when a mutated tree does not build (BROKEN), when a named test
fails or is missing on the unmutated tree (the baseline, run first: a test
that fails anyway proves nothing), or when a test run ends otherwise than
pass/fail (ERROR: pytest could not collect, a crash of the runner).

The scratch worktree is removed at the end and on SIGINT/SIGTERM (--keep
leaves it for a look). The last line is `N caught, M survived`.

Test names:
  tests/e2e/FILE.py::TEST     a pytest node id (run with --python, the
                              checkout's .venv by default)
  unit:NAME                   the cmocka binary build/unit/NAME (its C file
                              tests/unit/NAME.c)
  threads:tests/e2e/FILE.py::TEST
                              a pytest node id run against the free-threaded
                              build (build/python/ft.python and
                              build/venv-threads, made by make smoke-threads);
                              SKIPPED when there is none
"""
import argparse
import filecmp
import os
import re
import shutil
import signal
import subprocess
import sys
import time

try:
    import tomllib
except ImportError:  # Python 3.10: the same parser from PyPI, when present
    import tomli as tomllib  # type: ignore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRATCH = os.path.join(ROOT, "build", "sabotage", "wt")
TEST_TIMEOUT = 600          # one mutation's tests, seconds: a hang counts as caught
FT_PYTHON_FILE = os.path.join("build", "python", "ft.python")


class TableError(Exception):
    pass


# ------------------------------------------------------------------ table

FIELDS = {"name", "guard", "tests", "tags", "file", "find", "replace", "patch", "edits"}


def load_table(path):
    """The mutations of the table (a .toml file, or a directory whose *.toml
    files, in name order, together are the table), checked: each has a
    unique name, a guard, tests, and exactly one way to edit
    (file/find/replace, edits, or patch)."""
    paths = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".toml")) \
        if os.path.isdir(path) else [path]
    muts = []
    for p in paths:
        with open(p, "rb") as f:
            for m in tomllib.load(f).get("mutation", []):
                m["_from"] = os.path.basename(p)
                muts.append(m)
    seen = set()
    for m in muts:
        path = m.pop("_from")
        name = m.get("name")
        if not name or name in seen:
            raise TableError("%s: a mutation without a name, or %r twice" % (path, name))
        seen.add(name)
        extra = set(m) - FIELDS
        if extra:
            raise TableError("%s: %s: unknown field(s) %s" % (path, name, ", ".join(sorted(extra))))
        if not m.get("guard") or not m.get("tests"):
            raise TableError("%s: %s: needs a guard line and at least one test" % (path, name))
        ways = ("find" in m) + ("edits" in m) + ("patch" in m)
        if ways != 1:
            raise TableError("%s: %s: give one of find/replace (with file), edits, or patch" % (path, name))
        if "find" in m:
            if "file" not in m or "replace" not in m:
                raise TableError("%s: %s: find needs file and replace" % (path, name))
            m["edits"] = [{"file": m["file"], "find": m["find"], "replace": m["replace"]}]
        for e in m.get("edits", []):
            if set(e) != {"file", "find", "replace"}:
                raise TableError("%s: %s: each edit has file, find and replace" % (path, name))
        m.setdefault("tags", [])
    return muts


def select(muts, tag, only):
    if only:
        names = set(only.split(","))
        unknown = names - {m["name"] for m in muts}
        if unknown:
            raise TableError("no mutation named %s" % ", ".join(sorted(unknown)))
        return [m for m in muts if m["name"] in names]
    if tag:
        return [m for m in muts if tag in m["tags"]]
    return list(muts)


def files_of(m):
    """The files a mutation edits (relative paths)."""
    if "patch" in m:
        out = []
        for line in m["patch"].splitlines():
            if line.startswith("+++ "):
                p = line[4:].strip().split("\t")[0]
                out.append(p[2:] if p.startswith("b/") else p)
        return out
    return [e["file"] for e in m["edits"]]


# --------------------------------------------------------------- scratch

def run(cmd, cwd, timeout=None, env=None, quiet=True):
    return subprocess.run(cmd, cwd=cwd, timeout=timeout, env=env,
                          stdout=subprocess.PIPE if quiet else None,
                          stderr=subprocess.STDOUT if quiet else None, text=True, errors="replace")


def remove_scratch():
    if os.path.isdir(SCRATCH):
        run(["git", "worktree", "remove", "--force", SCRATCH], ROOT)
        shutil.rmtree(SCRATCH, ignore_errors=True)
    run(["git", "worktree", "prune"], ROOT)


def make_scratch():
    """A worktree of HEAD plus the checkout's uncommitted changes and
    untracked files: the tree as the developer has it now."""
    remove_scratch()
    os.makedirs(os.path.dirname(SCRATCH), exist_ok=True)
    r = run(["git", "worktree", "add", "--detach", "-q", SCRATCH, "HEAD"], ROOT)
    if r.returncode != 0:
        raise TableError("git worktree add failed:\n" + r.stdout)
    diff = run(["git", "diff", "HEAD", "--binary"], ROOT).stdout
    if diff.strip():
        p = subprocess.run(["git", "apply", "--whitespace=nowarn"], cwd=SCRATCH, input=diff, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            raise TableError("could not carry the checkout's changes over:\n" + p.stdout)
    untracked = run(["git", "ls-files", "--others", "--exclude-standard", "-z"], ROOT).stdout
    for rel in filter(None, untracked.split("\0")):
        dst = os.path.join(SCRATCH, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, rel), dst)
    # The free-threaded interpreter (built once per clone) is shared, not rebuilt.
    ft = os.path.join(ROOT, "build", "python")
    if os.path.isdir(ft):
        os.makedirs(os.path.join(SCRATCH, "build"), exist_ok=True)
        os.symlink(ft, os.path.join(SCRATCH, "build", "python"))
    seed_build()


def seed_build():
    """The checkout's build products in the scratch tree, so that it builds
    only what differs (a fresh tree compiled everything: minutes on two
    cores, most of make sabotage-fast). Every file of the scratch tree that
    is the checkout's, byte for byte, gets the checkout's mtime, and the
    build directories the runs use (the default one, the free-threaded
    one, build/unit) are copied with theirs: make then judges the scratch
    tree as it would the checkout, and what is out of date there (or
    missing) is rebuilt here as before."""
    names = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], SCRATCH).stdout
    for rel in filter(None, names.split("\0")):
        src, dst = os.path.join(ROOT, rel), os.path.join(SCRATCH, rel)
        if os.path.isfile(src) and os.path.isfile(dst) and not os.path.islink(dst) and \
                filecmp.cmp(src, dst, shallow=False):
            st = os.stat(src)
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    dirs = {os.path.join("build", "unit")}
    pythons = [[]] + ([["PYTHON=" + ft_python()]] if ft_python() else [])
    for extra in pythons:
        r = run(["make", "-s", "--no-print-directory", *extra, "print-build"], ROOT)
        out = r.stdout.strip().splitlines()
        if r.returncode == 0 and out:
            dirs.add(out[-1])
    for d in sorted(dirs):
        src = os.path.join(ROOT, d)
        if os.path.isdir(src) and not os.path.islink(src) and not os.path.exists(os.path.join(SCRATCH, d)):
            shutil.copytree(src, os.path.join(SCRATCH, d), symlinks=True)


def ft_python():
    """The free-threaded interpreter make python-ft built, with the
    virtualenv make smoke-threads made of it; None when either is missing."""
    p = os.path.join(ROOT, FT_PYTHON_FILE)
    if not os.path.isfile(p) or not os.path.exists(os.path.join(ROOT, "build", "venv-threads", "bin", "python")):
        return None
    exe = open(p).read().strip()
    return exe if os.access(exe, os.X_OK) else None


def build(tests, jobs):
    """make what the tests need in the scratch tree; (ok, output)."""
    targets = ["m0serve"] if any(not t.startswith("unit:") for t in tests) else []
    targets += ["build/unit/" + t[5:] for t in tests if t.startswith("unit:")]
    outs = []
    if targets:
        r = run(["make", "--no-print-directory", "-j%d" % jobs] + targets, SCRATCH)
        outs.append(r.stdout)
        if r.returncode != 0:
            return False, "".join(outs)
    if any(t.startswith("threads:") for t in tests):
        r = run(["make", "--no-print-directory", "-j%d" % jobs, "PYTHON=" + ft_python(), ft_binary()], SCRATCH)
        outs.append(r.stdout)
        if r.returncode != 0:
            return False, "".join(outs)
    return True, "".join(outs)


def ft_binary():
    """The scratch tree's m0serve for the free-threaded interpreter (its own
    build directory, as make PYTHON=... names it)."""
    r = run(["make", "-s", "--no-print-directory", "PYTHON=" + ft_python(), "print-build"], SCRATCH)
    return r.stdout.strip().splitlines()[-1] + "/m0serve"


def run_tests(tests, python):
    """Run the named tests in the scratch tree. Returns (verdict, detail):
    'pass', 'fail', 'timeout' or 'error'."""
    unit = [t[5:] for t in tests if t.startswith("unit:")]
    ft = [t[8:] for t in tests if t.startswith("threads:")]
    py = [t for t in tests if not t.startswith(("unit:", "threads:"))]
    failed, details = False, []
    try:
        for name in unit:
            r = run(["../../build/unit/" + name], os.path.join(SCRATCH, "tests", "unit"), timeout=TEST_TIMEOUT)
            if r.returncode != 0:
                failed = True
                details.append("unit:%s exit %d" % (name, r.returncode))
        groups = [(python, py, {})]
        if ft:
            ftpy = ft_python()
            venv = os.path.join(ROOT, "build", "venv-threads", "bin", "python")
            binary = os.path.join(SCRATCH, ft_binary())
            groups.append((venv, ft, {"M0SERVE": binary, "M0_PYTHON_FT": ftpy or ""}))
        for interp, ids, extra in groups:
            if not ids:
                continue
            env = dict(os.environ, **extra)
            if "M0SERVE" not in extra:
                env.pop("M0SERVE", None)        # the scratch tree's ./m0serve
            r = run([interp, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--tb=no", "-rf", *ids],
                    SCRATCH, timeout=TEST_TIMEOUT, env=env)
            last = (r.stdout.strip().splitlines() or [""])[-1]
            if r.returncode == 1:
                failed = True
                details.append(last)
                details += [l for l in r.stdout.splitlines() if l.startswith("FAILED ")]
            elif r.returncode != 0:
                return "error", "pytest exit %d: %s" % (r.returncode, "\n".join(r.stdout.splitlines()[-15:]))
            elif " passed" not in last or "skipped" in last:
                return "error", "not every named test ran: " + last
    except subprocess.TimeoutExpired:
        return "timeout", "over %d s" % TEST_TIMEOUT
    return ("fail" if failed else "pass"), "; ".join(details)


# ---------------------------------------------------------------- mutate

def apply(m):
    """Apply the mutation in the scratch tree; returns {file: original text}
    for restore, or raises TableError (STALE) when it does not apply."""
    saved = {}
    if "patch" in m:
        for f in files_of(m):
            with open(os.path.join(SCRATCH, f), encoding="utf-8") as fh:
                saved[f] = fh.read()
        p = subprocess.run(["git", "apply", "--recount", "-"], cwd=SCRATCH, input=m["patch"], text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode != 0:
            restore(saved)
            raise TableError("the patch no longer applies: " + p.stdout.strip().splitlines()[0])
        return saved
    for e in m["edits"]:
        path = os.path.join(SCRATCH, e["file"])
        if not os.path.isfile(path):
            restore(saved)
            raise TableError("%s: no such file" % e["file"])
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        n = text.count(e["find"])
        if n != 1:
            restore(saved)
            raise TableError("%s: the find text occurs %d times (must be once)" % (e["file"], n))
        saved.setdefault(e["file"], text)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text.replace(e["find"], e["replace"]))
    return saved


def applies(m, root):
    """None when the mutation applies to the tree at root, else why not;
    reads only (git apply --check), so it may run on the checkout itself."""
    if "patch" in m:
        p = subprocess.run(["git", "apply", "--check", "--recount", "-"], cwd=root, input=m["patch"],
                           text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return None if p.returncode == 0 else "the patch no longer applies: " + \
            (p.stdout.strip().splitlines() or ["?"])[0]
    texts = {}
    for e in m["edits"]:
        path = os.path.join(root, e["file"])
        if not os.path.isfile(path):
            return "%s: no such file" % e["file"]
        if e["file"] not in texts:
            with open(path, encoding="utf-8") as fh:
                texts[e["file"]] = fh.read()
        n = texts[e["file"]].count(e["find"])
        if n != 1:
            return "%s: the find text occurs %d times (must be once)" % (e["file"], n)
        texts[e["file"]] = texts[e["file"]].replace(e["find"], e["replace"])
    return None


def missing_tests(m, root):
    """The tests a mutation names that the tree does not have: a unit
    program without its tests/unit/NAME.c, a pytest id whose file or
    function (class::function) is not there. Read-only, by text: a test
    renamed by a refactor fails the check rather than the run's baseline."""
    out = []
    for t in m["tests"]:
        if t.startswith("unit:"):
            if not os.path.isfile(os.path.join(root, "tests", "unit", t[5:] + ".c")):
                out.append(t)
            continue
        ident = t[8:] if t.startswith("threads:") else t
        path, _, rest = ident.partition("::")
        full = os.path.join(root, path)
        if not os.path.isfile(full):
            out.append(t)
            continue
        if not rest:
            continue
        with open(full, encoding="utf-8") as fh:
            text = fh.read()
        for part in rest.split("[")[0].split("::"):
            word = ("class " if part[:1].isupper() else "def ") + part
            if not re.search(r"^\s*(async\s+)?%s\b" % re.escape(word), text, re.M):
                out.append(t)
                break
    return out


def check(muts):
    """make sabotage-check: every mutation still applies (a refactor that
    moved a guard's code must update the table), in seconds, so make test
    checks the whole table while it runs only the fast subset."""
    stale = 0
    for m in muts:
        why = applies(m, ROOT)
        gone = missing_tests(m, ROOT)
        if gone and not why:
            why = "no such test: " + " ".join(gone)
        if why:
            stale += 1
            print("  %-9s %s: %s" % ("STALE", m["name"], why), flush=True)
    print("%d mutations apply, %d stale" % (len(muts) - stale, stale))
    return 1 if stale else 0


def restore(saved):
    for f, text in saved.items():
        with open(os.path.join(SCRATCH, f), "w", encoding="utf-8") as fh:
            fh.write(text)


class Products:
    """What make builds from the edited files, kept aside so that undoing a
    mutation costs no rebuild: each edited .c file's objects (in every build
    directory of the scratch tree) and the linked programs are copied away
    before the mutation, and put back — with the source's own mtime — after
    it, so make sees the tree exactly as before. Edits to anything but .c
    and .py files (a header: every includer would be stale) fall back to
    make rebuilding what changed."""

    def __init__(self, files):
        self.ok = all(f.endswith((".c", ".py")) and os.path.isfile(os.path.join(SCRATCH, f)) for f in files)
        self.mtimes, self.kept, self.absent = {}, {}, []
        if not self.ok:
            return
        self.dir = os.path.join(SCRATCH, "build", "sabotage-keep")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        for f in files:
            st = os.stat(os.path.join(SCRATCH, f))
            self.mtimes[f] = (st.st_atime_ns, st.st_mtime_ns)
        paths = [os.path.join(SCRATCH, "m0serve")]
        build = os.path.join(SCRATCH, "build")
        for d in sorted(os.listdir(build)) if os.path.isdir(build) else []:
            top = os.path.join(build, d)
            if d in ("python", "sabotage-keep") or os.path.islink(top) or not os.path.isdir(top):
                continue
            paths.append(os.path.join(top, "m0serve"))
            if d == "unit":
                paths += [os.path.join(top, n) for n in os.listdir(top) if n.startswith("test_")]
            for f in files:
                if f.startswith("src/") and f.endswith(".c"):
                    rel = f[len("src/"):-len(".c")] + ".o"
                    paths += [os.path.join(top, rel), os.path.join(top, "obj", rel)]
        for i, path in enumerate(paths):
            if os.path.isfile(path):
                self.kept[path] = os.path.join(self.dir, str(i))
                shutil.copy2(path, self.kept[path])
            else:
                self.absent.append(path)

    def put_back(self):
        if not self.ok:
            return
        for f, (at, mt) in self.mtimes.items():
            os.utime(os.path.join(SCRATCH, f), ns=(at, mt))
        for path, copy in self.kept.items():
            shutil.copy2(copy, path)
        for path in self.absent:
            if os.path.exists(path):
                os.unlink(path)
        shutil.rmtree(self.dir, ignore_errors=True)


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--table", default=os.path.join(ROOT, "tests", "sabotage"),
                    help="a .toml file, or a directory of them (default: tests/sabotage)")
    ap.add_argument("--list", action="store_true", help="one line per mutation: name, guard, tests")
    ap.add_argument("--tag", help="only the mutations with this tag (make test: fast)")
    ap.add_argument("--only", help="only these mutations (comma-separated names)")
    ap.add_argument("--check", action="store_true",
                    help="only check that every selected mutation still applies to the checkout (read-only, no build)")
    ap.add_argument("--keep", action="store_true", help="leave the scratch worktree")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the tests on the unmutated tree")
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    try:
        muts = select(load_table(args.table), args.tag, args.only)
    except (TableError, OSError, tomllib.TOMLDecodeError) as e:
        print("sabotage: %s" % e, file=sys.stderr)
        return 2
    if args.list:
        for m in muts:
            tags = " [%s]" % ",".join(m["tags"]) if m["tags"] else ""
            print("%-40s %s%s\n%40s   tests: %s" % (m["name"], m["guard"], tags, "", " ".join(m["tests"])))
        return 0
    if not muts:
        print("sabotage: no mutation selected")
        return 2
    if args.check:
        return check(muts)

    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)

    have_ft = ft_python() is not None
    counts = {"caught": 0, "SURVIVED": 0, "STALE": 0, "BROKEN": 0, "ERROR": 0, "SKIPPED": 0}
    t_all = time.monotonic()
    try:
        print("  SABOTAGE scratch tree %s" % os.path.relpath(SCRATCH, ROOT), flush=True)
        make_scratch()
        runnable = [m for m in muts if have_ft or not any(t.startswith("threads:") for t in m["tests"])]
        union = sorted({t for m in runnable for t in m["tests"]})
        ok, out = build(union, args.jobs)
        if not ok:
            print(out[-3000:])
            print("sabotage: the unmutated tree does not build")
            return 1
        if not args.no_baseline:
            t0 = time.monotonic()
            verdict, detail = run_tests(union, args.python)
            print("  BASELINE %d tests on the unmutated tree: %s (%.0f s)"
                  % (len(union), verdict, time.monotonic() - t0), flush=True)
            if verdict != "pass":
                print("sabotage: the named tests must pass before anything is undone: %s" % detail)
                return 1
        for m in muts:
            if m not in runnable:
                counts["SKIPPED"] += 1
                print("  %-9s %s (no free-threaded build: make python-ft)" % ("SKIPPED", m["name"]), flush=True)
                continue
            t0 = time.monotonic()
            products = Products(files_of(m))
            try:
                saved = apply(m)
            except TableError as e:
                products.put_back()
                counts["STALE"] += 1
                print("  %-9s %s: %s" % ("STALE", m["name"], e), flush=True)
                continue
            try:
                ok, out = build(m["tests"], args.jobs)
                if not ok:
                    counts["BROKEN"] += 1
                    err = [l for l in out.splitlines() if "error" in l][:3]
                    print("  %-9s %s: does not build: %s" % ("BROKEN", m["name"], " | ".join(err)), flush=True)
                    continue
                verdict, detail = run_tests(m["tests"], args.python)
            finally:
                restore(saved)
                products.put_back()
            took = time.monotonic() - t0
            if verdict in ("fail", "timeout"):
                counts["caught"] += 1
                print("  %-9s %s (%.1f s%s)" % ("caught", m["name"], took,
                                               ", timeout" if verdict == "timeout" else ""), flush=True)
            elif verdict == "pass":
                counts["SURVIVED"] += 1
                print("  %-9s %s (%.1f s) — %s\n            its tests all passed: %s"
                      % ("SURVIVED", m["name"], took, m["guard"], " ".join(m["tests"])), flush=True)
            else:
                counts["ERROR"] += 1
                print("  %-9s %s: %s" % ("ERROR", m["name"], detail), flush=True)
    except KeyboardInterrupt:
        print("\nsabotage: interrupted; the scratch tree is removed, the checkout was never touched")
        remove_scratch()
        return 130
    finally:
        if not args.keep:
            remove_scratch()
    others = ", ".join("%d %s" % (n, k.lower()) for k, n in counts.items()
                       if k not in ("caught", "SURVIVED") and n)
    print("  (%.0f s)" % (time.monotonic() - t_all))
    print("%d caught, %d survived%s" % (counts["caught"], counts["SURVIVED"], ", " + others if others else ""))
    bad = counts["SURVIVED"] + counts["STALE"] + counts["BROKEN"] + counts["ERROR"]
    return 1 if bad else 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)     # --list | head
    sys.exit(main())
