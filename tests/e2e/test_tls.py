"""TLS on m0serve's own listeners (issue 31): --certfile/--keyfile on the
transport seam, every protocol over it, the failure cases, reloads and
resumption. Checked with Python's ssl, curl and openssl s_client; the
certificates are made by tlsfix.Certs with the openssl CLI (a CA of the
test's own). The browser's view is smoke/tls_browser.py.
"""

import errno
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import warnings

import pytest

from serverproc import APPS_DIR, binary_is_sanitized, children_of, rss_kb, run_to_exit
from sse import SSEStream
from tlsfix import Certs, TLSServer, client_context, get, read_response, tls_connect
from wsraw import TEXT, RawWS

APP = "tls_app:application"
ASGI = ("--mount", "/a=tls_app:asgi_app")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_server(certs):
    started = []

    def start(*args, app=APP, **kwargs):
        server = TLSServer(certs, app, *args, **kwargs)
        started.append(server)
        return server.start()

    yield start
    for server in reversed(started):
        server.stop()


def wrap_for(certs, port=None):
    ctx = client_context(certs)
    return lambda sock: ctx.wrap_socket(sock, server_hostname="localhost")


def env_of(server, ctx=None, path="/env", port=None):
    status, _, body = get(port or server.port, ctx or client_context(server.certs), path)
    assert status == 200, body
    return json.loads(body)


def worker_pid(server):
    return int(get(server.port, client_context(server.certs), "/pid")[2])


def alive(server):
    """The worker still serves over TLS."""
    status, _, body = get(server.port, client_context(server.certs), "/pid")
    return status == 200 and body.isdigit()


# ------------------------------------------------------------------ WSGI


def test_wsgi_over_tls_says_https_and_keeps_alive(tls_server, certs):
    server = tls_server("--access-log")
    ctx = client_context(certs)
    with tls_connect(server.port, ctx) as s:
        assert s.selected_alpn_protocol() == "http/1.1"
        assert s.version() in ("TLSv1.2", "TLSv1.3")
        for i in range(5):      # keep-alive: one handshake, five requests
            s.sendall(b"GET /env HTTP/1.1\r\nHost: localhost\r\n\r\n")
            status, headers, body = read_response(s)
            assert status == 200
            env = json.loads(body)
        assert env["wsgi.url_scheme"] == "https"
        assert env["HTTPS"] == "on"
        assert env["SSL_PROTOCOL"] == s.version()
        assert env["SSL_CIPHER"] == s.cipher()[0]
        assert env["SSL_CLIENT_VERIFY"] == "NONE" and "SSL_CLIENT_S_DN" not in env
        # A body in, and one far larger than a record and the socket's buffers out.
        payload = os.urandom(300_000)
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        assert read_response(s)[2] == payload
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
        assert read_response(s)[2] == b"hello world"
        s.sendall(b"GET /big?n=5000000&chunk=70000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        status, headers, body = read_response(s, timeout=30)
        assert status == 200 and len(body) == 5_000_000 and body[:70000] == b"A" * 70000


def test_curl_over_tls_verifies_the_certificate(tls_server, certs):
    server = tls_server()
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs.ca), "--http1.1", "-w", "\n%{http_version} %{ssl_verify_result}",
                          server.url("/env")], capture_output=True, timeout=30, text=True)
    assert out.returncode == 0, out.stderr
    body, _, tail = out.stdout.rpartition("\n")
    assert json.loads(body)["wsgi.url_scheme"] == "https"
    assert tail == "1.1 0"


