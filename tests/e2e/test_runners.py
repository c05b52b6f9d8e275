"""Regressions for issue 23 (runners, hooks, failure paths, lifespan, ASGI
logging): each test names the item it pins and fails against the code
before its fix.
"""

import re
import shutil
import signal
import socket
import struct
import tempfile
import time

import pytest

from rawhttp import Conn, request, wait_read_by_peer
from redisproc import Redis
from serverproc import APPS_DIR, StreamCollector, kill_group, run_to_exit, spawn

RUNNER = "runner_app:application"


def wait_file(path, timeout):
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# ------------------------------------- 3. abandon holds a Python thread state

def test_item3_inline_hold_refused_while_draining_closes_with_a_thread_state(start_server, tmp_path):
    """--blocking-threads 0 --realtime: a hold whose body is over 1 MiB, run
    on the loop thread while the worker drains, is refused; the runner is
    abandoned — close() runs, attached to the interpreter."""
    server = start_server(RUNNER, "--realtime", "--blocking-threads", "0", "--graceful-timeout", "10")
    mark = tmp_path / "closed"
    with Conn(server.port, timeout=10) as conn:
        # Half a head: the connection is in a request when the drain starts.
        conn.send(b"GET /hold-big?n=40&mark=%s HTTP/1.1\r\nHost: a\r\n" % str(mark).encode())
        assert wait_read_by_peer(conn.sock, 10)          # the loop has it: in a request
        server.signal(signal.SIGTERM)
        assert server.stderr.wait_for(re.compile("worker draining"), 10), server.stderr.text()
        conn.send(b"\r\n")
        assert conn.wait_closed(10)
        raw = bytes(conn.buf)
    # Its head was still with the loop: refused with one 503, nothing else.
    assert raw.startswith(b"HTTP/1.1 503 ") and raw.count(b"HTTP/1.1 ") == 1, raw[:200]
    assert wait_file(mark, 10), "close() was not called; stderr:\n" + server.stderr.text()
    assert server.wait(15) == 0, server.stderr.text()
    text = server.stderr.text()
    assert "hold on big not taken (worker draining)" in text, text
    assert "Fatal Python error" not in text and "AddressSanitizer" not in text, text
    assert "died" not in text and "signal" not in text.split("worker draining", 1)[1], text


def test_item3_inline_stream_left_by_its_client_is_closed(start_server, tmp_path):
    """The other inline abandon: a stream over 1 MiB on the loop thread whose
    client leaves mid-body — close() runs, and the worker serves on."""
    server = start_server(RUNNER, "--blocking-threads", "0")
    pid = next(iter(server.worker_pids()))
    mark = tmp_path / "closed"
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(b"GET /big?n=400&mark=%s HTTP/1.1\r\nHost: a\r\n\r\n" % str(mark).encode())
    assert sock.recv(5) == b"HTTP/"
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()                          # an RST: the client is gone mid-body
    assert wait_file(mark, 10), "close() was not called; stderr:\n" + server.stderr.text()
    assert int(request(server.port, "GET", "/pid").body) == pid, server.stderr.text()


# --------------------------------------- 4. any number of loop hooks; booted

def assert_worker_serves(server, paths, body):
    pids = server.worker_pids()
    for path in paths:
        response = request(server.port, "GET", path)
        assert (response.status, response.body) == (200, body), (path, server.stderr.text())
    assert server.worker_pids() == pids, server.stderr.text()
    text = server.stderr.text()
    assert "BUG" not in text and "signal" not in text and "restarting" not in text, text


def test_item4_nine_asgi_mounts_boot_and_serve(start_server):
    """One loop hook per ASGI mount: nine of them used to abort the worker
    at boot (a fixed table of 8)."""
    mounts = []
    for i in range(9):
        mounts += ["--mount", "/m%d=asgi_only:app" % i]
    server = start_server(None, *mounts)
    assert_worker_serves(server, ["/m%d/x" % i for i in range(9)], b"asgi")


@pytest.fixture
def redis():
    tmp = tempfile.mkdtemp(prefix="m0redis.")     # short: a unix socket path has 108 bytes
    server = Redis(tmp, persist=False).start()
    yield server
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def test_item4_asgi_mounts_with_realtime_broker_serve_after_go(start_server, redis):
    """Five ASGI mounts, a WSGI root with its pool, --realtime --broker: the
    bus and broker hooks made nine once the master said go — after the worker
    had reported booted — and the worker aborted, again and again."""
    mounts = []
    for i in range(5):
        mounts += ["--mount", "/m%d=asgi_only:app" % i]
    server = start_server(RUNNER, *mounts, "--realtime", "--broker", redis.url)
    assert_worker_serves(server, ["/m%d/x" % i for i in range(5)], b"asgi")
    pid = next(iter(server.worker_pids()))
    assert request(server.port, "GET", "/pid").body == str(pid).encode()


# ------------------------------------------- 7. a lifespan startup that hangs

