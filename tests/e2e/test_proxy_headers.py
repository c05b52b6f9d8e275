"""Proxy headers (--forwarded-allow-ips): X-Forwarded-For (rightmost
untrusted hop), X-Forwarded-Proto and RFC 7239 Forwarded set REMOTE_ADDR,
REMOTE_PORT and wsgi.url_scheme — from trusted peers only; from anyone else
they are passed through untouched and ignored. Peers: 127.0.0.1 (trusted by
default), 127.0.0.2 (not), a unix socket (trusted by default)."""

import json
import os
import re
import socket
import tempfile

from rawhttp import build_request
from serverproc import StreamCollector, kill_group, run_to_exit, spawn

SPOOF = [("X-Forwarded-For", "6.6.6.6, 198.51.100.7"), ("X-Forwarded-Proto", "https")]


def environ(port=None, headers=(), source="127.0.0.1", unix=None, conn=None):
    """GET /environ; the environ dict. conn reuses a connection."""
    s = conn
    if s is None:
        if unix:
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(unix)
        else:
            s = socket.socket()
            s.settimeout(10)
            s.bind((source, 0))
            s.connect(("127.0.0.1", port))
    s.sendall(build_request("GET", "/environ", list(headers)))
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
    while len(body) < length:
        body += s.recv(65536)
    if conn is None:
        s.close()
    return json.loads(body)


def test_trusted_peer_rightmost_untrusted_hop(start_server):
    server = start_server("conformance:application", "--access-log")
    env = environ(server.port, SPOOF)
    assert env["REMOTE_ADDR"] == "198.51.100.7"       # nginx appended it; 6.6.6.6 is the client's claim
    assert env["REMOTE_PORT"] == "0"                  # a proxy names no port
    assert env["wsgi.url_scheme"] == "https"
    assert env["HTTP_X_FORWARDED_FOR"] == "6.6.6.6, 198.51.100.7"    # untouched
    # The access log names the client, not the proxy.
    assert server.stdout.wait_for(re.compile(r"^198\.51\.100\.7 - - \["), 5)


def test_untrusted_peer_headers_are_ignored(start_server):
    # The trust check is m0_proxy_client's alone (proxy.c; the loop's cached
    # copy in h1.c was redundant and is gone): this fails without it, as does
    # tests/unit/test_proxy.c's test_untrusted_peer_is_ignored.
    server = start_server("conformance:application")
    env = environ(server.port, SPOOF + [("Forwarded", "for=7.7.7.7;proto=https")], source="127.0.0.2")
    assert env["REMOTE_ADDR"] == "127.0.0.2"
    assert env["REMOTE_PORT"] != "0"
    assert env["wsgi.url_scheme"] == "http"
    assert env["HTTP_X_FORWARDED_FOR"] == "6.6.6.6, 198.51.100.7"
    assert env["HTTP_X_FORWARDED_PROTO"] == "https"
    assert env["HTTP_FORWARDED"] == "for=7.7.7.7;proto=https"


def test_allow_list_cidrs_and_star(start_server):
    only_net = start_server("conformance:application", "--forwarded-allow-ips", "10.0.0.0/8")
    assert environ(only_net.port, SPOOF)["REMOTE_ADDR"] == "127.0.0.1"    # loopback no longer trusted
    # The proxy chain: 127.0.0.1 (the peer) and 10.x hops are trusted.
    net = start_server("conformance:application", "--forwarded-allow-ips", "127.0.0.0/8, 10.0.0.0/8")
    env = environ(net.port, [("X-Forwarded-For", "6.6.6.6, 198.51.100.7, 10.1.2.3")], source="127.0.0.2")
    assert env["REMOTE_ADDR"] == "198.51.100.7"
    star = start_server("conformance:application", env={"M0_FORWARDED_ALLOW_IPS": "*"})
    env = environ(star.port, SPOOF, source="127.0.0.2")
    assert env["REMOTE_ADDR"] == "6.6.6.6"            # '*' believes every hop: the leftmost


def test_forwarded_rfc7239(start_server):
    server = start_server("conformance:application")
    env = environ(server.port, [("Forwarded", 'for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https')])
    assert env["REMOTE_ADDR"] == "2001:db8:cafe::17"
    assert env["REMOTE_PORT"] == "4711"
    assert env["wsgi.url_scheme"] == "https"
    # Garbage never reaches REMOTE_ADDR.
    env = environ(server.port, [("X-Forwarded-For", '1.2.3.4" "injected')])
    assert env["REMOTE_ADDR"] == "127.0.0.1"


def test_every_request_on_a_kept_connection_is_judged_alone(start_server):
    """One upstream connection of a proxy carries many clients' requests."""
    server = start_server("conformance:application")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        first = environ(headers=SPOOF, conn=s)
        second = environ(conn=s)
    assert first["REMOTE_ADDR"] == "198.51.100.7" and first["wsgi.url_scheme"] == "https"
    assert second["REMOTE_ADDR"] == "127.0.0.1" and second["wsgi.url_scheme"] == "http"


def _unix_server(tmp_path, *args):
    d = tempfile.mkdtemp(prefix="s", dir=tmp_path)
    path = os.path.join(d, "s.sock")
    from serverproc import APPS_DIR
    proc = spawn(["conformance:application", "--app-dir", str(APPS_DIR), "--bind", "unix:" + path, *args])
    err = StreamCollector(proc.stderr)
    StreamCollector(proc.stdout)
    if not err.wait_for(re.compile(r"worker booted"), 15):
        kill_group(proc)
        raise AssertionError(err.text())
    return proc, path


def test_unix_peers(tmp_path):
    proc, path = _unix_server(tmp_path)
    try:
        env = environ(headers=SPOOF, unix=path)
        assert env["REMOTE_ADDR"] == "198.51.100.7" and env["wsgi.url_scheme"] == "https"
        assert environ(unix=path)["REMOTE_ADDR"] == ""       # no proxy headers: nothing to say
    finally:
        kill_group(proc)
        proc.wait(10)
    proc, path = _unix_server(tmp_path, "--forwarded-allow-ips", "127.0.0.1")
    try:
        env = environ(headers=SPOOF, unix=path)
        assert env["REMOTE_ADDR"] == "" and env["wsgi.url_scheme"] == "http"
    finally:
        kill_group(proc)
        proc.wait(10)


def test_bad_allow_list_is_one_line():
    code, err = run_to_exit(["conformance:application", "--forwarded-allow-ips", "10.0.0.0/33"])
    assert code == 2
    assert err.strip().splitlines() == [
        "m0serve: error: --forwarded-allow-ips: invalid address or network '10.0.0.0/33'"]
