"""Debian's nginx in front of m0serve, with deploy/nginx/m0serve.conf as
written (its listen address and the /srv/mysite, /run/mysite paths moved),
nginx's workers running as www-data as on a Debian install:

- Django pages through nginx over the unix socket of the socket unit;
- /static served by nginx itself;
- a held SSE stream whose heartbeats and events arrive through nginx as
  they are sent (nginx buffers other responses);
- the client's address and scheme as the application sees them, with
  spoofing attempts;
- a WebSocket a plain view approves, through the same config;
- a unix socket m0serve binds itself as root: unreachable for www-data with
  the usual umask, reachable with --umask 007 --group www-data.
"""

import grp
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from deploykit import DEPLOY, free_port, world_dir
from serverproc import StreamCollector, children_of, kill_group
from wsraw import BINARY, CLOSE, RawWS, expected_accept

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="nginx's workers run as www-data: needs root")

NGINX = "/usr/sbin/nginx"


class Nginx:
    """nginx -c a main config that includes the site file, daemon off."""

    def __init__(self, site_text):
        self.proc = None
        self.dir = world_dir("m0-nginx-")
        self.port = free_port()
        site_text = re.sub(r"listen\s+80;", "listen 127.0.0.1:%d;" % self.port, site_text)
        (self.dir / "site.conf").write_text(site_text)
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / d).mkdir()
            os.chown(self.dir / d, pwd.getpwnam("www-data").pw_uid, -1)
        (self.dir / "nginx.conf").write_text("""
user www-data;
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    include {d}/site.conf;
}}
""".format(d=self.dir))

    def start(self, timeout=10.0):
        self.proc = subprocess.Popen([NGINX, "-c", str(self.dir / "nginx.conf"), "-p", str(self.dir)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        self.err = StreamCollector(self.proc.stderr)
        StreamCollector(self.proc.stdout)
        deadline = time.monotonic() + timeout
        while True:
            assert self.proc.poll() is None, "nginx exited: %s %s" % (self.err.text(), self.error_log())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                assert time.monotonic() < deadline, "nginx does not listen"
                time.sleep(0.05)

    def worker_uids(self, timeout=10.0):
        """The uids of nginx's worker processes (waiting for the master to
        fork them, and for them to switch user: it listens first)."""
        deadline = time.monotonic() + timeout
        while True:
            uids = set()
            for pid in children_of(self.proc.pid):
                for line in open("/proc/%d/status" % pid):
                    if line.startswith("Uid:"):
                        uids.add(int(line.split()[1]))
            # A worker is root for the instant between fork and setuid.
            if uids and 0 not in uids:
                return uids
            if time.monotonic() > deadline:
                return uids
            time.sleep(0.02)

    def error_log(self):
        p = self.dir / "error.log"
        return p.read_text() if p.exists() else ""

    def stop(self):
        try:
            if self.proc is not None:
                self.proc.send_signal(signal.SIGQUIT)
                self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc is not None:
                kill_group(self.proc)
                self.proc.wait(5)
            shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def nginx_for():
    started = []

    def start(site_text):
        n = Nginx(site_text)
        started.append(n)        # stopped at teardown even if start() fails
        return n.start()

    yield start
    for n in started:
        n.stop()


def http(port, method, path, headers=(), body=b"", source="127.0.0.1", timeout=10):
    """One HTTP/1.1 exchange with nginx from a chosen loopback address."""
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: mysite.test", "Connection: close"]
    lines += ["%s: %s" % h for h in headers]
    if body:
        lines.append("Content-Length: %d" % len(body))
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    hdrs = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        k, _, v = line.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    if hdrs.get("transfer-encoding") == "chunked":
        rest = dechunk_all(rest)
    return status, hdrs, rest


def dechunk_all(data):
    out = b""
    while data:
        size, _, data = data.partition(b"\r\n")
        n = int(size.split(b";")[0], 16)
        if n == 0:
            break
        out += data[:n]
        data = data[n + 2:]
    return out


class StreamThroughNginx:
    """An SSE stream read through nginx: HTTP/1.1, chunked framing removed as
    bytes arrive, every block timestamped on arrival."""

    def __init__(self, port, path, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: mysite.test\r\nAccept: text/event-stream\r\n\r\n"
                        % path).encode())
        self.raw = b""
        while b"\r\n\r\n" not in self.raw:
            self.raw += self._recv(time.monotonic() + timeout)
        head, _, self.raw = self.raw.partition(b"\r\n\r\n")
        self.head = head.decode("latin-1")
        self.chunked = "transfer-encoding: chunked" in self.head.lower()
        self.text = b""
        self.blocks = []                # (arrival time, block text)

    def _recv(self, deadline):
        self.s.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = self.s.recv(65536)
        if not chunk:
            raise EOFError("stream closed")
        return chunk

    def _decode(self):
        if not self.chunked:
            self.text += self.raw
            self.raw = b""
            return
        while b"\r\n" in self.raw:
            size, _, rest = self.raw.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if len(rest) < n + 2:
                return
            self.text += rest[:n]
            self.raw = rest[n + 2:]

    def next_block(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            self._decode()
            if b"\n\n" in self.text:
                block, _, self.text = self.text.partition(b"\n\n")
                self.blocks.append((time.monotonic(), block.decode()))
                return block.decode()
            self.raw += self._recv(deadline)

    def close(self):
        self.s.close()


def site_conf(site, socket_path=None):
    text = site.map((DEPLOY / "nginx" / "m0serve.conf").read_text())
    if socket_path is not None:
        text = re.sub(r"server unix:[^;]+;", "server unix:%s;" % socket_path, text)
    return text


def test_nginx_in_front_of_the_unit(site, start_unit, nginx_for):
    # The unit as written; a 1 s heartbeat (M0_HEARTBEAT, --heartbeat's
    # twin) keeps the test short.
    unit = start_unit(extra_env={"M0_HEARTBEAT": "1"})
    unit.first_response()
    unit.notify.wait_for("READY", "1")
    ngx = nginx_for(site_conf(site))
    assert ngx.worker_uids() == {pwd.getpwnam("www-data").pw_uid}
    st = os.stat(unit.unix_path)
    assert oct(st.st_mode & 0o777) == "0o660" and st.st_gid == grp.getgrnam("www-data").gr_gid

    # A Django page, through nginx and the socket unit's unix socket.
    status, hdrs, body = http(ngx.port, "GET", "/")
    assert status == 200, (body, ngx.error_log())
    assert b"m0serve" in body
    assert hdrs["server"].startswith("nginx")
    token = re.search(r"csrftoken=([^;]+)", hdrs["set-cookie"]).group(1)

    # /static is nginx's own.
    status, hdrs, body = http(ngx.port, "GET", "/static/hello.txt")
    assert status == 200 and body == b"static from nginx\n"
    assert "static/hello.txt" not in unit.stdout.text()      # m0serve's access log never saw it

    # The client's address as the app sees it: nginx's $remote_addr for our
    # connection from 127.0.0.2; what the client claimed is ignored.
    status, _, body = http(ngx.port, "GET", "/client", source="127.0.0.2",
                           headers=[("X-Forwarded-For", "6.6.6.6"), ("X-Forwarded-Proto", "https"),
                                    ("Forwarded", "for=7.7.7.7;proto=https")])
    assert status == 200
    seen = json.loads(body)
    assert seen["remote_addr"] == "127.0.0.2", seen
    assert seen["scheme"] == "http" and seen["secure"] is False, seen
    assert seen["x_forwarded_for"] == "6.6.6.6, 127.0.0.2"      # passed through untouched
    deadline = time.monotonic() + 5
    while "127.0.0.2 - - [" not in unit.stdout.text():           # the access log names the client too
        assert time.monotonic() < deadline, unit.stdout.text()
        time.sleep(0.05)

    # A held SSE stream through nginx: its head, heartbeats and events come
    # as m0serve sends them, not when a proxy buffer fills.
    stream = StreamThroughNginx(ngx.port, "/events?channel=ngx")
    try:
        assert " 200 " in stream.head.split("\r\n")[0]
        assert "text/event-stream" in stream.head
        assert "x-accel-buffering" not in stream.head.lower()      # consumed by nginx
        assert stream.next_block(5).startswith(": connected worker=")
        beats = [stream.next_block(3), stream.next_block(3)]
        assert all(b.startswith(":") for b in beats), beats
        assert stream.blocks[-1][0] - stream.blocks[-2][0] > 0.5     # one per --heartbeat, as sent
        sent = time.monotonic()
        status, _, body = http(ngx.port, "POST", "/publish", headers=[
            ("Accept", "application/json"), ("Content-Type", "application/x-www-form-urlencoded"),
            ("Cookie", "csrftoken=" + token), ("X-CSRFToken", token)],
            body=b"channel=ngx&text=through+nginx")
        assert status == 200, body
        event_id = json.loads(body)["id"]
        while True:
            block = stream.next_block(5)
            if not block.startswith(":"):
                break
        assert time.monotonic() - sent < 2.0
        assert "id: %d" % event_id in block and "through nginx" in block, block
    finally:
        stream.close()


def test_websocket_through_nginx(site, start_unit, nginx_for):
    """A socket the example's plain view approves (/ws/echo), through the
    site config as written: nginx passes the upgrade on (its map turns
    Upgrade into Connection: upgrade), the 101 and frames both ways, the
    close handshake."""
    unit = start_unit()
    unit.first_response()
    ngx = nginx_for(site_conf(site))
    with RawWS(ngx.port, "/ws/echo") as ws:
        assert ws.status == 101, (ws.headers, ngx.error_log())
        assert ws.headers["sec-websocket-accept"] == expected_accept(ws.key)
        assert ws.headers["x-worker"].isdigit()            # the view's header, on the 101
        ws.send_text("through nginx")
        assert ws.recv_data().payload == b"through nginx"
        ws.send(BINARY, b"\x00\xff")
        assert ws.recv_data().payload == b"\x00\xff"
        ws.close_frame(1000)
        frame = ws.recv()
        assert (frame.opcode, frame.close_code) == (CLOSE, 1000)
        assert ws.wait_eof()


def test_umask_lets_www_data_reach_a_socket_m0serve_binds(site_venv, site, nginx_for, tmp_path):
    """m0serve binds the unix socket itself, as root: with the usual umask
    (022) the socket is root's srwxr-xr-x and nginx's www-data workers get
    "Permission denied"; --umask 007 --group www-data makes it
    srwxrwx--- root:www-data and nginx gets through."""
    _, venv = site_venv
    sock = site.run / "self.sock"
    ngx = nginx_for(site_conf(site, sock))

    def serve(*extra):
        proc = subprocess.Popen(
            [str(venv / "bin" / "m0serve"), "rtsite.wsgi:application", "--bind", "unix:%s" % sock, *extra],
            cwd=site.srv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=lambda: os.umask(0o022))
        err = StreamCollector(proc.stderr)
        StreamCollector(proc.stdout)
        if not err.wait_for(re.compile(r"worker booted"), 20):
            kill_group(proc)
            raise AssertionError(err.text())
        return proc, err

    def stop(proc):
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        finally:
            kill_group(proc)

    proc, err = serve()
    try:
        assert oct(os.stat(sock).st_mode & 0o777) == "0o755"
        status, _, _ = http(ngx.port, "GET", "/pid")
        assert status == 502
        assert re.search(r"connect\(\) to unix:%s failed \(13: Permission denied\)" % re.escape(str(sock)),
                         ngx.error_log()), ngx.error_log()
    finally:
        stop(proc)

    proc, err = serve("--umask", "007", "--group", "www-data")
    try:
        st = os.stat(sock)
        assert oct(st.st_mode & 0o777) == "0o770" and st.st_gid == grp.getgrnam("www-data").gr_gid
        status, _, body = http(ngx.port, "GET", "/pid")
        assert status == 200, ngx.error_log()
    finally:
        stop(proc)


def unix_get(path, target):
    """GET target straight from m0serve over its unix socket (the peer nginx is)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall(("GET %s HTTP/1.1\r\nHost: mysite.test\r\nConnection: close\r\n\r\n" % target).encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_the_site_keeps_metrics_path_off_the_public_side(site, start_unit, nginx_for):
    """--metrics-path on the main listener answers trusted peers, and nginx
    (a unix peer, M0_FORWARDED_ALLOW_IPS=unix) is one: the site config must
    answer the path itself (404), however a client spells it, or every
    visitor reads the server's metrics."""
    unit = start_unit(extra_env={"M0_METRICS_PATH": "/metrics"})
    unit.first_response()
    unit.notify.wait_for("READY", "1")
    status, body = unix_get(unit.unix_path, "/metrics")
    assert status == 200 and b"m0serve_requests_total" in body      # what nginx itself would be given
    ngx = nginx_for(site_conf(site))
    for target in ("/metrics", "/metrics?x=1", "/%6Detrics", "//metrics", "/./metrics", "/static/../metrics"):
        status, hdrs, body = http(ngx.port, "GET", target)
        assert b"m0serve_" not in body, target
        assert status == 404 and hdrs["server"].startswith("nginx"), (target, status, body)
    status, _, body = http(ngx.port, "GET", "/")          # the site itself still passes
    assert status == 200 and b"m0serve" in body