def test_plain_and_tls_listeners_at_once(tls_server, certs):
    server = tls_server("--bind", "http://127.0.0.1:0")
    plain = server.port_of("http")
    assert env_of(server)["wsgi.url_scheme"] == "https"
    with socket.create_connection(("127.0.0.1", plain), timeout=10) as s:
        s.sendall(b"GET /env HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status, _, body = read_response(s)
    env = json.loads(body)
    assert env["wsgi.url_scheme"] == "http" and "HTTPS" not in env


def test_a_trusted_proxys_scheme_still_wins_on_a_tls_listener(tls_server, certs):
    server = tls_server("--forwarded-allow-ips", "127.0.0.1")
    ctx = client_context(certs)
    assert get(server.port, ctx, "/env", headers=[("X-Forwarded-Proto", "http")])
    env = json.loads(get(server.port, ctx, "/env", headers=[("X-Forwarded-Proto", "http")])[2])
    assert env["wsgi.url_scheme"] == "http"
    env = json.loads(get(server.port, ctx, "/env", headers=[("X-Forwarded-For", "10.1.2.3")])[2])
    assert env["wsgi.url_scheme"] == "https" and env["REMOTE_ADDR"] == "10.1.2.3"


# ------------------------------------------------------------------ ASGI


def test_asgi_scope_has_https_and_the_tls_extension(tls_server, certs):
    server = tls_server(*ASGI)
    ctx = client_context(certs)
    with tls_connect(server.port, ctx) as s:
        s.sendall(b"GET /a/scope HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        scope = json.loads(read_response(s)[2])
        version, cipher = s.version(), s.cipher()[0]
    assert scope["scheme"] == "https"
    tls = scope["extensions"]["tls"]
    assert tls["tls_version"] == {"TLSv1.3": 0x0304, "TLSv1.2": 0x0303}[version]
    assert tls["server_cert"] == certs.cert.read_text()
    assert tls["client_cert_chain"] == [] and tls["client_cert_name"] is None and tls["client_cert_error"] is None
    suites = {"TLS_AES_256_GCM_SHA384": 0x1302, "TLS_CHACHA20_POLY1305_SHA256": 0x1303, "TLS_AES_128_GCM_SHA256": 0x1301}
    assert tls["cipher_suite"] == suites[cipher]
    assert "http.response.pathsend" in scope["extensions"]      # the template's, kept


def test_asgi_streamed_body_with_credit_over_tls(tls_server, certs):
    server = tls_server(*ASGI)
    # 4 MiB against the loop's window of unwritten bytes (job.h): the runner
    # waits for credit as the TLS writes drain.
    with tls_connect(server.port, client_context(certs)) as s:
        s.sendall(b"GET /a/stream?n=64 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        status, headers, body = read_response(s, timeout=30)
    assert status == 200 and len(body) == 64 * 65536
    assert body[65536 * 63:] == b"l" * 65536


# ------------------------------------------------------- holds, WebSockets


def publish(server, channel, data):
    q = urllib.parse.urlencode({"channel": channel, "size": len(data)} if data == "x" * len(data) and len(data) > 100
                               else {"channel": channel, "data": data})
    return int(get(server.port, client_context(server.certs), "/publish?" + q)[2])


def test_sse_hold_over_tls(tls_server, certs):
    server = tls_server("--realtime", "--heartbeat", "1")
    stream = SSEStream(server.port, "/events?channel=news", wrap=wrap_for(certs))
    try:
        assert stream.status == 200
        ids = [publish(server, "news", "first"), publish(server, "news", "x" * 40000)]
        got = [stream.next_event(timeout=10) for _ in range(2)]
        assert [e.data for e in got] == ["first", "x" * 40000]
        assert [e.id for e in got] == ids
        # Idle: the heartbeat comes through the TLS stream too.
        assert stream.next(timeout=5).comment is not None
    finally:
        stream.close()
    assert alive(server)


@pytest.mark.skipif(binary_is_sanitized(), reason="ASan's quarantine and redzones make RSS growth meaningless")
def test_idle_tls_streams_release_their_buffers(tls_server, certs):
    """SSL_MODE_RELEASE_BUFFERS: an idle held TLS stream keeps no record
    buffers (about 13 KiB of worker RSS each, measured; 23 KiB with them)."""
    n = 1000
    server = tls_server("--realtime", "--max-connections", str(n + 100))
    worker = worker_pid(server)
    assert worker in children_of(server.proc.pid)
    wrap = wrap_for(certs)
    streams = []
    try:
        for _ in range(20):         # the first streams' one-off allocations (the slots, OpenSSL's tables)
            streams.append(SSEStream(server.port, "/events?channel=idle", wrap=wrap))
        before = rss_kb(worker)
        for _ in range(n):
            streams.append(SSEStream(server.port, "/events?channel=idle", wrap=wrap))
        per_stream = (rss_kb(worker) - before) / n
        print("idle TLS SSE stream: %.1f KiB of worker RSS each" % per_stream)
        assert per_stream < 18, "%.1f KiB per idle TLS stream: its record buffers are kept" % per_stream
        publish(server, "idle", "still there")
        assert streams[-1].next_event(timeout=10).data == "still there"
    finally:
        for stream in streams:
            stream.close()


def test_websocket_hold_and_asgi_websocket_over_wss(tls_server, certs):
    server = tls_server("--realtime", *ASGI)
    ws = RawWS(server.port, "/ws?channel=live", wrap=wrap_for(certs))
    try:
        assert ws.status == 101
        publish(server, "live", "to the socket")
        frame = ws.recv_data(timeout=10)
        assert frame.opcode == TEXT and frame.payload == b"to the socket"
    finally:
        ws.close()
    ws = RawWS(server.port, "/a/ws", wrap=wrap_for(certs))
    try:
        assert ws.status == 101
        first = json.loads(ws.recv_data(timeout=10).payload)
        assert first["scheme"] == "wss" and first["tls_version"] in (0x0303, 0x0304)
        big = b"y" * 100_000
        ws.send(TEXT, big)
        assert ws.recv_data(timeout=10).payload == big
    finally:
        ws.close()


def test_websockets_library_over_wss(tls_server, certs):
    from websockets.sync.client import connect
    server = tls_server(*ASGI)
    # 127.0.0.1 with the certificate's name for SNI and verification: a
    # fresh machine may have no /etc/hosts entry for localhost.
    with connect("wss://127.0.0.1:%d/a/ws" % server.port, ssl=client_context(certs, alpn=None),
                 server_hostname="localhost", open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["scheme"] == "wss"
        ws.send("echo me")
        assert ws.recv(timeout=10) == "echo me"


# ------------------------------------------------------------ static files


def test_static_files_with_ranges_over_tls(tls_server, certs, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    data = os.urandom(1_000_003)
    (site / "blob.bin").write_bytes(data)
    (site / "small.txt").write_bytes(b"tiny\n")
    server = tls_server("--static", "/s=%s" % site)
    ctx = client_context(certs)
    with tls_connect(server.port, ctx) as s:
        for _ in range(3):       # keep-alive: file after file on one connection
            s.sendall(b"GET /s/blob.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
            status, headers, body = read_response(s, timeout=30)
            assert status == 200 and body == data
        s.sendall(b"GET /s/blob.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes=100-199\r\n\r\n")
        status, headers, body = read_response(s)
        assert status == 206 and body == data[100:200]
        assert headers["content-range"] == "bytes 100-199/%d" % len(data)
        s.sendall(b"GET /s/blob.bin HTTP/1.1\r\nHost: localhost\r\nRange: bytes=-17000\r\n\r\n")
        assert read_response(s)[2] == data[-17000:]
        s.sendall(b"GET /s/small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert read_response(s)[2] == b"tiny\n"
        s.sendall(b"HEAD /s/blob.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        s.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head:
            head += s.recv(4096)
        assert b"content-length: %d" % len(data) in head.lower()
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs.ca), "-r", "0-9", server.url("/s/blob.bin")],
                         capture_output=True, timeout=30)
    assert out.returncode == 0 and out.stdout == data[:10]


# --------------------------------------------------- the failure cases


def test_plain_http_to_the_tls_port_gets_one_line_400_and_a_close(tls_server, certs):
    server = tls_server()
    pid = worker_pid(server)
    for method in ("GET", "OPTIONS", "DELETE", "PRI"):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(b"%s / HTTP/1.1\r\nHost: localhost\r\n\r\n" % method.encode())
            data = b""
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n")
        assert b"Connection: close" in head and b"Content-Type: text/plain" in head
        assert body.count(b"\n") == 1 and b"HTTPS" in body and int(re.search(rb"Content-Length: (\d+)", head)
                                                                        .group(1)) == len(body)
    out = subprocess.run(["curl", "-sS", "http://127.0.0.1:%d/" % server.port], capture_output=True, timeout=30)
    assert b"400 Bad Request" in out.stdout
    assert worker_pid(server) == pid


def test_a_stalled_handshake_is_closed_after_the_header_timeout(tls_server, certs):
    # The keep-alive timeout far off: the handshake is bounded by the head's.
    server = tls_server("--header-timeout", "1", "--timeout-keep-alive", "60")
    pid = worker_pid(server)
    # Nothing at all, and a ClientHello's first bytes only: both closed.
    silent = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    partial = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    partial.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    begun = time.monotonic()
    for s in (silent, partial):
        s.settimeout(10)
        assert s.recv(100) == b""          # closed by the server (FIN), nothing sent
        s.close()
    assert time.monotonic() - begun < 5
    assert worker_pid(server) == pid


def test_truncated_records_and_garbage_close_the_connection_only(tls_server, certs):
    server = tls_server()
    pid = worker_pid(server)
    # A record header promising more than comes, then the end.
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"\x16\x03\x01\x40\x00" + b"\x01" * 100)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        s.recv(100)
    # An established session whose next record is cut off mid-way.
    ctx = client_context(certs)
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_response(s)[0] == 200
    sock = s.unwrap() if False else s
    fd = os.dup(sock.fileno())
    with socket.socket(fileno=fd) as under:
        under.sendall(b"\x17\x03\x03\x01\x00" + os.urandom(40))      # 256 promised, 40 sent
        under.shutdown(socket.SHUT_WR)
        under.settimeout(10)
        try:
            while under.recv(4096):
                pass
        except ConnectionResetError:
            pass
    s.close()
    # Garbage that looks like a record: a bad MAC, a bad version.
    for junk in (b"\x17\x03\x03\x00\x20" + os.urandom(32), b"\x16\xff\xff\x00\x05hello", os.urandom(3000)):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            s.sendall(junk)
            s.settimeout(10)
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass
    assert worker_pid(server) == pid


def s_client(port, *args, stdin=b"", timeout=20):
    return subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", "localhost",
                           *args], input=stdin, capture_output=True, timeout=timeout)


def test_old_protocols_are_refused_with_an_alert(tls_server, certs):
    server = tls_server()
    pid = worker_pid(server)
    for version in ("-tls1", "-tls1_1"):
        out = s_client(server.port, version, "-cipher", "DEFAULT:@SECLEVEL=0")
        text = (out.stdout + out.stderr).decode(errors="replace")
        assert "alert protocol version" in text, text
    # Python's ssl offering at most TLS 1.1: the same.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)        # offering them is the point
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises(ssl.SSLError):
        tls_connect(server.port, ctx)
    # 1.2 and 1.3 both speak.
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = client_context(certs)
        ctx.minimum_version = ctx.maximum_version = v
        with tls_connect(server.port, ctx) as s:
            assert s.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v]
    assert worker_pid(server) == pid


def test_renegotiation_is_refused_and_the_connection_goes_on(tls_server, certs):
    server = tls_server()
    pid = worker_pid(server)
    # s_client's "R" asks for a renegotiation (TLS 1.2); the server answers
    # no_renegotiation, s_client gives up. The worker serves on.
    proc = subprocess.Popen(["openssl", "s_client", "-tls1_2", "-connect", "127.0.0.1:%d" % server.port,
                             "-CAfile", str(certs.ca), "-servername", "localhost"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        proc.stdin.write(b"R\n")
        proc.stdin.flush()
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert b"RENEGOTIATING" in out
    assert b"no renegotiation" in out, out
    assert worker_pid(server) == pid


def test_alpn_offering_only_h2_is_refused(tls_server, certs):
    server = tls_server()
    with pytest.raises(ssl.SSLError, match="NO_APPLICATION_PROTOCOL|no application protocol"):
        tls_connect(server.port, client_context(certs, alpn=("h2",)))
    with tls_connect(server.port, client_context(certs, alpn=("h2", "http/1.1"))) as s:
        assert s.selected_alpn_protocol() == "http/1.1"
    with tls_connect(server.port, client_context(certs, alpn=None)) as s:
        assert s.selected_alpn_protocol() is None
    assert alive(server)


def test_arbitrary_bytes_never_hurt_the_worker(tls_server, certs):
    """The TLS read path fuzzed from the outside: random bytes, random bytes
    behind a handshake record's first byte, a ClientHello with bytes flipped."""
    server = tls_server()
    pid = worker_pid(server)
    rng = random.Random(31)
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    hello = bytearray()
    inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inb, outb, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        hello = bytearray(outb.read())
    assert hello[:1] == b"\x16"
    cases = []
    for i in range(120):
        kind = i % 3
        if kind == 0:
            cases.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000))))
        elif kind == 1:
            cases.append(b"\x16" + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000))))
        else:
            h = bytearray(hello)
            for _ in range(rng.randrange(1, 8)):
                h[rng.randrange(len(h))] = rng.randrange(256)
            cases.append(bytes(h))
    for junk in cases:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(10)
                while s.recv(65536):
                    pass
            except (ConnectionResetError, BrokenPipeError):
                pass
            except OSError as e:            # our shutdown after the server's reset: it closed first
                if e.errno != errno.ENOTCONN:
                    raise
    assert worker_pid(server) == pid


