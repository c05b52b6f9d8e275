"""Regressions for what adversarial testing found: trailers never reach
environ, the head limit holds on the read that completes it, timeouts do
what they say, queued work of vanished clients is dropped, endless bodies
stop once enough is sent, SIGHUP twice in a row, response-line rules."""

import json
import re
import signal
import socket
import struct
import threading
import time

import pytest

from rawhttp import Conn, build_request, request


def environ(port, raw):
    with Conn(port) as conn:
        conn.send(raw)
        response = conn.read_response()
    assert response.status == 200, response
    return json.loads(response.body)


def test_chunked_trailers_are_not_merged_into_environ(start_server):
    server = start_server("edge_app:application")
    env = environ(server.port, b"POST /environ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"3\r\nabc\r\n0\r\nContent-Length: 999\r\nContent-Type: application/evil\r\n"
                  b"X-Forwarded-For: 6.6.6.6\r\nAuthorization: Bearer injected\r\n\r\n")
    assert env["CONTENT_LENGTH"] == "3"
    assert "CONTENT_TYPE" not in env
    assert "HTTP_X_FORWARDED_FOR" not in env and "HTTP_AUTHORIZATION" not in env


def test_absolute_form_authority_replaces_host(start_server):
    server = start_server("edge_app:application")
    env = environ(server.port, b"GET http://good.example/environ?x=1 HTTP/1.1\r\nHost: evil.example\r\n\r\n")
    assert env["HTTP_HOST"] == "good.example"
    assert env["PATH_INFO"] == "/environ" and env["QUERY_STRING"] == "x=1"


def test_head_limit_counts_the_read_that_completes_the_head(start_server):
    server = start_server("conformance:application")
    head = b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(
        b"X-Big-%d: %s\r\n" % (i, b"v" * 16000) for i in range(25)) + b"\r\n"
    with Conn(server.port) as conn:
        conn.send_tolerant(head)
        assert conn.read_response().status == 431


def test_body_timeout_is_idle_not_total(start_server):
    server = start_server("conformance:application", "--body-timeout", "1")
    body = b"x" * 12
    with Conn(server.port, timeout=10) as conn:
        conn.send(b"POST /echo/read HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n")
        for i in range(6):               # 2.4 s in total, never idle for 1 s
            time.sleep(0.4)
            conn.send(body[2 * i:2 * i + 2])
        assert conn.read_response().body == body
    with Conn(server.port, timeout=10) as conn:
        conn.send(b"POST /echo/read HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\nxx")
        assert conn.read_response().status == 408    # stalled for over 1 s


def test_a_request_started_late_in_keepalive_gets_the_full_head_timeout(start_server):
    server = start_server("conformance:application", "--timeout-keep-alive", "1.5", "--header-timeout", "1.5")
    with Conn(server.port, timeout=10) as conn:
        assert conn.request("GET", "/").status == 200
        time.sleep(1.0)                  # most of the keep-alive time is gone
        conn.send(b"GET / HTTP/1.1\r\n")
        time.sleep(0.8)                  # the head takes longer than what was left
        conn.send(b"Host: a\r\n\r\n")
        assert conn.read_response().status == 200


def test_queued_requests_of_vanished_clients_are_not_run(start_server):
    server = start_server("conformance:application", "--blocking-threads", "1")
    busy = threading.Thread(target=request, args=(server.port, "GET", "/slow?s=1&tag=busy"), daemon=True)
    busy.start()
    assert server.stderr.wait_for(__import__("re").compile("slow start tag=busy"), 10)
    for i in range(20):                  # queue 20 x 0.2 s, then reset each client
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"GET /slow?s=0.2&tag=gone%d HTTP/1.1\r\nHost: a\r\n\r\n" % i)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    began = time.monotonic()
    assert request(server.port, "GET", "/", timeout=15).status == 200
    assert time.monotonic() - began < 2.5    # not 1 s + 20 x 0.2 s
    busy.join(10)
    assert "tag=gone" not in server.stderr.text()


