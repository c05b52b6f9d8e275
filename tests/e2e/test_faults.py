"""Regressions for issue 7 ("Hardening"): each test names the item it pins and
fails against the code before its fix.

Security and crashes (1-7), realtime (8-10), lifecycle (12-14); item 11 is a
cmocka test (tests/unit/test_bus.c) and item 15 rows in
tests/cases/requests.tsv.
"""

import json
import os
import re
import signal
import socket
import threading
import time
import uuid

import pytest

from rawhttp import Conn, IncompleteResponse, build_request, request
from serverproc import binary_is_sanitized, rss_kb
from sse import SSEStream

FAULT = "fault_app:application"


def worker_pid(server):
    return int(request(server.port, "GET", "/pid").body)


def socket_fds(pid):
    """The socket descriptors open in pid (from /proc)."""
    found = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:"):
            found.append((int(fd), target))
    return found


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid, timeout):
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def conn_avoiding(server, stopped, tries=60):
    """A keep-alive connection served by a worker other than stopped (a
    connection that lands on the stopped worker gets no answer: try again)."""
    for _ in range(tries):
        conn = Conn(server.port, timeout=1)
        try:
            if int(conn.request("GET", "/pid").body) != stopped:
                conn.sock.settimeout(30)
                return conn
        except (OSError, IncompleteResponse):
            pass
        conn.close()
    raise AssertionError("no connection reached a worker other than %d" % stopped)


# ------------------------------------------------------------ 1. headers list

@pytest.mark.parametrize("threads", ["0", "2"])
def test_item1_headers_appended_after_start_response_never_reach_the_wire(start_server, threads):
    server = start_server(FAULT, "--blocking-threads", threads)
    pid = worker_pid(server)
    with Conn(server.port) as idle:           # a bystander connection on the same worker
        assert idle.request("GET", "/pid").status == 200
        with Conn(server.port) as conn:
            conn.send(build_request("GET", "/append-header"))
            conn.sock.settimeout(5)
            raw = b""
            while b"\r\n\r\n" not in raw:
                chunk = conn.sock.recv(65536)
                if not chunk:
                    break
                raw += chunk
        assert b"injected" not in raw and b"X-A" not in raw
        assert raw.startswith(b"HTTP/1.1 200 ")
        response = request(server.port, "GET", "/append-nontuple")
        assert response.status == 200 and response.body == b"ok"
        assert idle.request("GET", "/pid").status == 200     # the worker survived
    assert worker_pid(server) == pid


@pytest.mark.parametrize("kind", ["crlf", "lf", "nul"])
def test_item1_a_header_value_that_would_split_the_response_is_refused(start_server, kind):
    """start_response validates each value when it is called (PEP 3333,
    RFC 9110 §5.5): one that carries CR, LF or NUL is the application's
    error, a 500 with the reason logged; none of it reaches the wire."""
    server = start_server(FAULT)
    response = request(server.port, "GET", "/header-injection?kind=" + kind)
    assert response.status == 500, response
    assert response.header("set-cookie") is None and response.header("x-a") is None
    assert b"injected" not in response.body
    assert server.stderr.wait_for(re.compile(r"invalid header \('X-A'"), 5), server.stderr.text()


# ---------------------------------------------------- 2. SystemExit in a view

@pytest.mark.parametrize("threads", ["0", "2"])
def test_item2_sys_exit_in_a_view_is_a_500_and_the_worker_serves_on(start_server, threads):
    server = start_server(FAULT, "--blocking-threads", threads)
    pid = worker_pid(server)
    for target in ("/exit?code=0", "/exit?code=3", "/kbint", "/exit?code=1", "/exit?code=3"):
        response = request(server.port, "GET", target, timeout=5)
        assert response.status == 500, (target, response)
    with Conn(server.port, timeout=5) as conn:   # after the head: an aborted body, no crash
        conn.send(build_request("GET", "/exit-in-body"))
        with pytest.raises(IncompleteResponse):
            conn.read_response()
    assert worker_pid(server) == pid
    assert server.proc.poll() is None
    assert server.stderr.wait_for(re.compile("SystemExit"), 5)
    assert server.stderr.wait_for(re.compile("KeyboardInterrupt"), 5)


# ------------------------------------------------------------ 3. fork in a view

def test_item3_a_child_forked_by_a_view_holds_no_server_socket(start_server, tmp_path):
    server = start_server(FAULT, "--blocking-threads", "2")
    marker = tmp_path / "child.pid"
    response = request(server.port, "GET", "/fork-sleep?path=%s" % marker)
    assert response.status == 200
    deadline = time.monotonic() + 5
    while not marker.exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    child = int(marker.read_text())
    try:
        assert socket_fds(child) == []     # no listener, no client, no lane, no bus
    finally:
        os.kill(child, signal.SIGKILL)


