"""Start, observe and stop m0serve processes for the e2e suite.

Each server runs in its own session (process group), bound to 127.0.0.1
port 0; the real port comes from the stderr banner.  stdout and stderr are
drained by background threads so the pipes never fill, and stderr lines can
be awaited.  Every wait is bounded.

The server sees the Python packages this suite runs with: when pytest runs in
a virtualenv (``make test`` runs ``.venv/bin/python -m pytest``) every server
gets VIRTUAL_ENV pointing at it, so the embedded interpreter imports the
venv's Django and Flask; outside one, VIRTUAL_ENV is removed.
"""

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
APPS_DIR = REPO / "tests" / "apps"
EXAMPLES_DIR = REPO / "examples"
BINARY = os.environ.get("M0SERVE", str(REPO / "m0serve"))

BANNER_RE = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0


class ServerError(Exception):
    pass


class StreamCollector:
    """Reads a pipe line by line in a daemon thread."""

    def __init__(self, pipe):
        self.lines = []
        self.eof = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(pipe,), daemon=True)
        self._thread.start()

    def _run(self, pipe):
        for raw in iter(pipe.readline, b""):
            with self._cond:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))
                self._cond.notify_all()
        pipe.close()
        with self._cond:
            self.eof = True
            self._cond.notify_all()

    def wait_for(self, regex, timeout, start=0):
        """The first match of regex in any line (from line start on: len(lines)
        before an action waits for a line that comes after it), waiting up to
        timeout seconds; None if it did not appear before the timeout or the
        end of the stream."""
        deadline = time.monotonic() + timeout
        checked = start
        with self._cond:
            while True:
                for line in self.lines[checked:]:
                    match = regex.search(line)
                    if match:
                        return match
                checked = len(self.lines)
                remaining = deadline - time.monotonic()
                if self.eof or remaining <= 0:
                    return None
                self._cond.wait(remaining)

    def join(self, timeout):
        self._thread.join(timeout)

    def text(self):
        with self._cond:
            return "\n".join(self.lines)


def free_port():
    """A 127.0.0.1 TCP port nothing listens on now (bound and released: a
    process this suite starts should take it before anyone else does). For
    servers that cannot bind port 0 and report theirs (redis-server, nginx,
    a systemd socket); the one copy, imported by tests/deploy and bench/."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A --realtime server makes its publish socket at the default path under
# XDG_RUNTIME_DIR (docs/realtime.md): the servers of this run make theirs in
# a directory of the run's own, never the machine's, and the suite's own
# process (conftest.py) looks in another, empty one -- so "publish outside
# a server" means the same whatever else runs on the host.
SERVER_RUNTIME_DIR = tempfile.mkdtemp(prefix="m0srv.")
atexit.register(shutil.rmtree, SERVER_RUNTIME_DIR, True)


def base_env():
    """The environment every server starts from: ours, with VIRTUAL_ENV set
    to the virtualenv this interpreter runs in (removed when it runs in none)
    and XDG_RUNTIME_DIR the run's server directory (SERVER_RUNTIME_DIR)."""
    env = dict(os.environ)
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    else:
        env.pop("VIRTUAL_ENV", None)
    env["XDG_RUNTIME_DIR"] = SERVER_RUNTIME_DIR
    return env


