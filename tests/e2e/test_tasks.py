"""The project's task lists agree (issue 28): every smoke-* and bench-* make
target has its Poe the Poet task calling it (pyproject.toml
[tool.poe.tasks]), every task calls a make target that exists, every
smoke-NAME target has its script in smoke/, and `poe` really runs one."""
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INTERNAL = {"smoke-threads-run"}        # a sub-make of smoke-threads, not a task of its own


def make_targets():
    """The targets of the Makefile, as make itself reads them (-p: its
    database; -q -n: nothing is run)."""
    out = subprocess.run(["make", "-C", str(REPO), "-pqn", "--no-print-directory", "print-build"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=60).stdout
    names = set()
    for line in out.splitlines():
        m = re.match(r"^([a-z][a-z0-9-]*):(?!=)", line)
        if m:
            names.add(m.group(1))
    return names


def poe_tasks():
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["poe"]["tasks"]


def test_every_smoke_and_bench_target_has_its_poe_task():
    targets = make_targets()
    wanted = {t for t in targets if t.startswith(("smoke-", "bench-")) and t not in INTERNAL} - {"bench-venv", "bench-tools"}
    assert "smoke-grants" in wanted and "bench-realtime" in wanted, sorted(targets)
    tasks = poe_tasks()
    missing = sorted(t for t in wanted if tasks.get(t, {}).get("cmd") != "make " + t)
    assert not missing, "make targets without a poe task `make TARGET`: %s" % missing
    for t in ("test", "sabotage", "demo", "tsan", "python-ft"):
        assert tasks[t]["cmd"] == "make " + t


def test_every_poe_task_calls_a_make_target():
    targets = make_targets()
    for name, task in poe_tasks().items():
        words = task["cmd"].split()
        assert words[0] == "make", "%s: poe calls make, one list of recipes" % name
        for w in words[1:]:
            assert w in targets, "%s: make has no target %s" % (name, w)


def test_every_smoke_target_has_its_script():
    for t in sorted(make_targets()):
        if not t.startswith("smoke-") or t in INTERNAL:
            continue
        name = t[len("smoke-"):]
        scripts = [REPO / "smoke" / (name + ".sh"), REPO / "smoke" / (name.replace("-", "_") + ".py")]
        assert any(p.is_file() for p in scripts), "%s has no script in smoke/ (%s)" % (t, [str(p) for p in scripts])


def test_poe_runs_a_task_through_make():
    poe = Path(sys.executable).with_name("poe")
    if not poe.exists():
        pytest.fail("poethepoet is not in this venv (requirements/test.txt pins it)")
    r = subprocess.run([str(poe), "--root", str(REPO), "sabotage-list"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60, cwd=str(REPO))
    assert r.returncode == 0, r.stdout
    assert "make sabotage-list" in r.stdout and "jwt-alg-hs256-only" in r.stdout, r.stdout