def test_item7_a_lifespan_startup_that_never_completes_times_out(tmp_path):
    cancelled = tmp_path / "cancelled"
    began = time.monotonic()
    rc, err = run_to_exit(["asgi_lifespan_hang:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                           "--lifespan-timeout", "6"], timeout=30,
                          env={"LIFESPAN_CANCELLED_LOG": str(cancelled)})
    took = time.monotonic() - began
    assert rc == 1, err
    assert 5.5 < took < 20, (took, err)
    # While it waits: a warning (every 5 s) that names lifespan.
    assert re.search(r"\[WARNING\] asgi_lifespan_hang:app: ASGI lifespan startup has not completed after 5 s", err), err
    # The reason, one line naming lifespan and the flag; no traceback.
    reason = [line for line in err.splitlines() if "[ERROR]" in line and "lifespan" in line]
    assert len(reason) == 1 and "--lifespan-timeout" in reason[0], err
    assert "Traceback" not in err and "CancelledError" not in err, err
    assert cancelled.read_text() == "cancelled"      # the app's startup task was cancelled


def test_item7_lifespan_timeout_is_a_flag_with_an_environment_variable():
    rc, err = run_to_exit(["asgi_lifespan_hang:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                           "--lifespan-timeout", "soon"])
    assert rc == 2 and "--lifespan-timeout" in err and len(err.strip().splitlines()) == 1, err
    began = time.monotonic()
    rc, err = run_to_exit(["asgi_lifespan_hang:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0"],
                          env={"M0_LIFESPAN_TIMEOUT": "1"})
    assert rc == 1 and "lifespan" in err and time.monotonic() - began < 10, err


def test_item7_sigterm_while_lifespan_startup_is_pending_stops_at_once():
    """Nothing was served: the stop is not held for the graceful timeout nor
    reported as requests in flight (exit 4)."""
    proc = spawn(["asgi_lifespan_hang:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                  "--graceful-timeout", "20"])
    try:
        err = StreamCollector(proc.stderr)
        assert err.wait_for(re.compile(r"booting worker 0"), 10), err.text()
        time.sleep(0.5)                   # the worker is inside lifespan startup
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0, err.text()
        assert time.monotonic() - began < 5, err.text()
        err.join(5)
        assert "still in flight" not in err.text() and "killing" not in err.text(), err.text()
    finally:
        kill_group(proc)
        proc.wait(5)


# ------------------------------------ 12. an ASGI body past its Content-Length

@pytest.mark.parametrize("parts", [1, 3])
def test_item12_asgi_body_past_content_length_is_cut_with_a_warning(start_server, parts):
    server = start_server("runner_asgi:app")
    with Conn(server.port, timeout=5) as conn:
        response = conn.request("GET", "/overlong?parts=%d" % parts)
        assert response.status == 200 and response.body == b"hello"
        assert conn.request("GET", "/pid").status == 200     # nothing past the length: framing intact
    line = server.stderr.wait_for(re.compile(r"\[WARNING\] GET /overlong\?parts=%d: body exceeds "
                                             r"Content-Length 5; truncated" % parts), 5)
    assert line, server.stderr.text()
    assert server.stderr.text().count("body exceeds Content-Length") == 1, server.stderr.text()


# ------------------------- 13. a client that leaves an ASGI stream is no error

def leave_mid_stream(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
    got = b""
    while len(got) < 256 * 1024:
        piece = sock.recv(65536)
        assert piece, got[:200]
        got += piece
    assert got.startswith(b"HTTP/1.1 200 ")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()                          # the client leaves mid-stream (RST)


def log_until_mark(server, text):
    """The server's log up to the line a /mark request writes: everything
    the worker logged before it answered that request."""
    assert request(server.port, "GET", "/mark?text=%s" % text).body == b"ok"
    assert server.stderr.wait_for(re.compile("runner: %s" % text), 5), server.stderr.text()
    return server.stderr.text().split("runner: %s" % text, 1)[0]


@pytest.mark.parametrize("level", ["info", "debug"])
def test_item13_client_leaving_a_starlette_stream_is_not_an_error(start_server, tmp_path, level):
    """Starlette's StreamingResponse turns the failed send into ClientDisconnect."""
    mark = tmp_path / "closed"
    server = start_server("runner_asgi:starlette_app", "--log-level", level, env={"STREAM_MARK": str(mark)})
    leave_mid_stream(server.port)
    assert wait_file(mark, 10), server.stderr.text()
    time.sleep(0.2)                       # the window for a line that must not come (its task unwinds)
    before = log_until_mark(server, "after-stream")
    assert "[ERROR]" not in before and "Traceback" not in before, before
    left = re.findall(r"\[DEBUG\] GET /stream: the client left.*", before)
    assert len(left) == (1 if level == "debug" else 0), before
    if level == "debug":
        assert "ClientDisconnect" in left[0]


def test_item13_client_leaving_a_django_stream_is_not_an_error(start_server):
    """Django's ASGIHandler cancels the response on http.disconnect and returns
    without completing it."""
    server = start_server("runner_django:application", "--log-level", "debug")
    leave_mid_stream(server.port)
    assert server.stderr.wait_for(re.compile(r"GET /stream: the client left"), 10), server.stderr.text()
    before = log_until_mark(server, "after-django")
    assert "[ERROR]" not in before and "Traceback" not in before, before
    assert len(re.findall(r"\[DEBUG\] GET /stream: the client left", before)) == 1, before


def test_item13_app_errors_while_the_client_is_connected_are_still_errors(start_server):
    server = start_server("runner_asgi:starlette_app")
    with Conn(server.port, timeout=5) as conn:
        conn.send(b"GET /boom HTTP/1.1\r\nHost: a\r\n\r\n")
        assert conn.wait_closed(5)        # its head went out: the connection is aborted
    assert server.stderr.wait_for(re.compile(r"\[ERROR\] .*application raised"), 5), server.stderr.text()
    assert server.stderr.wait_for(re.compile(r"RuntimeError: boom \(test\)"), 5), server.stderr.text()
    assert request(server.port, "GET", "/boom-before").status == 500
    assert server.stderr.wait_for(re.compile(r"RuntimeError: boom-before \(test\)"), 5), server.stderr.text()
    assert server.stderr.text().count("Traceback") >= 2, server.stderr.text()