@pytest.mark.parametrize("threads", ["0", "2"])
def test_item3_a_forked_child_that_returns_into_the_server_exits(start_server, threads):
    server = start_server(FAULT, "--blocking-threads", threads)
    response = request(server.port, "GET", "/fork", timeout=5)
    assert response.status == 200
    child = int(response.body)
    # The check itself stops the child (issue 23 item 19): its own line, in
    # the child's name — not a death by some other route (its descriptors
    # closed, its only thread ending) with errors on the way.
    line = server.stderr.wait_for(re.compile(
        r"\[%d\] \[WARNING\] a process forked by a view \(pid %d\) returned into the server: it exits$"
        % (child, child)), 5)
    assert line, server.stderr.text()
    assert wait_gone(child, 5), "the forked child is still running inside the server"
    from_child = [entry for entry in server.stderr.lines if "[%d]" % child in entry]
    assert from_child == [line.string], from_child      # nothing else, no ERROR line
    assert request(server.port, "GET", "/pid").status == 200


# --------------------------------------------------- 4. one head per response

@pytest.mark.parametrize("threads", ["0", "2"])
def test_item4_write_then_file_wrapper_sends_one_head(start_server, tmp_path, threads):
    server = start_server(FAULT, "--blocking-threads", threads)
    path = tmp_path / "f.bin"
    path.write_bytes(b"0123456789" * 1000)
    with Conn(server.port, timeout=5) as conn:
        response = conn.request("GET", "/write-then-file?path=%s" % path)
        assert response.status == 200
        assert response.body == b"abc" + path.read_bytes()
        assert b"HTTP/1.1" not in response.body
        assert conn.request("GET", "/pid").status == 200     # framing intact: the next one parses


@pytest.mark.parametrize("blocks", [4, 40])
def test_item4_a_refused_hold_never_sends_a_second_head(start_server, tmp_path, blocks):
    server = start_server(FAULT, "--realtime", "--blocking-threads", "2", "--graceful-timeout", "10")
    gate, entered = tmp_path / "gate", tmp_path / "entered"
    with Conn(server.port, timeout=10) as conn:
        conn.send(build_request("GET", "/hold-gated?gate=%s&n=%d&entered=%s" % (gate, blocks, entered)))
        deadline = time.monotonic() + 10
        while not entered.exists():       # the request is in the view, waiting on its gate
            assert time.monotonic() < deadline, server.stderr.text()
            time.sleep(0.01)
        server.signal(signal.SIGTERM)     # the worker drains: it takes no new hold
        assert server.stderr.wait_for(re.compile(r"worker draining"), 10), server.stderr.text()
        gate.write_text("go")
        assert conn.wait_closed(10)
        raw = bytes(conn.buf)
    assert raw.count(b"HTTP/1.1 ") == 1, raw[:200]
    if blocks == 4:                       # held back whole: refused with a lone 503
        assert raw.startswith(b"HTTP/1.1 503 ")
        assert raw.endswith(b"retry\n")
    else:                                 # too long to hold back: its head went out; it ends there
        assert raw.startswith(b"HTTP/1.1 200 ")


# ------------------------------------------------------- 5. write() credit

def test_item5_write_to_a_client_that_does_not_read_is_bounded(start_server):
    server = start_server(FAULT, "--blocking-threads", "2")
    pid = next(iter(server.worker_pids()))
    before = rss_kb(pid)
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(build_request("GET", "/write-flood?mb=300"))
    time.sleep(3)                         # the view writes as fast as it is let
    grown = rss_kb(pid) - before
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()
    if not binary_is_sanitized():         # ASan's quarantine keeps freed memory
        assert grown < 40 * 1024, "worker RSS grew %d kB for a client that reads nothing" % grown
    assert server.stderr.wait_for(re.compile("fault: write raised"), 10)
    assert request(server.port, "GET", "/pid").status == 200


# ------------------------------------------------ 6. /health keeps the timers

def test_item6_health_does_not_disarm_the_header_timeout(start_server):
    """A slow head after /health is cut at the header timeout (1 s), counted
    from its first byte — not at what is left of the keep-alive time (20 s),
    and not at a timer left over from /health's own head."""
    server = start_server(FAULT, "--realtime", "--header-timeout", "1", "--timeout-keep-alive", "20")
    with Conn(server.port, timeout=15) as conn:
        assert conn.request("GET", "/health").status == 200
        time.sleep(0.6)                         # idle: the keep-alive timer, not the head's
        conn.send(b"GET /pid HTTP/1.1\r\n")     # a head that never completes
        began = time.monotonic()
        response = conn.read_response()
        took = time.monotonic() - began
        assert response.status == 408
        assert 0.8 < took < 3, took              # the header timeout from the head's first byte


