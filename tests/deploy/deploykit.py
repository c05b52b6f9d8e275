"""Helpers of the deploy smoke (`make smoke-deploy`; the fixtures are in
conftest.py): m0serve installed with
pip into a fresh virtualenv by the README's own line, started as the unit in
deploy/ says (under systemd-socket-activate, with a notify socket read here),
behind the nginx site config in deploy/nginx/.

Paths the deploy files name (/srv/mysite, /run/mysite, 127.0.0.1:8001, port
80) are the only things rewritten; everything else is read from the files.
"""

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
sys.path.insert(0, str(REPO / "tests" / "e2e"))

from serverproc import StreamCollector, free_port, kill_group  # noqa: E402,F401 (free_port: for test_nginx too)

PIP_CACHE = os.environ.get("PIP_CACHE_DIR") or os.path.expanduser("~/.cache/pip")
# On a fresh Debian machine `python3` is /usr/bin/python3: put the system's
# directories first, whatever this machine's PATH prefers (a pyenv shim here).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def pypi_reachable():
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple/")
    try:
        with urllib.request.urlopen(index.rstrip("/") + "/hatchling/", timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


def readme_install_lines():
    """The commands of the README block marked <!-- install -->, verbatim."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- install[^>]*-->\s*```sh\n(.*?)```", text, re.S)
    assert m, "README.md has no <!-- install --> block"
    lines = []
    for line in m.group(1).splitlines():
        line = line.split("  #")[0].strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def run_env(home):
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.update(HOME=str(home), PATH=SYSTEM_PATH, PIP_CACHE_DIR=PIP_CACHE)
    return env


def world_dir(prefix):
    """A temporary directory nginx's www-data workers can traverse."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.chmod(d, 0o755)
    return d


# ------------------------------------------------------------ unit files

def parse_unit(path):
    """{section: [(key, value), ...]} of a systemd unit file (comments,
    blank lines and backslash continuations handled)."""
    sections, cur, pending = {}, None, ""
    for raw in Path(path).read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            cur = sections.setdefault(line.strip("[]"), [])
            continue
        key, _, value = line.partition("=")
        cur.append((key.strip(), value.strip()))
    return sections


def values(sections, section, key):
    return [v for k, v in sections.get(section, []) if k == key]


class NotifySocket:
    """The service manager's end of NOTIFY_SOCKET: collects datagrams."""

    def __init__(self, path):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.messages = []          # (monotonic time, {key: value}, raw)
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            text = data.decode()
            fields = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
            with self._cond:
                self.messages.append((time.monotonic(), fields, text))
                self._cond.notify_all()

    def wait_for(self, key, value=None, after=0, timeout=15.0):
        """The index of the first message from index `after` on with key (=value)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for i in range(after, len(self.messages)):
                    f = self.messages[i][1]
                    if key in f and (value is None or f[key] == value):
                        return i
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError("no %s%s from the service within %ss; got %r" % (
                        key, "" if value is None else "=" + value, timeout,
                        [m[2] for m in self.messages]))
                self._cond.wait(remaining)

    def count(self, key, since):
        with self._cond:
            return sum(1 for t, f, _ in self.messages if t >= since and key in f)

    def close(self):
        self._stop = True
        self._thread.join(2)
        self.sock.close()


class Site:
    """/srv/mysite and /run/mysite for one test: the example project, its
    venv (a symlink to the one pip installed), a static file."""

    def __init__(self, venv):
        self.srv = world_dir("m0-srv-")
        self.run = world_dir("m0-run-")
        for item in ("rtsite", "templates", "manage.py"):
            src = REPO / "examples" / "django_realtime" / item
            (shutil.copytree if src.is_dir() else shutil.copy)(src, self.srv / item)
        (self.srv / "venv").symlink_to(venv)
        (self.srv / "static").mkdir()
        (self.srv / "static" / "hello.txt").write_text("static from nginx\n")
        for p in self.srv.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        self.tcp_port = free_port()

    def map(self, text):
        return (text.replace("/srv/mysite", str(self.srv)).replace("/run/mysite", str(self.run))
                .replace("127.0.0.1:8001", "127.0.0.1:%d" % self.tcp_port))

    def cleanup(self):
        shutil.rmtree(self.srv, ignore_errors=True)
        shutil.rmtree(self.run, ignore_errors=True)


class Unit:
    """deploy/m0serve.service with deploy/m0serve.socket, started the way
    systemd would: the socket's ListenStream= made by systemd-socket-activate
    (SocketMode=/SocketGroup= applied to the unix one, as PID 1 does), the
    service's Environment=, WorkingDirectory= and ExecStart= as written,
    NOTIFY_SOCKET a socket this test reads. extra_env adds variables (M0_*
    twins: the unit's command line stays as written)."""

    def __init__(self, site, extra_env=None, watchdog_usec=None):
        self.site = site
        self.service = parse_unit(DEPLOY / "m0serve.service")
        self.socket_unit = parse_unit(DEPLOY / "m0serve.socket")
        assert values(self.service, "Service", "Type") == ["notify"]
        self.listens = [site.map(v) for v in values(self.socket_unit, "Socket", "ListenStream")]
        self.unix_path = next(v for v in self.listens if v.startswith("/"))
        name = (values(self.socket_unit, "Socket", "FileDescriptorName") or [""])[0]
        env = {}
        for line in values(self.service, "Service", "Environment"):
            for assignment in shlex.split(line):
                k, _, v = assignment.partition("=")
                env[k] = site.map(v)
        env.update(extra_env or {})
        self.notify = NotifySocket(site.run / "notify.sock")
        env["NOTIFY_SOCKET"] = self.notify.path
        if watchdog_usec is not None:
            assert values(self.service, "Service", "WatchdogSec"), "the unit sets no WatchdogSec"
            env["WATCHDOG_USEC"] = str(watchdog_usec)
        self.exec_start = shlex.split(site.map(values(self.service, "Service", "ExecStart")[0]))
        self.cwd = site.map(values(self.service, "Service", "WorkingDirectory")[0])
        cmd = ["systemd-socket-activate"]
        for listen in self.listens:
            cmd += ["-l", listen]
        if name:
            cmd.append("--fdname=" + ":".join([name] * len(self.listens)))
        for k, v in env.items():
            cmd += ["-E", "%s=%s" % (k, v)]
        self.cmd = cmd + self.exec_start
        self.env = env
        self.proc = None

    def start(self, timeout=20.0):
        self.proc = subprocess.Popen(self.cmd, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.stdout = StreamCollector(self.proc.stdout)
        self.stderr = StreamCollector(self.proc.stderr)
        deadline = time.monotonic() + timeout
        # It binds the sockets one after the other, then says so for each.
        while self.stderr.text().count("Listening on ") < len(self.listens):
            assert self.proc.poll() is None, "systemd-socket-activate exited: %s" % self.stderr.text()
            assert time.monotonic() < deadline, "not listening yet: %s" % self.stderr.text()
            time.sleep(0.02)
        assert os.path.exists(self.unix_path), self.stderr.text()
        # What PID 1 does for SocketMode=/SocketGroup= before anyone connects.
        mode = (values(self.socket_unit, "Socket", "SocketMode") or ["0666"])[0]
        group = (values(self.socket_unit, "Socket", "SocketGroup") or [None])[0]
        os.chmod(self.unix_path, int(mode, 8))
        if group:
            shutil.chown(self.unix_path, group=group)
        # systemd-socket-activate starts the service on the first connection.
        self.first = socket.create_connection(("127.0.0.1", self.site.tcp_port), timeout=timeout)
        self.first.sendall(b"GET /pid HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return self

    def first_response(self, timeout=20.0):
        self.first.settimeout(timeout)
        data = b""
        while True:
            chunk = self.first.recv(65536)
            if not chunk:
                break
            data += chunk
        self.first.close()
        return data

    def stop(self, timeout=15.0):
        if getattr(self, "proc", None) is None:
            self.notify.close()
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
            self.notify.close()
        print("--- unit stderr (exit %s) ---\n%s" % (self.proc.returncode, "\n".join(self.stderr.lines[-60:])))
        return self.proc.returncode