def client_hello():
    """A real ClientHello (TLS 1.2 and 1.3 offered), as Python's ssl sends it."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    inb, outb = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inb, outb, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outb.read()


def closed_within(s, seconds):
    """s is closed by the server within seconds (what it sent before is read
    and dropped): the time it took."""
    begun = time.monotonic()
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    return time.monotonic() - begun


def test_a_handshake_stalled_midway_or_trickled_is_closed_after_the_header_timeout(tls_server, certs):
    """The stall after a whole ClientHello (the server's flight sent, its
    Finished awaited), and a hello sent a byte at a time: the header timeout
    counts from the accept, the bytes that trickle in do not renew it."""
    server = tls_server("--header-timeout", "1", "--timeout-keep-alive", "60")
    pid = worker_pid(server)
    hello = client_hello()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(hello)
        assert s.recv(5)[:1] == b"\x16"                 # the ServerHello came: the handshake is under way
        assert closed_within(s, 10) < 5
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        begun = time.monotonic()
        closed = False
        for i in range(len(hello)):
            try:
                s.sendall(hello[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            # One byte per 50 ms, waiting on the socket itself: a FIN ends it early.
            r, _, _ = select.select([s], [], [], 0.05)
            if r:
                closed = s.recv(100) == b""
                break
            assert time.monotonic() - begun < 5, "a trickled hello kept the connection past the header timeout"
        assert closed and time.monotonic() - begun < 5
    assert worker_pid(server) == pid


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_a_client_certificate_from_another_ca_is_refused_on_both_versions(tls_server, certs, version):
    """TLS 1.2 refuses in the handshake; on 1.3 the client's handshake ends
    before its certificate is checked, the refusal comes as an alert on its
    first read. Neither gets an answer; the worker serves on."""
    server = tls_server(*mtls_args(certs, "required"))
    pid = worker_pid_with(server, certs)
    for cert, key in ((certs.stranger, certs.stranger_key), (None, None)):
        ctx = client_context(certs, cert=cert, key=key)
        ctx.minimum_version = ctx.maximum_version = version
        with pytest.raises((ssl.SSLError, ConnectionError)):
            get(server.port, ctx, "/pid")
    ctx = client_context(certs, cert=certs.client, key=certs.client_key)
    ctx.minimum_version = ctx.maximum_version = version
    assert get(server.port, ctx, "/pid")[2] == str(pid).encode()


class SClient:
    """openssl s_client as a child, its output read as it comes (bounded)."""

    def __init__(self, port, *args):
        self.proc = subprocess.Popen(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername",
                                      "localhost", "-crlf", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.out = b""

    def write(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def wait_for(self, needle, timeout=15):
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while needle not in self.out:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
            chunk = os.read(fd, 65536)
            if not chunk:
                return needle in self.out
            self.out += chunk
        return True

    def close(self):
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdin.close()
        self.proc.stdout.close()


def test_renegotiation_mid_connection_is_refused_and_other_connections_go_on(tls_server, certs):
    """A TLS 1.2 client that asks for a renegotiation after a request: the
    server's no_renegotiation alert (SSL_OP_NO_RENEGOTIATION), the client
    gives up, its connection closes; a connection kept open beside it, on
    the same worker, is answered before and after. TLS 1.3 has no
    renegotiation; its KeyUpdate is legitimate and the connection goes on."""
    server = tls_server()
    ctx = client_context(certs)
    kept = tls_connect(server.port, ctx)
    kept.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    pid = read_response(kept)[2]
    c = SClient(server.port, "-tls1_2", "-CAfile", str(certs.ca))
    try:
        assert c.wait_for(b"---\n") and c.wait_for(b"Verify return code: 0")
        c.write(b"GET /pid HTTP/1.1\nHost: x\n\n")
        assert c.wait_for(pid), c.out
        c.write(b"R\n")
        assert c.wait_for(b"no renegotiation"), c.out
        assert c.proc.wait(timeout=15) is not None
    finally:
        c.close()
    kept.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_response(kept)[2] == pid
    kept.close()
    c = SClient(server.port, "-tls1_3", "-CAfile", str(certs.ca))
    try:
        assert c.wait_for(b"Verify return code: 0")
        for line in (b"k\n", b"K\n"):          # a KeyUpdate, and one asking the server for its own
            c.write(line)
            assert c.wait_for(b"KEYUPDATE"), c.out
            c.out = b""
            c.write(b"GET /pid HTTP/1.1\nHost: x\n\n")
            assert c.wait_for(pid), c.out
    finally:
        c.close()
    assert worker_pid(server) == int(pid)


def test_a_reload_with_a_bad_pair_keeps_the_certificate_in_use(tls_server, certs, tmp_path):
    """SIGHUP with a certificate renewed and its key not yet (they do not
    match), with the key file gone, and with an encrypted key and no
    password: each one line, the pair in use stays, a kept connection is
    answered, new handshakes work."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(certs.cert, cert)
    shutil.copy(certs.key, key)
    server = tls_server(tls_args=("--certfile", str(cert), "--keyfile", str(key)))
    ctx = client_context(certs)

    def reload_expecting(why):
        kept = tls_connect(server.port, ctx)            # kept across the reload: its next request answered
        kept.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(kept)[0] == 200
        at = len(server.stderr.lines)
        server.signal(signal.SIGHUP)
        assert server.stderr.wait_for(re.compile(r"new workers booted"), 20, start=at), server.stderr.text()
        warned = [line for line in server.stderr.lines[at:] if "certificate in use is kept" in line]
        assert len(warned) == 1 and why in warned[0], server.stderr.text()
        assert "organizationName" not in peer_subject(server.port, ctx)
        kept.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(kept)[0] == 200
        kept.close()

    shutil.copy(certs.cert2, cert)                      # renewed; key.pem still the old one
    reload_expecting("does not match")
    shutil.copy(certs.cert, cert)
    key.unlink()
    reload_expecting("%s: No such file or directory" % key)
    shutil.copy(certs.key_encrypted, key)
    reload_expecting("--keyfile-password-file")
    assert alive(server)


