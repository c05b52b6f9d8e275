"""pip install . (the README's line, verbatim) and pip install of the sdist
`python -m build` makes: the m0serve command lands in the virtualenv's bin/,
built for the virtualenv's interpreter, with m0serve and m0pub importable;
it serves the Django example; it refuses a virtualenv of another Python."""

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

from deploykit import REPO, readme_install_lines, run_env
from serverproc import StreamCollector, kill_group

BANNER = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


def get(port, path="/", timeout=10):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.status, r.read().decode()


def serve_line(line, home, cwd, env=None):
    """Run a README command line that starts m0serve (bash, its own
    session); M0_BIND=127.0.0.1:0 is the flag's environment twin, so the line
    stays verbatim and no fixed port is needed. Returns (proc, port, stderr)."""
    e = run_env(home)
    e["M0_BIND"] = "127.0.0.1:0"
    e.update(env or {})
    proc = subprocess.Popen(["bash", "-ec", line], cwd=cwd, env=e,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    err = StreamCollector(proc.stderr)
    StreamCollector(proc.stdout)
    m = err.wait_for(BANNER, 20)
    if m is None:
        kill_group(proc)
        raise AssertionError("no banner from %r:\n%s" % (line, err.text()))
    return proc, int(m.group(1)), err


def stop(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(15)
    finally:
        kill_group(proc)
        proc.wait(5)


def test_readme_lines_install_and_serve_the_django_example(site_venv):
    home, venv = site_venv
    version = subprocess.run([str(venv / "bin" / "m0serve"), "--version"], capture_output=True, text=True,
                             env=run_env(home))
    assert version.returncode == 0
    # Built for the interpreter the venv was made from (/usr/bin/python3 ->
    # python3.11), not the pyenv python3 this machine's PATH prefers.
    base = os.path.realpath(subprocess.run([str(venv / "bin" / "python"), "-c",
                                            "import sys; print(sys._base_executable)"],
                                           capture_output=True, text=True).stdout.strip())
    first, link = version.stdout.splitlines()[:2]
    assert "built for /usr/bin/python3." in first, version.stdout
    assert os.path.realpath(first.split("built for ")[1].rstrip(")")) == base
    # Linked as Debian's python3.11 is (issue 29): its static libpython, non-PIE.
    assert link.startswith("libpython: static libpython3.11.a, non-PIE"), version.stdout
    imported = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import m0pub, m0serve, m0serve.django; print(m0pub.__file__); "
                               "print(m0serve.__file__); print(m0pub.enabled())"],
                              capture_output=True, text=True, env=run_env(home))
    assert imported.returncode == 0, imported.stderr
    pub, pkg, enabled = imported.stdout.split()
    assert pub.startswith(str(venv)) and pkg.startswith(str(venv)), imported.stdout
    assert enabled == "False"       # outside m0serve publish is a no-op

    line = readme_install_lines()[1]
    proc, port, err = serve_line(line, home, REPO)
    try:
        status, body = get(port, "/")
        assert status == 200 and "Hello from Django on m0serve" in body, body
        status, body = get(port, "/form")
        assert status == 200 and "csrfmiddlewaretoken" in body
    finally:
        stop(proc)
    # The installed binary found the installed package and the venv's Django.
    assert err.wait_for(re.compile(r"shutdown complete"), 5), err.text()
    assert "Traceback" not in err.text()


def test_sdist_from_python_m_build_installs_and_serves(site_venv, tmp_path):
    home, _ = site_venv
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), str(REPO)],
                       capture_output=True, text=True, env=run_env(home), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (sdist,) = dist.glob("m0serve-*.tar.gz")
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=120)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(sdist)],
                       capture_output=True, text=True, env=run_env(home), timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    binary = venv / "bin" / "m0serve"
    assert os.access(binary, os.X_OK)
    app = tmp_path / "app"
    app.mkdir()
    (app / "hello.py").write_text(
        "import m0pub, m0serve\n"
        "def app(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    return [('%s %s' % (m0serve.__file__, m0pub.enabled())).encode()]\n")
    # Not activated, not on PATH: the binary finds its venv by itself.
    proc = subprocess.Popen([str(binary), "hello:app", "--app-dir", str(app), "--bind", "127.0.0.1:0"],
                            env=run_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    err = StreamCollector(proc.stderr)
    StreamCollector(proc.stdout)
    try:
        m = err.wait_for(BANNER, 20)
        assert m, err.text()
        deadline = time.monotonic() + 15
        while True:
            try:
                status, body = get(int(m.group(1)))
                break
            except OSError:
                assert time.monotonic() < deadline, err.text()
                time.sleep(0.05)
        assert status == 200
        path, enabled = body.split()
        assert path.startswith(str(venv / "lib")), body
        assert enabled == "False"
    finally:
        stop(proc)


def test_refuses_a_virtualenv_of_another_python(site_venv, tmp_path):
    home, venv = site_venv
    other = tmp_path / "py399"
    other.mkdir()
    (other / "pyvenv.cfg").write_text("home = /opt/python3.99/bin\nversion = 3.99.1\n")
    env = run_env(home)
    env["VIRTUAL_ENV"] = str(other)
    r = subprocess.run([str(venv / "bin" / "m0serve"), "app:app"], capture_output=True, text=True, env=env,
                       timeout=20)
    assert r.returncode == 78
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "3.99" in lines[0] and "built for Python 3.11" in lines[0] and str(other) in lines[0]
    env["VIRTUAL_ENV"] = str(tmp_path / "missing")
    r = subprocess.run([str(venv / "bin" / "m0serve"), "app:app"], capture_output=True, text=True, env=env,
                       timeout=20)
    assert r.returncode == 78 and "not a virtualenv" in r.stderr


def test_make_venv_is_quiet(site_venv, tmp_path):
    """`make venv` from scratch prints its one VENV line and nothing else: the
    pinned packages that ship only a setup.py (pubcontrol, gripcontrol,
    django-grip) are built as PEP 517 wheels, not installed by the legacy
    `setup.py install` that pip announces with a DEPRECATION warning each."""
    home, _ = site_venv
    venv = tmp_path / "venv"
    r = subprocess.run(["make", "--no-print-directory", "VENV=%s" % venv, "venv"], cwd=REPO,
                       capture_output=True, text=True, env=run_env(home), timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    out = [line.strip() for line in (r.stdout + r.stderr).strip().splitlines()]
    assert out == ["VENV    %s <- requirements/test.txt" % venv], out
    imported = subprocess.run([str(venv / "bin" / "python"), "-c", "import gripcontrol, pubcontrol; from importlib.metadata import version; version('django-grip')"],
                              capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
