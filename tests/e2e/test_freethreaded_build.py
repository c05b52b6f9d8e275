"""m0serve built for a free-threaded CPython (issue 17, the build part).

Given a free-threaded interpreter by M0_PYTHON_FT (its prefix, e.g. what
`make python-ft` made: build/python/ft, or the interpreter itself; any 3.13
or later), and skipped otherwise:

- `make PYTHON=<it>` builds a binary with an rpath to the interpreter's
  libpython, in a build directory of its own (./m0serve is not touched): it
  starts without LD_LIBRARY_PATH, `--version` names the version and
  "free-threaded", it serves a WSGI app, and the worker's boot line says
  whether the GIL is on exactly as sys._is_gil_enabled() does in the view;
- it refuses a virtualenv of the same version with the GIL (exit 78);
- `pip install <repo>` into a virtualenv of that interpreter installs a
  working bin/m0serve (rpath, --version, serves from the venv's own
  site-packages: lib/python3.Nt), and Django from PyPI serves a page on it.

Run by `make smoke-threads` (part of `make test` when a CPython source
tarball is there to build the interpreter from), which sets M0_PYTHON_FT; by
hand:
    make python-ft && M0_PYTHON_FT=build/python/ft .venv/bin/python -m pytest tests/e2e/test_freethreaded_build.py
"""

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from serverproc import APPS_DIR, BANNER_RE, REPO, StreamCollector, kill_group

sys.path.insert(0, str(REPO / "tests" / "deploy"))
from deploykit import PIP_CACHE, pypi_reachable  # noqa: E402


def _interpreter():
    given = os.environ.get("M0_PYTHON_FT")
    if not given:
        pytest.skip("M0_PYTHON_FT is not set: give a free-threaded CPython (its prefix, e.g. build/python/ft "
                    "after `make python-ft`, or its python3.Nt) to test m0serve's build for one")
    p = Path(given).resolve()
    if p.is_dir() and not (p / "bin").is_dir() and (p / "prefix" / "bin").is_dir():
        p = p / "prefix"            # make python-ft's build/python/ft
    if p.is_dir():
        found = sorted((q for q in (p / "bin").glob("python3.*") if re.fullmatch(r"python3\.\d+t", q.name)),
                       key=lambda q: int(q.name[len("python3."):-1]))
        if not found:
            pytest.fail("M0_PYTHON_FT=%s: no bin/python3.Nt in it" % given)
        p = found[-1]
    facts = subprocess.run([str(p), "-c", "import platform, sysconfig as s; print(platform.python_version(), "
                            "int(bool(s.get_config_var('Py_GIL_DISABLED'))), s.get_config_var('LIBDIR'))"],
                           capture_output=True, text=True, timeout=30)
    assert facts.returncode == 0, "M0_PYTHON_FT=%s does not run: %s" % (given, facts.stderr)
    version, ft, libdir = facts.stdout.split()
    if ft != "1":
        pytest.fail("M0_PYTHON_FT=%s (Python %s) is not a free-threaded build" % (given, version))
    return p, version, libdir