# ------------------------------------------------------------ the flags


def test_flags_that_do_not_agree_are_refused_in_one_line(certs, tmp_path):
    cases = [
        (["--keyfile", str(certs.key)], 2, "--keyfile: needs --certfile"),
        (["--bind", "https://127.0.0.1:0"], 2, "needs --certfile"),
        (["--certfile", str(certs.cert), "--keyfile", str(certs.key), "--cert-reqs", "required"], 2,
         "--cert-reqs required: needs --ca-certs"),
        (["--certfile", str(certs.cert), "--keyfile", str(certs.key), "--cert-reqs", "maybe"], 2,
         "--cert-reqs: invalid value 'maybe'"),
        (["--certfile", str(certs.cert), "--keyfile", str(certs.key), "--ciphers", "NOTHING-AT-ALL"], 2,
         "--ciphers: invalid value"),
        (["--certfile", str(tmp_path / "missing.pem")], 78, "--certfile: %s: No such file" % (tmp_path / "missing.pem")),
        (["--certfile", str(certs.cert), "--keyfile", str(certs.key2)], 78, "the key does not match"),
        (["--certfile", str(certs.cert), "--keyfile", str(certs.key_encrypted)], 78,
         "an encrypted key: its password goes in --keyfile-password-file"),
        (["--certfile", str(certs.ca_key)], 78, "--certfile: %s: no PEM data" % certs.ca_key),
        (["--metrics-bind", "https://127.0.0.1:0"], 2, "--metrics-bind https://127.0.0.1:0: needs --certfile"),
    ]
    for args, status, text in cases:
        rc, err = run_to_exit(["tls_app:application", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0", *args])
        lines = [line for line in err.splitlines() if line.strip()]
        assert rc == status, (args, err)
        assert text in err, (args, err)
        assert len(lines) == 1 or all("[INFO]" in line for line in lines[:-1]), err


def test_the_aliases_of_uvicorn_and_granian_and_a_key_with_a_password(tls_server, certs):
    server = tls_server(tls_args=("--ssl-certfile", str(certs.cert), "--ssl-keyfile", str(certs.key_encrypted),
                                  "--keyfile-password-file", str(certs.password_file)))
    assert env_of(server)["wsgi.url_scheme"] == "https"
    server = tls_server(tls_args=("--ssl-certificate", str(certs.cert), "--ssl-keyfile", str(certs.key)))
    assert alive(server)


def test_the_environment_twins_of_the_certificate_flags(tls_server, certs):
    server = tls_server(tls_args=(), env={"M0_CERTFILE": str(certs.cert), "M0_KEYFILE": str(certs.key)})
    assert server.banner.count("https://") == 1
    assert env_of(server)["wsgi.url_scheme"] == "https"
    # The command line wins over the environment, as for every flag.
    server = tls_server(tls_args=("--certfile", str(certs.cert2), "--keyfile", str(certs.key2)),
                        env={"M0_CERTFILE": str(certs.cert), "M0_KEYFILE": str(certs.key)})
    assert peer_subject(server.port, client_context(certs))["organizationName"] == "second"


def test_ciphers_choose_tls12s_cipher(tls_server, certs):
    server = tls_server("--ciphers", "ECDHE-ECDSA-CHACHA20-POLY1305")
    ctx = client_context(certs)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with tls_connect(server.port, ctx) as s:
        assert s.cipher()[0] == "ECDHE-ECDSA-CHACHA20-POLY1305"
    ctx = client_context(certs)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    with pytest.raises(ssl.SSLError):
        tls_connect(server.port, ctx)


# ------------------------------------------------------------- mutual TLS


def mtls_args(certs, reqs):
    return ("--ca-certs", str(certs.ca), "--cert-reqs", reqs)


def test_client_certificates_required(tls_server, certs):
    server = tls_server(*mtls_args(certs, "required"), *ASGI)
    pid = worker_pid_with(server, certs)
    # A client with the test CA's certificate: its subject in the environ and the scope.
    alice = client_context(certs, cert=certs.client, key=certs.client_key)
    env = env_of(server, alice)
    assert env["SSL_CLIENT_S_DN"] == "O=m0 tests,CN=alice"
    assert env["SSL_CLIENT_VERIFY"] == "SUCCESS"
    assert env["SSL_CLIENT_CERT"] == certs.client.read_text()
    scope = json.loads(get(server.port, alice, "/a/scope")[2])
    tls = scope["extensions"]["tls"]
    assert tls["client_cert_name"] == "O=m0 tests,CN=alice"
    assert tls["client_cert_chain"] == [certs.client.read_text()]
    # None, and one from another CA: refused in the handshake, the worker serves on.
    for ctx in (client_context(certs), client_context(certs, cert=certs.stranger, key=certs.stranger_key)):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            get(server.port, ctx, "/env")
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs.ca), server.url("/env")], capture_output=True,
                         timeout=30)
    assert out.returncode != 0
    out = subprocess.run(["curl", "-sS", "--cacert", str(certs.ca), "--cert", str(certs.client), "--key",
                          str(certs.client_key), server.url("/env")], capture_output=True, timeout=30)
    assert json.loads(out.stdout)["SSL_CLIENT_S_DN"] == "O=m0 tests,CN=alice"
    assert worker_pid_with(server, certs) == pid