def test_item6_an_idle_keepalive_after_health_lasts_the_keepalive_timeout(start_server):
    """Issue 23 item 18: after /health the idle connection is bounded by the
    keep-alive timeout (20 s), not the header timeout (1 s)."""
    server = start_server(FAULT, "--realtime", "--header-timeout", "1", "--timeout-keep-alive", "20")
    with Conn(server.port, timeout=15) as conn:
        assert conn.request("GET", "/health").status == 200
        assert not conn.wait_closed(2.5)         # past the header timeout, idle
        assert conn.request("GET", "/pid").status == 200


def test_item6_health_begins_its_own_request(start_server):
    """/health restarts the request's timers and counts like every answer:
    its access-log duration is its own (not measured from the previous
    request on the connection), and it counts itself in "requests"."""
    server = start_server(FAULT, "--realtime", "--access-log", "--access-log-format", "%(U)s %(D)s")
    with Conn(server.port, timeout=15) as conn:
        assert conn.request("GET", "/pid").status == 200
        time.sleep(1.2)                          # the previous request's start is long past
        first = json.loads(conn.request("GET", "/health").body)
        second = json.loads(conn.request("GET", "/health").body)
    assert second["requests"] - first["requests"] == 1
    line = server.stdout.wait_for(re.compile(r"^/health (\d+)$"), 5)
    assert line and int(line.group(1)) < 500000, line.string if line else server.stdout.text()


# ---------------------------------------------------- 7. latin-1 status line

@pytest.mark.parametrize("target", ["/status-nonlatin", "/header-nonlatin"])
def test_item7_status_and_headers_must_be_latin1(start_server, target):
    server = start_server(FAULT)
    response = request(server.port, "GET", target)
    assert response.status == 500
    assert "\u2713".encode() not in response.reason.encode("latin-1")


# ------------------------------------------- 8. holds behind a large fan-out

def test_item8_a_hold_is_never_refused_because_of_another_channels_backlog(start_server):
    server = start_server("realtime_app:application", "--realtime", "--outbox-limit", "64m")
    streams = []
    try:
        for _ in range(1100):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(b"GET /events?channel=busy HTTP/1.1\r\nHost: a\r\n\r\n")
            streams.append(s)
        for s in streams:                 # every one is held before the burst
            s.settimeout(10)
            assert s.recv(12) == b"HTTP/1.1 200"
        burst = threading.Thread(target=request, args=(server.port, "GET", "/publish?channel=busy&n=1500"),
                                 kwargs={"timeout": 60})
        burst.start()
        time.sleep(0.2)
        refused = 0
        for _ in range(5):
            with SSEStream(server.port, "/events?channel=quiet", timeout=20) as quiet:
                refused += quiet.status != 200
        burst.join(60)
        assert refused == 0
    finally:
        for s in streams:
            s.close()


# ----------------------------------------- 9. no worker stalls the publishers

def test_item9_a_stopped_worker_does_not_slow_publishing(start_server):
    server = start_server("realtime_app:application", "--realtime", workers=2)
    pids = server.wait_workers(lambda p: len(p) == 2)
    stopped = min(pids)
    os.kill(stopped, signal.SIGSTOP)
    try:
        # The stopped worker's bus fills: every publish must still return at
        # once. (Before the fix each one waited ~10 ms under the shared lock.)
        with conn_avoiding(server, stopped) as conn:
            began = time.monotonic()
            response = conn.request("GET", "/publish?n=800&size=30000")
            elapsed = time.monotonic() - began
    finally:
        os.kill(stopped, signal.SIGCONT)
    assert response.status == 200
    assert elapsed < 2.0, "800 publishes took %.1f s with one worker stopped" % elapsed


# -------------------------------------- 10. live streams learn of lost events

def test_item10_a_live_stream_is_told_when_its_worker_missed_events(start_server):
    server = start_server("realtime_app:application", "--realtime", "--outbox-limit", "64m", workers=2)
    server.wait_workers(lambda p: len(p) == 2)
    stream = SSEStream(server.port, "/events?channel=lossy")      # held by worker A ...
    held_on = int(re.search(r"worker=(\d+)", stream.next().comment).group(1))
    os.kill(held_on, signal.SIGSTOP)
    try:                                          # ... while B publishes more than A's bus holds
        with conn_avoiding(server, held_on) as conn:
            assert conn.request("GET", "/publish?channel=lossy&n=400&size=60000").status == 200
    finally:
        os.kill(held_on, signal.SIGCONT)
    events = []
    try:
        while True:
            ev = stream.next_event(timeout=5)
            events.append(ev.event)
            if ev.event == "m0-gap":
                break
    except (TimeoutError, socket.timeout):
        pass
    stream.close()
    assert "m0-gap" in events, "the live stream lost events silently (%d received)" % len(events)