def _env(**extra):
    """Ours without the test venv (another Python) and without LD_LIBRARY_PATH:
    the binary must find its libpython by itself."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def ft():
    py, version, libdir = _interpreter()
    info = subprocess.run([str(py), str(REPO / "tools" / "pyinfo.py"), str(py)], capture_output=True, text=True,
                          timeout=30, check=True).stdout.split()
    target = "build/release-%s/m0serve" % info[5]      # the Makefile's BUILD for this PYTHON
    binary = REPO / target
    r = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "-j2", "PYTHON=" + str(py), target],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    return {"python": py, "version": version, "libdir": libdir, "binary": binary}


class Running:
    def __init__(self, binary, app, app_dir, env):
        self.proc = subprocess.Popen([str(binary), app, "--app-dir", str(app_dir), "--bind", "127.0.0.1:0"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True, env=env)
        self.err = StreamCollector(self.proc.stderr)

    def __enter__(self):
        m = self.err.wait_for(BANNER_RE, 20)
        if m is None:
            kill_group(self.proc)
            raise AssertionError("no banner:\n" + self.err.text())
        self.port = int(m.group(1))
        booted = self.err.wait_for(re.compile(r"worker booted \((.*?)\); mounts"), 60)
        assert booted, self.err.text()
        self.boot = booted.group(1)
        return self

    def get(self, path="/"):
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path), timeout=20) as r:
            return r.status, r.read().decode()

    def __exit__(self, *exc):
        try:
            os.killpg(self.proc.pid, 15)
            self.proc.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        finally:
            kill_group(self.proc)
            self.proc.wait(5)


def _runpath(binary):
    out = subprocess.run(["readelf", "-d", str(binary)], capture_output=True, text=True, check=True).stdout
    return [m.group(1) for m in re.finditer(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*?)\]", out)]


def test_the_binary_finds_its_libpython_by_rpath(ft):
    libdir = os.path.realpath(ft["libdir"])
    assert any(os.path.realpath(d) == libdir for p in _runpath(ft["binary"]) for d in p.split(":")), \
        (_runpath(ft["binary"]), libdir)
    ldd = subprocess.run(["ldd", str(ft["binary"])], capture_output=True, text=True, env=_env(), check=True).stdout
    line = next(ln for ln in ldd.splitlines() if "libpython" in ln)
    assert "not found" not in line and os.path.realpath(line.split("=> ")[1].split(" (")[0]).startswith(libdir), ldd


def test_version_names_the_version_and_free_threaded(ft):
    r = subprocess.run([str(ft["binary"]), "--version"], capture_output=True, text=True, env=_env(), timeout=20)
    assert r.returncode == 0, r.stderr
    assert "(Python %s free-threaded, built for %s)" % (ft["version"], ft["python"]) in r.stdout, r.stdout


@pytest.mark.parametrize("python_gil", [None, "0"])
def test_serves_and_the_boot_line_tells_the_gil_as_the_view_sees_it(ft, python_gil):
    env = _env(**({"PYTHON_GIL": python_gil} if python_gil else {}))
    with Running(ft["binary"], "ft_hello:app", APPS_DIR, env) as s:
        status, body = s.get()
        seen = json.loads(body)
        assert status == 200 and seen["version"] == ft["version"] and seen["free_threaded"], body
        assert "free-threaded build" in s.err.text().splitlines()[0]      # the master's banner
        # m0 declares that it runs without the GIL: off without PYTHON_GIL=0.
        assert seen["gil_enabled"] is False, body
        assert s.boot.endswith("free-threaded build, GIL disabled"), s.boot
        assert "has not declared that it can run safely without the GIL" not in s.err.text()


def test_the_gil_stays_off_in_an_asgi_view(ft):
    """_m0asgi (imported for an ASGI mount) declares Py_MOD_GIL_NOT_USED too."""
    with Running(ft["binary"], "ft_hello_asgi:app", APPS_DIR, _env()) as s:
        status, body = s.get()
        seen = json.loads(body)
        assert status == 200 and (seen["gil_enabled"], seen["modules"]) == (False, ["_m0asgi", "m0"]), body
        assert s.boot.endswith("free-threaded build, GIL disabled"), s.boot


def test_refuses_a_virtualenv_of_the_same_version_with_the_gil(ft, tmp_path):
    major_minor = ".".join(ft["version"].split(".")[:2])
    (tmp_path / "pyvenv.cfg").write_text("home = /opt/py/bin\nversion = %s\n" % ft["version"])
    (tmp_path / "lib" / ("python" + major_minor) / "site-packages").mkdir(parents=True)
    r = subprocess.run([str(ft["binary"]), "ft_hello:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0"],
                       capture_output=True, text=True, env=_env(VIRTUAL_ENV=str(tmp_path)), timeout=20)
    assert r.returncode == 78, r.stderr
    assert r.stderr.count("\n") == 1 and "with the GIL" in r.stderr and "built for a free-threaded" in r.stderr


@pytest.fixture(scope="module")
def ft_venv(ft, tmp_path_factory):
    if not pypi_reachable():
        pytest.skip("PyPI is unreachable: pip cannot install m0serve's build backend and Django")
    venv = tmp_path_factory.mktemp("ftvenv") / "venv"
    subprocess.run([str(ft["python"]), "-m", "venv", str(venv)], check=True, timeout=120)
    pins = (REPO / "requirements" / "test.txt").read_text()
    django = re.search(r"^(Django==\S+)", pins, re.M).group(1)
    env = _env(PIP_CACHE_DIR=PIP_CACHE)
    for what in ([str(REPO)], [django]):
        r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                            *what], capture_output=True, text=True, env=env, timeout=900)
        assert r.returncode == 0, "pip install %s: %s%s" % (what, r.stdout, r.stderr)
    yield venv
    shutil.rmtree(venv, ignore_errors=True)


def test_pip_install_into_a_venv_of_it_works(ft, ft_venv, tmp_path):
    binary = ft_venv / "bin" / "m0serve"
    assert _runpath(binary), "no RUNPATH/RPATH in %s" % binary
    r = subprocess.run([str(binary), "--version"], capture_output=True, text=True, env=_env(), timeout=20)
    assert r.returncode == 0 and "(Python %s free-threaded" % ft["version"] in r.stdout, r.stdout + r.stderr
    with Running(binary, "ft_hello:app", APPS_DIR, _env()) as s:
        status, body = s.get()
        assert status == 200 and json.loads(body)["prefix"] == str(ft_venv), body
    # Run in another virtualenv of the interpreter, m0serve's own package is
    # still found: in the installing venv's lib/python3.Nt/site-packages.
    other = tmp_path / "other"
    subprocess.run([str(ft["python"]), "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    with Running(binary, "ft_hello:app", APPS_DIR, _env(VIRTUAL_ENV=str(other))) as s:
        status, body = s.get()
        assert status == 200 and json.loads(body)["prefix"] == str(other), body


def test_django_from_pypi_serves_on_it(ft_venv):
    with Running(ft_venv / "bin" / "m0serve", "django_stream:application", APPS_DIR, _env()) as s:
        assert s.get("/page") == (200, "a page")