def worker_pid_with(server, certs):
    ctx = client_context(certs, cert=certs.client, key=certs.client_key)
    return int(get(server.port, ctx, "/pid")[2])


def test_client_certificates_optional(tls_server, certs):
    server = tls_server(*mtls_args(certs, "optional"))
    env = env_of(server)
    assert env["SSL_CLIENT_VERIFY"] == "NONE" and "SSL_CLIENT_S_DN" not in env
    env = env_of(server, client_context(certs, cert=certs.client, key=certs.client_key))
    assert env["SSL_CLIENT_S_DN"] == "O=m0 tests,CN=alice"
    with pytest.raises((ssl.SSLError, ConnectionError)):
        get(server.port, client_context(certs, cert=certs.stranger, key=certs.stranger_key), "/env")
    assert alive(server)


def test_a_resumed_session_keeps_its_client_certificate(tls_server, certs):
    server = tls_server(*mtls_args(certs, "required"))
    alice = client_context(certs, cert=certs.client, key=certs.client_key)
    with tls_connect(server.port, alice) as s:
        s.sendall(b"GET /env HTTP/1.1\r\nHost: x\r\n\r\n")
        read_response(s)
        session = s.session
    with tls_connect(server.port, alice, session=session) as s:
        assert s.session_reused
        s.sendall(b"GET /env HTTP/1.1\r\nHost: x\r\n\r\n")
        assert json.loads(read_response(s)[2])["SSL_CLIENT_S_DN"] == "O=m0 tests,CN=alice"