# --------------------------------------------------------- 12. zero-downtime

def test_item12_sighup_under_keepalive_load_loses_no_request(start_server):
    server = start_server("conformance:application", "--graceful-timeout", "10", workers=2)
    stop = threading.Event()
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()

    def client():
        conn = None
        while not stop.is_set():
            try:
                if conn is None:
                    conn = Conn(server.port, timeout=10)
                response = conn.request("GET", "/")
                ok = response.status == 200
                if response.header("connection") == "close":
                    conn.close()
                    conn = None
            except (OSError, IncompleteResponse, AssertionError):
                ok = False
                conn = None
            with lock:
                counts["ok" if ok else "failed"] += 1
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(16)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        server.signal(signal.SIGHUP)
        time.sleep(2)
        server.signal(signal.SIGHUP)
        time.sleep(2)
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert counts["ok"] > 500
    assert counts["failed"] == 0, counts


def test_item12_an_idle_keepalive_connection_gets_a_last_moment_when_the_drain_starts(start_server):
    """A request sent on an idle keep-alive connection just as its worker
    starts to drain is answered, with Connection: close, never cut: the
    drain leaves an idle connection M0_DRAIN_IDLE_MS (1 s) to send one, and
    every answer while draining says the connection ends."""
    server = start_server("conformance:application", "--graceful-timeout", "10")
    with Conn(server.port, timeout=10) as conn:
        assert conn.request("GET", "/").status == 200        # kept alive, now idle
        server.signal(signal.SIGTERM)
        assert server.stderr.wait_for(re.compile("worker draining"), 10)
        assert not conn.wait_closed(0.3)                     # inside the last moment
        response = conn.request("GET", "/")
        assert response.status == 200
        assert response.header("connection") == "close"
        assert conn.wait_closed(5)
    assert server.wait(15) == 0


# ------------------------------------------------- 13. a reload that breaks

def test_item13_sighup_with_a_broken_app_keeps_the_old_workers(start_server, tmp_path):
    app = tmp_path / "flaky_app.py"
    marker = tmp_path / "broken"
    app.write_text(
        "import os\n"
        "if os.path.exists(%r):\n"
        "    raise RuntimeError('flaky_app cannot be imported now')\n"
        "def application(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    return [str(os.getpid()).encode()]\n" % str(marker))
    server = start_server("flaky_app:application", app_dir=tmp_path, workers=2)
    before = server.wait_workers(lambda p: len(p) == 2)
    answered = set()
    deadline = time.monotonic() + 10
    while answered != before:            # both workers imported the app and serve
        assert time.monotonic() < deadline, (answered, before)
        answered.add(int(request(server.port, "GET", "/").body))
    marker.write_text("1")
    server.signal(signal.SIGHUP)
    assert server.stderr.wait_for(re.compile("flaky_app cannot be imported now"), 10)
    time.sleep(0.5)
    assert server.proc.poll() is None, "the server stopped on a broken reload"
    assert server.wait_workers(lambda p: p == before)
    assert int(request(server.port, "GET", "/").body) in before
    marker.unlink()
    server.signal(signal.SIGHUP)                 # a good reload replaces them
    after = server.wait_workers(lambda p: len(p) == 2 and not (p & before))
    assert int(request(server.port, "GET", "/").body) in after


# ------------------------------------------- 14. abandoned requests are an error

def test_item14_graceful_timeout_with_requests_abandoned_exits_nonzero(start_server):
    server = start_server("conformance:application", "--graceful-timeout", "1")
    tag = uuid.uuid4().hex
    with Conn(server.port, timeout=15) as conn:
        conn.send(build_request("GET", "/slow?s=8&tag=" + tag))
        assert server.stderr.wait_for(re.compile("slow start tag=" + tag), 10)
        server.signal(signal.SIGTERM)
        assert server.wait(15) == 4


def test_a_worker_that_crashes_while_draining_makes_the_stop_fail(start_server, tmp_path):
    """A worker ended by a signal the master did not send (here SIGABRT) while
    the server drains is a crash: logged as an error, exit status 1, not the
    clean 0 of a drained stop."""
    server = start_server("fault_app:application", "--graceful-timeout", "10")
    gate = tmp_path / "gate"
    with Conn(server.port, timeout=15) as conn:
        conn.send(build_request("GET", "/crash-at-gate?gate=%s" % gate))
        server.signal(signal.SIGTERM)
        assert server.stderr.wait_for(re.compile("shutting down"), 10)
        gate.write_text("go")
        assert server.wait(15) == 1
    assert server.stderr.wait_for(re.compile(r"worker 0 \(pid \d+\) crashed while draining: Aborted"), 5)
    assert server.stderr.wait_for(re.compile("shutdown complete, but a worker crashed while draining"), 5)