def test_endless_bodies_stop_once_enough_is_sent(start_server):
    server = start_server("edge_app:application")
    assert request(server.port, "GET", "/endless-declared", timeout=5).body == b"xyxyx"
    head = request(server.port, "HEAD", "/endless", timeout=5)
    assert head.status == 200 and head.body == b""
    with Conn(server.port, timeout=5) as conn:     # and the connection is still usable
        assert conn.request("HEAD", "/endless").status == 200
        assert conn.request("GET", "/environ").status == 200


def test_response_line_and_connection_rules(start_server):
    server = start_server("edge_app:application")
    response = request(server.port, "GET", "/no-reason")
    assert (response.status, response.reason) == (200, "OK")
    with Conn(server.port, timeout=5) as conn:
        assert conn.request("GET", "/connection-list").status == 200
        assert conn.wait_closed(2)
    assert request(server.port, "GET", "/informational").status == 500
    head = request(server.port, "HEAD", "/" + "a" * 9000)      # a C-generated error to HEAD
    assert head.status == 414 and head.body == b""


@pytest.mark.parametrize("status, raw", [
    (414, b"HEAD /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n"),
    (431, b"HEAD / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"x" * 20000 + b"\r\n\r\n"),
    (400, b"HEAD / HTTP/1.1\r\nHost: a\r\nX@Bad: b\r\n\r\n"),
    (400, b"HEAD / HTTP/1.1\r\n\r\n"),
    (408, b"HEAD / HTTP/1.1\r\nHost: a\r\n"),
], ids=["414", "431", "bad-field", "no-host", "408"])
def test_an_error_the_server_answers_to_head_has_no_content(start_server, status, raw):
    """RFC 9110 §9.3.2: a response to HEAD has no content, the server's own
    refusals too, whenever in the head they come. Read to the close, since
    a client that asked HEAD does not read a body (it would see none)."""
    server = start_server("edge_app:application", "--header-timeout", "0.5")
    with Conn(server.port, timeout=5) as conn:
        conn.send_tolerant(raw)
        assert conn.wait_closed(5)
        sent = bytes(conn.buf)
    assert sent.startswith(b"HTTP/1.1 %d " % status), sent[:200]
    assert b"\r\nContent-Length: " in sent and sent.endswith(b"\r\n\r\n"), sent


def test_two_sighups_with_a_request_in_flight_keep_a_worker(start_server):
    server = start_server("conformance:application", "--graceful-timeout", "10")
    slow = threading.Thread(target=request, args=(server.port, "GET", "/slow?s=3"), kwargs={"timeout": 20},
                            daemon=True)
    slow.start()
    assert server.stderr.wait_for(__import__("re").compile("slow start"), 10)
    server.signal(signal.SIGHUP)
    time.sleep(0.5)
    server.signal(signal.SIGHUP)
    slow.join(20)
    deadline = time.monotonic() + 10
    while True:                          # the old generations drain; one worker stays
        pids = server.worker_pids()
        if len(pids) == 1:
            break
        assert time.monotonic() < deadline, pids
        time.sleep(0.05)
    assert request(server.port, "GET", "/", timeout=10).status == 200


# ------------------------------------------- answers given in C, from the head
# Issue 27, items 1 and 4: every listener answered in C decides from the head
# alone. A request it answers without the body gets its answer at once (no
# 100 Continue, not a byte of the body read or spooled — a 1 GB
# Content-Length is answered before it is sent) and the connection closes
# after it; HEAD, pipelining and a chunked body behave as on any listener;
# the application is never called.

GRANT_KEY = "k1-secret-0123456789abcdefghijklmnop"
GRIP_KEY = "grip-secret-0123456789abcdefghijklmnop"


def answered_from_the_head(port, raw, method="POST"):
    with Conn(port, timeout=5) as conn:
        conn.send(raw)
        r = conn.read_response(method)
        assert r.status != 100, r
        assert (r.header("connection") or "").lower() == "close", r
        assert conn.wait_closed(5)
    return r


def test_every_listener_answered_in_c_refuses_before_reading(start_server, tmp_path):
    import re

    from serverproc import free_port

    grants = tmp_path / "grant.keys"
    grants.write_text("k1 %s\n" % GRANT_KEY)
    grip = tmp_path / "grip.key"
    grip.write_text(GRIP_KEY + "\n")
    for f in (grants, grip):
        f.chmod(0o600)
    files = tmp_path / "files"
    files.mkdir()
    (files / "f.txt").write_text("static\n")
    calls = tmp_path / "calls"
    cport = free_port()
    server = start_server("metrics_app", "--realtime", "--metrics-bind", "127.0.0.1:0", "--metrics-path", "/_m",
                          "--grant-key-file", str(grants), "--grant-path", "/rt", "--grip-key-file", str(grip),
                          "--grip-control", "127.0.0.1:%d" % cport, "--static", "/s=%s" % files,
                          env={"METRICS_APP_CALLS": str(calls)})
    mport = int(server.stderr.wait_for(re.compile(r"metrics at http://127\.0\.0\.1:(\d+)/"), 5).group(1))
    before = calls.read_text() if calls.exists() else ""
    endpoints = [  # (what, port, path, GET's status, a bodiless POST's status)
        ("metrics port", mport, "/_m", 200, 405),
        ("metrics port, another path", mport, "/hello", 404, 404),
        ("metrics path", server.port, "/_m", 200, 405),
        ("health", server.port, "/health", 200, 200),
        ("grant", server.port, "/rt/sse", 401, 405),
        ("GRIP control", cport, "/", 200, 200),
        ("GRIP publish", cport, "/publish/", 405, 401),
        ("static", server.port, "/s/f.txt", 200, 405),
    ]
    for what, port, path, get_status, post_status in endpoints:
        assert request(port, "GET", path).status == get_status, what
        assert request(port, "POST", path, body=b"").status == post_status, what
        with Conn(port, timeout=5) as conn:          # HEAD, then pipelining, on one connection
            r = conn.request("HEAD", path)
            assert (r.status, r.body) == (405 if what == "grant" else get_status, b""), what   # grants: Allow: GET
            conn.send(build_request("GET", path) + build_request("GET", path))
            assert [conn.read_response().status for _ in range(2)] == [get_status] * 2, what
        huge = b"Content-Length: 1000000000\r\n"
        for extra in (b"Expect: 100-continue\r\n" + huge, huge, b"Transfer-Encoding: chunked\r\n"):
            raw = b"POST %s HTTP/1.1\r\nHost: a\r\n%s\r\n" % (path.encode(), extra)
            if b"chunked" in extra:
                raw += b"ffffff\r\nsome of it"
            assert answered_from_the_head(port, raw).status == post_status, (what, extra)
        # A GET with content is answered from its head too (a grant's is a 400:
        # it cannot be held with bytes unread).
        raw = b"GET %s HTTP/1.1\r\nHost: a\r\nContent-Length: 1000000000\r\n\r\n" % path.encode()
        assert answered_from_the_head(port, raw, "GET").status == (400 if what == "grant" else get_status), what
    assert (calls.read_text() if calls.exists() else "") == before      # never the application


# ------------------------------------------------- credentials in the error log

SLOW_START = re.compile(r"conformance: slow start tag=busy\b")


def test_error_log_lines_redact_tokens(start_server):
    """Issue 27 item 3: the traceback line of a view that raises and the
    --request-timeout lines ("still running", "503 ... still queued") print
    the target as the access log does: token and access_token REDACTED."""
    server = start_server("conformance:application", "--blocking-threads", "1", "--request-timeout", "0.5")
    r = request(server.port, "GET", "/error/before?token=SECRET1.x.y&access_token=SECRET2&k=v")
    assert r.status == 500
    assert server.stderr.wait_for(re.compile(
        r"error .*GET /error/before\?token=REDACTED&access_token=REDACTED&k=v; traceback follows"), 5)
    busy = threading.Thread(target=request, args=(server.port, "GET", "/slow?s=2&tag=busy&token=SECRET3"),
                            kwargs={"timeout": 30}, daemon=True)
    busy.start()
    assert server.stderr.wait_for(SLOW_START, 10)
    assert request(server.port, "GET", "/?access_token=SECRET4", timeout=10).status == 503
    busy.join(30)
    assert server.stderr.wait_for(re.compile(r"503 for GET /\?access_token=REDACTED: still queued"), 5)
    assert server.stderr.wait_for(re.compile(
        r"view still running after .* GET /slow\?s=2&tag=busy&token=REDACTED$", re.M), 5)
    inline = start_server("conformance:application", "--blocking-threads", "0", "--request-timeout", "0.2")
    assert request(inline.port, "GET", "/slow?s=0.4&token=SECRET5", timeout=10).status == 200
    assert inline.stderr.wait_for(re.compile(r"over --request-timeout\): GET /slow\?s=0.4&token=REDACTED"), 5)
    for text in (server.stderr.text(), inline.stderr.text()):
        assert "SECRET" not in text, text


def test_a_decoded_path_cannot_forge_a_debug_line(start_server):
    """Issue 27 item 5: the ASGI executor's debug line prints the decoded
    path (scope["path"]): a %0A in it is written as \\n, not a new line."""
    server = start_server("asgi_raw:app", "--log-level", "debug")
    forged = "[2026-12-05 00:00:00 +0000] [1] [ERROR] forged"
    with Conn(server.port) as conn:
        conn.send(b"GET /wait-disconnect/%0A" + forged.replace(" ", "%20").encode()
                  + b"%1B?tag=fg HTTP/1.1\r\nHost: a\r\n\r\n")
        # The view waits for the client to leave once its slot runs (the
        # first RUN was the start-up probe's).
        runs = re.compile(r"\[DEBUG\] slot \d+ \(h1\): READ_BODY -> RUN")
        deadline = time.monotonic() + 5
        while len(runs.findall(server.stderr.text())) < 2:
            assert time.monotonic() < deadline, server.stderr.text()
            time.sleep(0.01)
    assert server.stderr.wait_for(re.compile(r"asgi: left before the answer tag=fg"), 10)
    line = server.stderr.wait_for(re.compile(r"/wait-disconnect/\\n\[2026.*forged\\x1b: the client left"), 10)
    assert line, server.stderr.text()
    assert not any(l.startswith(forged) for l in server.stderr.text().split("\n"))


def test_a_second_sighup_boots_while_the_first_generation_still_drains(start_server):
    """Repeated SIGHUPs grow the master's table of workers: the third
    generation boots at once, while the first still drains its request —
    not once that request is done and a place in the table is free."""
    server = start_server("conformance:application", "--graceful-timeout", "20")
    done = threading.Event()

    def slow():
        request(server.port, "GET", "/slow?s=8&tag=draining", timeout=30)
        done.set()
    threading.Thread(target=slow, daemon=True).start()
    assert server.stderr.wait_for(re.compile("slow start tag=draining"), 10)
    booted = re.compile("SIGHUP: new workers booted")
    server.signal(signal.SIGHUP)
    assert server.stderr.wait_for(booted, 10)
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while len(booted.findall(server.stderr.text())) < 2:
        assert time.monotonic() < deadline, server.stderr.text()
        time.sleep(0.05)
    assert not done.is_set()             # the first generation still drains it
    assert done.wait(20)
    assert request(server.port, "GET", "/", timeout=10).status == 200