# ------------------------------------------------- resumption, ticket keys


def first_session(port, ctx):
    with tls_connect(port, ctx) as s:
        s.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        read_response(s)               # a TLS 1.3 ticket comes after the handshake
        return s.session


def resumed_pid(port, ctx, session):
    with tls_connect(port, ctx, session=session) as s:
        s.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.session_reused, int(read_response(s)[2])


@pytest.mark.parametrize("version", ["TLSv1_2", "TLSv1_3"])
def test_sessions_resume_on_every_worker(tls_server, certs, version):
    """The ticket keys are the master's: a session one worker made resumes on the other."""
    server = tls_server(workers=2)
    ctx = client_context(certs)
    ctx.minimum_version = ctx.maximum_version = getattr(ssl.TLSVersion, version)
    session = first_session(server.port, ctx)
    assert session.has_ticket
    seen = set()
    for _ in range(40):
        reused, pid = resumed_pid(server.port, ctx, session)
        assert reused
        seen.add(pid)
        if len(seen) == 2:
            break
    assert len(seen) == 2, "every resumption reached one worker"


def ticket_key_name(port, certs, tmp_path):
    """The key name of the ticket a new session gets (its first 16 bytes, RFC 5077 §4)."""
    sess = tmp_path / ("s%d.pem" % time.monotonic_ns())
    s_client(port, "-CAfile", str(certs.ca), "-sess_out", str(sess), "-tls1_2", stdin=b"")
    text = subprocess.run(["openssl", "sess_id", "-in", str(sess), "-noout", "-text"], capture_output=True,
                          timeout=20, text=True).stdout
    m = re.search(r"TLS session ticket:\n\s*0000 - ((?:[0-9a-f]{2}[ -]){16})", text)
    assert m, text
    return m.group(1).replace(" ", "").replace("-", "")