def spawn(args, env=None, cwd=None):
    """Start the binary with args in a new session, stdout/stderr piped;
    env adds to (or overrides) base_env()."""
    if not os.access(BINARY, os.X_OK):
        raise ServerError("m0serve binary not found at %s: run `make` or set M0SERVE" % BINARY)
    return subprocess.Popen(
        [BINARY, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=dict(base_env(), **(env or {})),
        cwd=cwd,
    )


def kill_group(proc):
    """SIGKILL the whole process group of proc (the master and any worker)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_and_reap(proc, timeout=10):
    """SIGKILL the process group of proc if it still runs (continued first:
    a node a test paused with SIGSTOP) and reap it. For the brokers the
    tests start (redisproc.py, natsproc.py)."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout)


def wait_for(predicate, timeout, what, interval=0.05):
    """Poll predicate() until it is true (its value is returned) or timeout
    seconds pass (AssertionError naming what). An OSError, EOFError,
    ValueError or KeyError from it counts as not yet (a server still coming
    up, an answer not complete)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = predicate()
            if v:
                return v
        except (OSError, EOFError, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError("%s: not within %.0f s" % (what, timeout))
        time.sleep(interval)


def run_to_exit(args, timeout=START_TIMEOUT, env=None):
    """Run the binary until it exits on its own: (exit status, stderr text).
    Raises ServerError if it is still running after timeout seconds."""
    proc = spawn(args, env)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        _, err = proc.communicate(timeout=STOP_TIMEOUT)
        raise ServerError("still running after %ss; stderr:\n%s" % (timeout, err.decode("utf-8", "replace")))
    finally:
        kill_group(proc)
    return proc.returncode, err.decode("utf-8", "replace")


def children_of(pid):
    """Pids of the live (non-zombie) children of pid, from /proc."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


def binary_is_sanitized():
    """True when the binary is built with AddressSanitizer."""
    try:
        return b"__asan_init" in Path(BINARY).read_bytes()
    except OSError:
        return False


def rss_kb(pid):
    """VmRSS of pid in kB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise ServerError("no VmRSS for pid %d" % pid)


class Server:
    """One m0serve instance: ``Server(app, *extra_args, app_dir=..., workers=N)``.
    app=None serves no root application (mounts only); app_dir=None or
    workers=None leaves that flag out; env adds variables to the environment;
    cwd is the working directory (default: the test's)."""

    def __init__(self, app, *args, app_dir=APPS_DIR, workers=1, env=None, cwd=None):
        self.args = ([app] if app is not None else []) + ["--bind", "127.0.0.1:0"]
        if app_dir is not None:
            self.args += ["--app-dir", str(app_dir)]
        if workers is not None:
            self.args += ["--workers", str(workers)]
        self.args += args
        self.env = env
        self.cwd = cwd
        self.proc = None
        self.port = None
        self.banner = None

    def start(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        self.proc = spawn(self.args, self.env, self.cwd)
        self.stdout = StreamCollector(self.proc.stdout)
        self.stderr = StreamCollector(self.proc.stderr)
        match = self.stderr.wait_for(BANNER_RE, timeout)
        if match is None:
            raise ServerError("no banner within %ss (exit status %s); stderr:\n%s"
                              % (timeout, self.proc.poll(), self.stderr.text()))
        self.port = int(match.group(1))
        self.banner = match.string
        self._wait_ready(deadline)
        return self

    def _wait_ready(self, deadline):
        """Poll with GET / until any HTTP response arrives."""
        while True:
            if self.proc.poll() is not None:
                raise ServerError("exited with %s during startup; stderr:\n%s"
                                  % (self.proc.returncode, self.stderr.text()))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServerError("no HTTP response on port %d; stderr:\n%s" % (self.port, self.stderr.text()))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=remaining) as sock:
                    sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                    if sock.recv(5) == b"HTTP/":
                        return
            except OSError:
                pass
            time.sleep(0.05)

    @property
    def pid(self):
        return self.proc.pid

    def url(self, path="/"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=STOP_TIMEOUT):
        """The master's exit status; raises subprocess.TimeoutExpired."""
        return self.proc.wait(timeout)

    def worker_pids(self):
        return children_of(self.proc.pid)

    def wait_workers(self, predicate, timeout=START_TIMEOUT):
        """Poll the master's children until predicate(pids) holds; the pids."""
        deadline = time.monotonic() + timeout
        while True:
            pids = self.worker_pids()
            if predicate(pids):
                return pids
            if time.monotonic() > deadline:
                raise ServerError("workers %s never satisfied the condition; stderr:\n%s"
                                  % (sorted(pids), self.stderr.text()))
            time.sleep(0.05)

    def stop(self, timeout=STOP_TIMEOUT):
        """SIGTERM, SIGKILL the process group after timeout; the exit status."""
        if self.proc is None:
            return None
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            kill_group(self.proc)
            self.proc.wait(timeout)
            self.stdout.join(timeout)
            self.stderr.join(timeout)
        # Shown by pytest only when a test using this server fails.
        print("--- m0serve %s stderr (exit %s) ---\n%s"
              % (" ".join(self.args), self.proc.returncode, "\n".join(self.stderr.lines[-60:])))
        return self.proc.returncode