def test_ticket_keys_rotate_and_old_sessions_expire(tls_server, certs, tmp_path):
    server = tls_server("--tls-ticket-rotate", "1", workers=2)
    ctx = client_context(certs)
    first = ticket_key_name(server.port, certs, tmp_path)
    session = first_session(server.port, ctx)
    assert resumed_pid(server.port, ctx, session)[0]
    deadline = time.monotonic() + 15
    while ticket_key_name(server.port, certs, tmp_path) == first:
        assert time.monotonic() < deadline, "the ticket key never changed"
        time.sleep(0.2)
    # A session lives twice the period: it stops resuming, a full handshake instead.
    while resumed_pid(server.port, ctx, session)[0]:
        assert time.monotonic() < deadline + 10, "a 1 s key's session still resumes"
        time.sleep(0.2)
    assert alive(server)


def test_no_tickets_no_resumption(tls_server, certs):
    server = tls_server("--tls-ticket-rotate", "0")
    ctx = client_context(certs)
    session = first_session(server.port, ctx)
    assert not session.has_ticket
    assert not resumed_pid(server.port, ctx, session)[0]


# ----------------------------------------------------------------- reload


def peer_subject(port, ctx):
    with tls_connect(port, ctx) as s:
        return dict(x[0] for x in s.getpeercert()["subject"])


def test_sighup_rereads_the_certificate_and_drops_no_connection(tls_server, certs, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    shutil.copy(certs.cert, cert)
    shutil.copy(certs.key, key)
    server = tls_server(tls_args=("--certfile", str(cert), "--keyfile", str(key)), workers=2)
    ctx = client_context(certs)
    assert "organizationName" not in peer_subject(server.port, ctx)
    session = first_session(server.port, ctx)
    # A request in flight and a kept connection across the reload.
    kept = tls_connect(server.port, ctx)
    kept.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_response(kept)[0] == 200
    slow = tls_connect(server.port, ctx)
    slow.sendall(b"GET /slow?s=1.5 HTTP/1.1\r\nHost: x\r\n\r\n")
    shutil.copy(certs.cert2, cert)
    shutil.copy(certs.key2, key)
    at = len(server.stderr.lines)
    server.signal(signal.SIGHUP)
    assert server.stderr.wait_for(re.compile(r"TLS certificate re-read: O=second,CN=localhost"), 15, start=at)
    kept.sendall(b"GET /pid HTTP/1.1\r\nHost: x\r\n\r\n")
    assert read_response(kept)[0] == 200          # answered by its old worker
    assert read_response(slow, timeout=20)[2] == b"slept"
    kept.close()
    slow.close()
    assert server.stderr.wait_for(re.compile(r"new workers booted"), 20, start=at)
    assert peer_subject(server.port, ctx)["organizationName"] == "second"
    # The ticket keys outlive the generation: the old session resumes.
    assert resumed_pid(server.port, ctx, session)[0]
    # A file that cannot be read: one line, the certificate in use stays.
    cert.write_text("not a certificate\n")
    at = len(server.stderr.lines)
    server.signal(signal.SIGHUP)
    assert server.stderr.wait_for(re.compile(r"new workers booted"), 20, start=at)
    warned = [line for line in server.stderr.lines[at:] if "certificate in use is kept" in line]
    assert len(warned) == 1 and "--certfile: %s: no PEM data" % cert in warned[0], server.stderr.text()
    assert peer_subject(server.port, ctx)["organizationName"] == "second"
    assert alive(server)


# ------------------------------------- the endpoints answered in C, GRIP


def test_health_and_metrics_over_tls(tls_server, certs):
    server = tls_server("--realtime", "--metrics-bind", "https://127.0.0.1:0", "--bind", "http://127.0.0.1:0")
    ctx = client_context(certs)
    status, _, body = get(server.port, ctx, "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    mport = server.port_of("https", 1)
    status, headers, body = get(mport, ctx, "/metrics")
    assert status == 200 and b"m0serve_" in body
    with socket.create_connection(("127.0.0.1", mport), timeout=10) as s:     # plain on it: the 400
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400 ")


def tls_counters(port, ctx):
    body = get(port, ctx, "/metrics")[2].decode()
    got = {m.group(1): int(m.group(2))
           for m in re.finditer(r'^m0serve_tls_handshakes_total\{result="(\w+)"\} (\d+)$', body, re.M)}
    got["plain"] = int(re.search(r"^m0serve_tls_plain_http_refused_total (\d+)$", body, re.M).group(1))
    return got


def test_tls_handshakes_are_counted_in_the_metrics(tls_server, certs):
    server = tls_server("--metrics-bind", "https://127.0.0.1:0")
    mport, ctx = server.port_of("https", 1), client_context(certs)
    before = tls_counters(mport, ctx)
    session = first_session(server.port, ctx)
    assert resumed_pid(server.port, ctx, session)[0]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400 ")
    with pytest.raises(ssl.SSLError):
        tls_connect(server.port, client_context(certs, alpn=("h2",)))
    after = tls_counters(mport, ctx)
    # The scrapes' own handshakes count too (one full each, the first one before `before`).
    assert after["full"] - before["full"] == 2 and after["resumed"] - before["resumed"] == 1, (before, after)
    assert after["failed"] - before["failed"] == 1 and after["plain"] - before["plain"] == 1, (before, after)


def test_grip_hold_and_control_port_over_tls(tls_server, certs, tmp_path):
    key = tmp_path / "grip.key"
    key.write_text("grip-tls-key-0123456789abcdef-0123456789\n")
    key.chmod(0o600)
    server = tls_server("--grip-key-file", str(key), "--grip-control", "https://127.0.0.1:0", app="grip_asgi:app")
    cport = server.port_of("https", 1)
    ctx = client_context(certs)
    s = tls_connect(server.port, ctx)
    try:
        s.sendall(b"GET /st HTTP/1.1\r\nHost: localhost\r\n\r\n")
        buf = b""
        while b"asgi head\n" not in buf:
            buf += s.recv(65536)
        item = {"items": [{"channel": "ast", "formats": {"http-stream": {"content": "data: over tls\n\n"}}}]}
        body = json.dumps(item).encode()
        status, _, answer = get(cport, ctx, "/publish/", method="POST", body=body,
                                headers=[("Content-Type", "application/json"),
                                         ("Authorization", "Bearer grip-tls-key-0123456789abcdef-0123456789")])
        assert status == 200, answer
        s.settimeout(10)
        while b"data: over tls\n\n" not in buf:
            buf += s.recv(65536)
    finally:
        s.close()


def test_grants_over_tls_are_same_origin_as_https(tls_server, certs, tmp_path):
    import base64
    import hashlib
    import hmac
    keys = tmp_path / "grant.keys"
    secret = "k1-secret-0123456789abcdefghijklmnop"
    keys.write_text("k1 %s\n" % secret)
    keys.chmod(0o600)
    server = tls_server("--grant-key-file", str(keys), "--grant-path", "/rt")

    def b64(raw):
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    signing = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode()) + "." + \
        b64(json.dumps({"channels": ["news"], "exp": int(time.time()) + 60}).encode())
    token = signing + "." + b64(hmac.new(secret.encode(), signing.encode(), hashlib.sha256).digest())
    # SSEStream sends Host: 127.0.0.1; the listener speaks https, so that origin is its own.
    stream = SSEStream(server.port, "/rt/sse?token=" + token, headers=[("Origin", "https://127.0.0.1")],
                       wrap=wrap_for(certs))
    try:
        assert stream.status == 200                 # same origin: https, as the listener speaks
        publish(server, "news", "granted")
        assert stream.next_event(timeout=10).data == "granted"
    finally:
        stream.close()
    status, _, _ = get(server.port, client_context(certs), "/rt/sse?token=" + token,
                       headers=[("Origin", "http://localhost:%d" % server.port)])
    assert status == 403                            # http:// is another origin


def test_broker_delivers_to_a_tls_hold(tls_server, certs, redis):
    server = tls_server("--realtime", "--broker", redis.url)
    stream = SSEStream(server.port, "/events?channel=brk", wrap=wrap_for(certs))
    try:
        assert stream.status == 200
        publish(server, "brk", "via redis")
        assert stream.next_event(timeout=10).data == "via redis"
    finally:
        stream.close()
