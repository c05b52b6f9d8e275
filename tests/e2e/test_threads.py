"""Python in parallel in one worker on a free-threaded build (issue 17).

Run by `make smoke-threads` (part of `make test`): the m0serve built for
`make python-ft`'s interpreter (M0SERVE) and this file run by a virtualenv
of that interpreter (requirements/threads.txt), so the server embeds it.
Skipped when the Python running it is not a free-threaded build (the
ordinary e2e run), or when M0SERVE is not the binary built for it.

- sys._is_gil_enabled() is False inside a WSGI and an ASGI view, without
  PYTHON_GIL=0 (m0 and _m0asgi declare Py_MOD_GIL_NOT_USED);
- two views of one worker meet at a threading.Barrier;
- two views of one worker spin in pure Python at the same moment (with a
  GIL and a long switch interval the second could not start until the
  first gave up);
- Django and Flask pages and Starlette routes are served by the
  free-threaded build;
- --threads 2: each loop answers (WSGI and ASGI), a view blocking one loop
  leaves the other served, a publish reaches the holds of both loops with
  one id, /health sums the loops and lists each (a publish counted once),
  SIGTERM drains both, a SIGHUP while a view runs on one loop leaves no
  new connection waiting for it (the successor takes every loop's socket),
  --max-requests counts the process; over TLS (issue 31) each loop does its
  own handshakes and holds, and a session resumes on either.
"""

import json
import re
import sys
import sysconfig
import threading
import time

import pytest

from rawhttp import request
from serverproc import APPS_DIR, BINARY, run_to_exit

if not sysconfig.get_config_var("Py_GIL_DISABLED"):
    pytest.skip("not a free-threaded Python: run by `make smoke-threads`, in a virtualenv of the interpreter "
                "`make python-ft` builds", allow_module_level=True)


def _get_json(port, target):
    r = request(port, "GET", target, timeout=30)
    return r.status, json.loads(r.body)


def _together(port, target, n):
    """n GETs of target on n connections at once; [(status, json)]."""
    out = [None] * n

    def one(i):
        out[i] = _get_json(port, target)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(o is not None for o in out), out
    return out


def test_the_binary_is_built_for_this_interpreter():
    import subprocess
    r = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and "free-threaded" in r.stdout, (BINARY, r.stdout, r.stderr)
    assert sys.version.split()[0] in r.stdout, r.stdout


@pytest.mark.parametrize("app", ["threads_app:app", "ft_hello_asgi:app"])
def test_the_gil_is_off_inside_a_view(start_server, app):
    s = start_server(app)
    status, seen = _get_json(s.port, "/gil")
    assert status == 200 and seen["gil_enabled"] is False, seen
    assert "GIL disabled" in s.stderr.text() and "has not declared" not in s.stderr.text()


def test_two_views_meet_at_a_barrier_on_one_worker(start_server):
    s = start_server("threads_app:app", "--blocking-threads", "2")
    got = _together(s.port, "/barrier?n=2", 2)
    assert [st for st, _ in got] == [200, 200], got
    assert len({seen["pid"] for _, seen in got}) == 1 and len({seen["thread"] for _, seen in got}) == 2, got


def test_header_names_new_to_two_threads_at_once(start_server):
    """Two handler threads build environs with the same 40 header names, none
    seen before, at once: both see every header under its CGI key (the
    environ's key cache is shared by the threads; `make tsan` checks it)."""
    s = start_server("threads_app:app", "--blocking-threads", "2")
    names = ["X-Fresh-%02d" % i for i in range(40)]
    out = [None] * 2

    def one(i):
        hdrs = [(n, "%s-%d" % (n, i)) for n in names]
        r = request(s.port, "GET", "/barrier?n=2", headers=hdrs, timeout=30)
        out[i] = (r.status, json.loads(r.body))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, (status, seen) in enumerate(out):
        want = {"HTTP_" + n.upper().replace("-", "_"): "%s-%d" % (n, i) for n in names}
        assert status == 200 and seen["headers"] == want, seen
    assert len({seen["thread"] for _, seen in out}) == 2, out


def test_two_views_run_python_at_the_same_moment(start_server):
    s = start_server("threads_app:app", "--blocking-threads", "2")
    got = _together(s.port, "/spin?n=2", 2)
    assert len({seen["pid"] for _, seen in got}) == 1, got
    assert [seen["met"] for _, seen in got] == [True, True], got


def test_django_page(start_server):
    s = start_server("django_stream:application", "--blocking-threads", "2")
    r = request(s.port, "GET", "/page")
    assert (r.status, r.body) == (200, b"a page")


def test_flask_page(start_server):
    s = start_server("flask_stream:app", "--blocking-threads", "2")
    r = request(s.port, "GET", "/page")
    assert r.status == 200 and r.body, r


def test_starlette_routes(start_server):
    s = start_server("starlette_app:app")
    status, seen = _get_json(s.port, "/json")
    assert status == 200 and seen["ok"] is True and seen["path"] == "/json", seen
    status, seen = _get_json(s.port, "/items/42")
    assert (status, seen) == (200, {"item_id": "42"})


# ------------------------------------------------------------ --threads N


def _loop_of(conn, target="/gil"):
    """The loop that serves the keep-alive connection conn (the view says)."""
    r = conn.request("GET", target)
    assert r.status == 200, r
    return json.loads(r.body)


def _conns_on_every_loop(port, n, limit=64):
    """Keep-alive connections until each of n loops has one: {loop: Conn}.
    The kernel picks a loop per connection at random (one SO_REUSEPORT
    socket per loop), so limit connections miss a loop with odds 2^-63."""
    from rawhttp import Conn
    got, spare = {}, []
    for _ in range(limit):
        c = Conn(port, timeout=30)
        seen = _loop_of(c)
        if seen["loop"] in got:
            spare.append(c)
        else:
            got[seen["loop"]] = c
        if len(got) == n:
            break
    for c in spare:
        c.close()
    assert sorted(got) == list(range(n)), sorted(got)
    return got


@pytest.mark.parametrize("app", ["threads_app:app", "ft_hello_asgi:app"])
def test_requests_are_answered_by_each_loop(start_server, app):
    """--threads 2: one process, two loops, each answering on its own
    threads (WSGI: each loop's pool; ASGI: each loop's executor)."""
    pool = ("--blocking-threads", "1") if app.startswith("threads_app") else ()
    s = start_server(app, "--threads", "2", *pool)
    conns = _conns_on_every_loop(s.port, 2)
    seen = {loop: _loop_of(c) for loop, c in conns.items()}
    for c in conns.values():
        c.close()
    assert {v["loop"] for v in seen.values()} == {0, 1}
    assert len({v["thread"] for v in seen.values()}) == 2, seen
    assert all(v["gil_enabled"] is False for v in seen.values()), seen
    # The worker says it once its loops run; a loop may answer before the
    # line reaches the collector (it was read too early once under load).
    assert s.stderr.wait_for(re.compile(r"2 event loops"), 10) is not None, s.stderr.text()
    if app.startswith("threads_app"):
        assert len({v["pid"] for v in seen.values()}) == 1, seen


def test_a_view_blocked_on_one_loop_leaves_the_other_loops_served(start_server, tmp_path):
    """Views inline on the loop threads (--blocking-threads 0): a view that
    sleeps 3 s blocks its own loop only; a connection on the other loop is
    answered meanwhile."""
    s = start_server("threads_app:app", "--threads", "2", "--blocking-threads", "0")
    conns = _conns_on_every_loop(s.port, 2)
    blocked = conns[0]
    mark = tmp_path / "in-view"
    blocked.send(b"GET /sleep?ms=3000&mark=%s HTTP/1.1\r\nHost: x\r\n\r\n" % str(mark).encode())
    _stalled_since(mark, 0.0)    # loop 0 is inside the view
    t0 = time.monotonic()
    for _ in range(5):
        assert _loop_of(conns[1])["loop"] == 1
    took = time.monotonic() - t0
    assert took < 1.5, took       # five answers while loop 0 sleeps 3 s
    r = blocked.read_response("GET")
    assert r.status == 200 and json.loads(r.body)["loop"] == 0
    for c in conns.values():
        c.close()


def _read_until(sock, needle, timeout):
    deadline = time.monotonic() + timeout
    buf = b""
    while needle not in buf:
        left = deadline - time.monotonic()
        assert left > 0, buf
        sock.settimeout(left)
        chunk = sock.recv(65536)
        assert chunk, buf
        buf += chunk
    return buf


def _streams_on_every_loop(port, channel="news", last_id=None):
    """Held SSE streams (threads_app's /stream) until both loops hold some:
    [(loop, socket, bytes read so far)]."""
    import socket
    streams, loops = [], set()
    extra = b"Last-Event-ID: %d\r\n" % last_id if last_id is not None else b""
    for _ in range(64):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"GET /stream?channel=%s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (channel.encode(), extra))
        head = _read_until(sock, b"\n\n", 10)
        while re.search(rb": loop (\d+)\n\n", head) is None:
            head += _read_until(sock, b"\n\n", 10)
        loop = int(re.search(rb": loop (\d+)\n\n", head).group(1))
        loops.add(loop)
        streams.append((loop, sock, head))
        if loops == {0, 1} and len(streams) >= 4:
            break
    assert loops == {0, 1}, loops
    return streams


@pytest.mark.parametrize("broker", [False, True], ids=["bus", "broker"])
def test_a_publish_reaches_the_holds_of_every_loop_with_one_id(start_server, request, broker):
    """Held streams on both loops of one worker: one m0pub.publish from a
    view reaches them all, numbered once (one bus endpoint per loop; with
    --broker, one reader of the Redis log per loop)."""
    args = ["--realtime"] + (["--broker", request.getfixturevalue("redis").url] if broker else [])
    s = start_server("threads_app:app", "--threads", "2", *args)
    streams = _streams_on_every_loop(s.port)
    status, seen = _get_json(s.port, "/publish?channel=news")
    assert status == 200 and seen["id"] > 0, seen
    want = b"id: %d\ndata: hello\n\n" % seen["id"]
    for _, sock, _ in streams:
        assert want in _read_until(sock, want, 10)
        sock.close()


def test_last_event_id_resumes_on_either_loop(start_server):
    """Each loop journals every event: a client that reconnects with
    Last-Event-ID gets what it missed whichever loop it lands on."""
    s = start_server("threads_app:app", "--threads", "2", "--realtime")
    ids = [_get_json(s.port, "/publish?channel=log")[1]["id"] for _ in range(3)]
    streams = _streams_on_every_loop(s.port, "log", last_id=ids[0])
    for loop, sock, got in streams:
        want = b"id: %d\ndata: hello\n\nid: %d\ndata: hello\n\n" % (ids[1], ids[2])
        if want not in got:
            got += _read_until(sock, want, 10)
        assert want in got and b"id: %d\n" % ids[0] not in got, (loop, got)
        sock.close()


def test_sighup_replaces_the_process_whole(start_server):
    """SIGHUP: a new worker process with both its loops, the old one drained."""
    import signal
    s = start_server("threads_app:app", "--threads", "2")
    first = {_get_json(s.port, "/gil")[1]["pid"]}
    s.signal(signal.SIGHUP)
    deadline = time.monotonic() + 30
    pids = set()
    while time.monotonic() < deadline:
        pid = _get_json(s.port, "/gil")[1]["pid"]
        if pid not in first:
            pids.add(pid)
            break
    assert pids, s.stderr.text()
    conns = _conns_on_every_loop(s.port, 2)
    assert {_loop_of(c)["pid"] for c in conns.values()} == pids
    for c in conns.values():
        c.close()


def _conn_on_loop(port, loop, limit=64):
    """A keep-alive connection that loop `loop` of some worker serves (the
    others tried are closed): (Conn, what its view said)."""
    from rawhttp import Conn
    for _ in range(limit):
        c = Conn(port, timeout=30)
        seen = _loop_of(c)
        if seen["loop"] == loop:
            return c, seen
        c.close()
    raise AssertionError("no connection reached loop %d in %d tries" % (loop, limit))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_reload_while_a_view_runs_on_one_loop_answers_every_new_connection(start_server, tmp_path, workers):
    """SIGHUP while a view runs on loop 1 of a worker whose loop 0 is idle:
    loop 0 drains at once, loop 1 once it has seen the drain, and the
    successor takes the slot's sockets as soon as both have let go. The
    first loop speaks to the master for them all: it must stay until every
    loop has said 'R', or the master hears it only when the old process
    exits (after the view) and the connections steered to the slot's
    sockets meanwhile wait in their accept queues. Three reloads in a row:
    every connection made once the old worker drains is answered within
    2 s, the view is still running (20 s at most, far under the graceful
    timeout) and answers when released."""
    import signal
    s = start_server("threads_app:app", "--threads", "2", "--workers", str(workers), "--graceful-timeout", "60",
                     "--health-path", "/health")
    for r in range(3):
        held, seen = _conn_on_loop(s.port, 1)
        old = seen["pid"]
        deadline = time.monotonic() + 10
        while _loop_of(held, "/health")["loops"][0]["connections"] != 0:   # the tries it closed
            assert time.monotonic() < deadline, "loop 0 of pid %d keeps a connection" % old
        mark, gate = tmp_path / ("in-view-%d" % r), tmp_path / ("gate-%d" % r)
        held.send(b"GET /sleep?ms=20000&mark=%s&gate=%s HTTP/1.1\r\nHost: x\r\n\r\n"
                  % (str(mark).encode(), str(gate).encode()))
        try:
            _stalled_since(mark, 0.0)    # the view runs on loop 1's pool
            since = len(s.stderr.lines)
            s.signal(signal.SIGHUP)
            drained = re.compile(r"\[%d\] \[INFO\] worker draining: event loop 1:" % old)
            assert s.stderr.wait_for(drained, 30, since), s.stderr.text()
            took = []
            for _ in range(8):
                t0 = time.monotonic()
                try:
                    status = request(s.port, "GET", "/gil", timeout=5).status
                except OSError:          # unanswered in 5 s: still in an accept queue
                    status = None
                took.append(round(time.monotonic() - t0, 3))
                assert status == 200 and took[-1] < 2.0, ("reload %d" % r, took, s.stderr.text())
        finally:
            gate.write_text("release")
        got = held.read_response("GET")
        assert got.status == 200 and json.loads(got.body)["pid"] == old, got
        held.close()


def test_health_sums_the_loops_and_lists_each(start_server):
    """/health answered by loop 0 gives the worker's numbers: every loop's
    summed, each loop's listed. Loop 1 answers several requests first, so
    loop 0's own numbers cannot pass for the sum."""
    s = start_server("threads_app:app", "--threads", "2", "--realtime")
    conns = _conns_on_every_loop(s.port, 2)
    for _ in range(4):
        assert _loop_of(conns[1])["loop"] == 1
    deadline = time.monotonic() + 5
    while True:          # loop 1 shows its numbers once it has gone back to epoll
        h = _loop_of(conns[0], "/health")
        if h["loops"][1]["requests"] >= 5 or time.monotonic() > deadline:
            break
    assert h["loop"] == 0 and [l["loop"] for l in h["loops"]] == [0, 1], h
    assert all(l["requests"] >= 1 for l in h["loops"]) and h["loops"][1]["requests"] >= 5, h
    assert h["requests"] == sum(l["requests"] for l in h["loops"]), h
    assert h["connections"] == sum(l["connections"] for l in h["loops"]) and h["connections"] >= 2, h
    assert h["mounts"][0]["requests"] >= h["loops"][1]["requests"] + 1, h
    for c in conns.values():
        c.close()


def test_health_counts_a_publish_once_whichever_loop_published_or_received_it(start_server):
    """events_published: the worker's m0pub.publish calls, whichever loop's
    view made them (one from each loop: 2); events_received: what its bus
    gave it, each loop getting each event (2, not 4)."""
    s = start_server("threads_app:app", "--threads", "2", "--realtime")
    conns = _conns_on_every_loop(s.port, 2)
    for c in conns.values():
        r = c.request("GET", "/publish?channel=hc")
        assert r.status == 200 and json.loads(r.body)["id"] is not None, r
    deadline = time.monotonic() + 10
    while True:
        h = json.loads(conns[0].request("GET", "/health").body)
        if h["events_received"] >= 2 or time.monotonic() > deadline:
            break
    assert (h["events_published"], h["events_received"]) == (2, 2), h
    for c in conns.values():
        c.close()


def test_sigterm_drains_every_loop(start_server, tmp_path):
    """SIGTERM while a view runs on each loop: both answer, then the worker
    and the master exit 0."""
    import signal
    s = start_server("threads_app:app", "--threads", "2", "--blocking-threads", "1")
    conns = _conns_on_every_loop(s.port, 2)
    marks = {loop: tmp_path / ("in-view-%d" % loop) for loop in conns}
    for loop, c in conns.items():
        c.send(b"GET /sleep?ms=1500&mark=%s HTTP/1.1\r\nHost: x\r\n\r\n" % str(marks[loop]).encode())
    for m in marks.values():
        _stalled_since(m, 0.0)    # every loop's view is running
    s.signal(signal.SIGTERM)
    for loop, c in conns.items():
        r = c.read_response("GET")
        assert r.status == 200 and json.loads(r.body)["loop"] == loop, r
        c.close()
    assert s.wait(30) == 0, s.stderr.text()
    text = s.stderr.text()
    assert "event loop 1: " in text and "draining" in text, text


@pytest.mark.parametrize("when", ["second", "always"])
def test_a_lifespan_startup_that_raises_on_any_loop_fails_the_boot(when):
    """Issue 27 item 11: loop 0's startup completes, loop 1's raises after
    taking lifespan.startup ("second"), or both raise: exit 1 as with one
    loop, never a loop that serves with an empty scope["state"] while its
    log says the application "does not speak ASGI lifespan"."""
    rc, err = run_to_exit(["asgi_lifespan_raise:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                           "--threads", "2"], env={"LIFESPAN_RAISE": when})
    assert rc == 1, err
    assert "does not speak ASGI lifespan" not in err
    assert "ConnectionError: the database is down (startup %d, test)" % (2 if when == "second" else 1) in err
    assert "lifespan startup failed" in err and "worker booted" not in err


def test_loops_that_disagree_on_speaking_lifespan_fail_the_boot():
    """Loop 0's startup completes, loop 1's application raises before it
    takes lifespan.startup (it would be served as not speaking lifespan,
    without loop 0's state): the loops must agree, or the boot fails."""
    rc, err = run_to_exit(["asgi_lifespan_raise:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                           "--threads", "2"], env={"LIFESPAN_RAISE": "second-before"})
    assert rc == 1, err
    assert "lifespan" in err and "loop 1" in err and "worker booted" not in err, err


def _conns_on_loop(port, loop, n, limit=64):
    """n keep-alive connections that loop serves (others closed); each
    costs one GET /gil, and the misses one each too."""
    from rawhttp import Conn
    got = []
    for _ in range(limit):
        c = Conn(port, timeout=30)
        if _loop_of(c)["loop"] == loop:
            got.append(c)
            if len(got) == n:
                return got
        else:
            c.close()
    raise AssertionError("only %d of %d connections on loop %d" % (len(got), n, loop))


MAX_REQUESTS_CLIENTS = 8
ASKED_RE = re.compile(r"worker answered (\d+) requests \(--max-requests\): asking to be replaced")


def test_max_requests_counts_the_process_and_replaces_it_whole(start_server):
    """--max-requests 40 with two loops, under load from 8 clients that are
    all on the second loop: the loops add to one count, so the worker asks
    to be replaced at 40 plus at most the requests in flight when the count
    reached 40 (fewer than 8: each client waits for its answer before it
    sends again), whichever loop takes them; it is replaced whole, without
    a failed request. (Counting the first loop only, it would never ask;
    reading the count once a sweep, it asked hundreds over.)"""
    from rawhttp import IncompleteResponse
    s = start_server("threads_app:app", "--threads", "2", "--max-requests", "40")
    conns = _conns_on_loop(s.port, 1, MAX_REQUESTS_CLIENTS)    # about 16 requests of the 40
    first = _loop_of(conns[0])["pid"]
    stop = threading.Event()
    failures = []

    def client(c):
        while not stop.is_set():
            try:
                seen = _loop_of(c)
            except (IncompleteResponse, ConnectionError):
                return                  # the draining worker closed it between two requests
            except Exception as exc:
                failures.append(repr(exc))
                return
            if seen["pid"] != first or seen["loop"] != 1:
                failures.append(seen)
    threads = [threading.Thread(target=client, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    try:
        asked = s.stderr.wait_for(ASKED_RE, 30)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        for c in conns:
            c.close()
    assert asked is not None, s.stderr.text()
    print("--max-requests 40, %d clients on loop 1: asked at %s" % (MAX_REQUESTS_CLIENTS, asked.group(1)))
    assert 40 <= int(asked.group(1)) < 40 + MAX_REQUESTS_CLIENTS, s.stderr.text()
    assert failures == [], failures[:5]
    deadline = time.monotonic() + 60
    while _get_json(s.port, "/gil")[1]["pid"] == first:
        assert time.monotonic() < deadline, s.stderr.text()
    assert s.stderr.wait_for(re.compile(r"worker exiting \(pid %d\)" % first), 30), s.stderr.text()


def test_max_requests_is_the_process_count_to_the_request(start_server):
    """Requests one at a time, alternating between the two loops, with
    --max-requests 40: the worker asks to be replaced at the process's 40th
    request exactly (the ask is logged before that request is answered),
    not when one loop alone has answered 40, and not before."""
    s = start_server("threads_app:app", "--threads", "2", "--max-requests", "40", "--health-path", "/health")
    conns = _conns_on_every_loop(s.port, 2)
    status, health = _get_json(s.port, "/health")
    assert status == 200, health
    done = health["requests"]            # every request so far, this one included
    assert done < 40, health
    while done < 40:
        assert ASKED_RE.search(s.stderr.text()) is None, (done, s.stderr.text())
        assert _loop_of(conns[done % 2])["loop"] == done % 2
        done += 1
    asked = s.stderr.wait_for(ASKED_RE, 10)
    for c in conns.values():
        c.close()
    assert asked is not None and int(asked.group(1)) == 40, s.stderr.text()


def test_the_watchdog_sees_a_blocked_loop_that_is_not_the_first(start_server, tmp_path):
    """Under systemd's watchdog the master pings the worker each tick; the
    first loop answers only once every loop has answered its own ping, so a
    blocked second loop is seen (the master warns and withholds WATCHDOG=1)."""
    import socket
    path = str(tmp_path / "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(path)
    ns.settimeout(10)
    try:
        s = start_server("threads_app:app", "--threads", "2", "--blocking-threads", "0",
                         env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
        got = b""
        while got.count(b"WATCHDOG=1") < 2:    # pings answered by both loops
            got += ns.recv(4096) + b"\n"
        conns = _conns_on_every_loop(s.port, 2)
        assert "did not answer a ping" not in s.stderr.text()
        conns[1].send(b"GET /sleep?ms=2500 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.stderr.wait_for(re.compile(r"did not answer a ping"), 10) is not None, s.stderr.text()
        r = conns[1].read_response("GET")
        assert r.status == 200 and json.loads(r.body)["loop"] == 1
        for c in conns.values():
            c.close()
    finally:
        ns.close()


def test_a_loop_that_stops_counts_as_retired_and_as_having_answered(start_server, tmp_path):
    """An event loop that stops while its worker serves (threads_app's
    /stop-loop puts /dev/null in place of its loop's epoll descriptor, as an
    application that clobbers descriptors it does not own would) drains the
    worker, and counts as retired and as having answered the master's pings:
    the master goes on hearing the worker (WATCHDOG=1 keeps coming while the
    first loop drains a half-sent request) and, told that it retired,
    replaces it without taking its end for a failure. The loop stops with a
    ping owed (the view holds it until the master has seen a ping go
    unanswered): its stop is its answer, or the worker would never answer
    again."""
    import socket
    path = str(tmp_path / "notify.sock")
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(path)
    ns.settimeout(10)
    try:
        s = start_server("threads_app:app", "--threads", "2", "--blocking-threads", "0",
                         env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
        got = b""
        while got.count(b"WATCHDOG=1") < 2:    # pings answered by both loops
            got += ns.recv(4096) + b"\n"
        conns = _conns_on_every_loop(s.port, 2)
        first = _loop_of(conns[0])["pid"]
        conns[0].send(b"GET /gil HTTP/1.1\r\nHost: x\r\n")      # half a head: loop 0 drains until it ends
        gate, since = tmp_path / "gate", len(s.stderr.lines)
        conns[1].send(b"GET /stop-loop?gate=%s HTTP/1.1\r\nHost: x\r\n\r\n" % str(gate).encode())
        assert s.stderr.wait_for(re.compile(r"did not answer a ping"), 10, since), s.stderr.text()   # loop 1 owes it
        gate.write_text("stop")
        assert s.stderr.wait_for(re.compile(r"event loop 1 of this worker stopped: draining the worker"), 10), \
            s.stderr.text()
        # Its stop answered the ping it owed: the worker answers the master again.
        assert s.stderr.wait_for(re.compile(r"worker 0 \(pid %d\) answers again" % first), 5, since), s.stderr.text()
        ns.setblocking(False)
        try:
            while True:
                ns.recv(4096)                   # what was sent before
        except BlockingIOError:
            pass
        ns.settimeout(3)
        beats = 0
        while beats < 3:                        # a tick is 100 ms
            beats += ns.recv(4096).count(b"WATCHDOG=1")
        assert first in s.worker_pids()         # while it drains
        conns[0].send(b"\r\n")
        assert conns[0].read_response("GET").status == 200
        for c in conns.values():
            c.close()
        deadline = time.monotonic() + 30
        while _get_json(s.port, "/gil")[1]["pid"] == first:
            assert time.monotonic() < deadline, s.stderr.text()
        # (Before the loop stopped, the view held it past a ping.)
        after = s.stderr.text().split("event loop 1 of this worker stopped", 1)[1]
        assert "exited with status" not in after and "did not answer a ping" not in after, s.stderr.text()
    finally:
        ns.close()


def _served_conns(port, n):
    """n keep-alive connections, one request each: (open served ones,
    refused count, {loop: served})."""
    from rawhttp import Conn, IncompleteResponse
    served, refused, loops = [], 0, {}
    for _ in range(n):
        c = Conn(port, timeout=5)
        try:
            seen = _loop_of(c)
        except (IncompleteResponse, ConnectionError):
            refused += 1
            c.close()
            continue
        served.append(c)
        loops[seen["loop"]] = loops.get(seen["loop"], 0) + 1
    return served, refused, loops


def test_max_connections_is_the_workers_across_its_loops(start_server):
    """--max-connections counts the worker's connections (README: slots per
    worker), whichever loop holds them: with --threads 2, 40 idle
    keep-alive connections get 16 served, not 16 per loop; closing them
    gives the worker its slots back."""
    s = start_server("threads_app:app", "--threads", "2", "--max-connections", "16")
    served, refused, loops = _served_conns(s.port, 40)
    try:
        assert len(served) == 16 and refused == 24, (len(served), refused, loops)
        assert s.stderr.wait_for(re.compile(r"all 16 connection slots busy"), 5)
    finally:
        for c in served:
            c.close()
    deadline = time.monotonic() + 10
    while True:       # the server sees each close on its next pass
        again, refused, _ = _served_conns(s.port, 16)
        for c in again:
            c.close()
        if len(again) == 16 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert len(again) == 16, (len(again), refused)


def test_threads_that_publish_and_end_leave_no_buffers_behind(start_server):
    """A thread's publish buffers (the frame and the datagram, kept for its
    next publish) go when the thread ends: an application that publishes
    from short-lived threads (or an elastic pool's retiring ones) does not
    grow by two event-sized buffers per thread it ever had."""
    s = start_server("threads_app:app", "--threads", "2", "--realtime")
    _get_json(s.port, "/publish-threads?n=100")                  # warm: the allocator's arenas, the imports
    before = _get_json(s.port, "/publish-threads?n=20")[1]["rss_kib"]
    after = _get_json(s.port, "/publish-threads?n=400")[1]["rss_kib"]
    # Kept, 400 threads' buffers are about 400 x 120 KB = 47 MB.
    assert after - before < 16 * 1024, (before, after)


def _unix_get(path, target, timeout=10):
    """GET target over the unix socket path, on a connection of its own: the
    view's JSON."""
    import socket
    from rawhttp import get_to_close
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        head, body = get_to_close(sock, target)
    assert head.startswith(b"HTTP/1.1 200"), (head, body)
    return json.loads(body)


def _unix_server(start_server, tmp_path, *args):
    """A --threads server on a unix socket (started by hand: the harness
    waits for a TCP banner); its socket path."""
    from serverproc import Server, StreamCollector, spawn
    path = str(tmp_path / "m0.sock")
    s = Server("threads_app:app", *args)
    s.args[s.args.index("--bind") + 1] = "unix:%s" % path
    start_server.servers.append(s)
    s.proc = spawn(s.args)
    s.stdout = StreamCollector(s.proc.stdout)
    s.stderr = StreamCollector(s.proc.stderr)
    assert s.stderr.wait_for(re.compile(r"worker booted"), 30), s.stderr.text()
    return s, path


def test_a_shared_socket_spreads_its_connections_over_the_loops(start_server, tmp_path):
    """A unix socket cannot be one SO_REUSEPORT socket per loop: the loops
    share it, and the one that accepts hands the connections round the
    loops in turn (SCM_RIGHTS), so sequential connections of a light load
    reach every loop — not nearly all the first, as EPOLLEXCLUSIVE alone."""
    s, path = _unix_server(start_server, tmp_path, "--threads", "3", "--blocking-threads", "1")
    loops = [_unix_get(path, "/gil")["loop"] for _ in range(12)]
    assert sorted(set(loops)) == [0, 1, 2], loops
    assert min(loops.count(k) for k in range(3)) >= 3, loops


def _stalled_since(mark, seconds, timeout=10):
    """Until the view that writes its time.monotonic() to the file mark
    (threads_app's /sleep&mark=) has been running for seconds: its loop
    (views inline) is stalled that long."""
    deadline = time.monotonic() + timeout
    while True:
        text = mark.read_text() if mark.exists() else ""
        if text and time.monotonic() >= float(text) + seconds:
            return
        assert time.monotonic() < deadline, "the view never began"
        time.sleep(0.01)


def test_a_stalled_loop_is_passed_over_by_the_shared_socket(start_server, tmp_path):
    """A view inline on loop 1 (--blocking-threads 0) sleeps 3 s: the
    connections whose turn is loop 1's go to the next loop, not into a
    queue behind the view."""
    import socket
    s, path = _unix_server(start_server, tmp_path, "--threads", "2", "--blocking-threads", "0")
    held = None
    for _ in range(8):           # a kept connection that loop 1 serves
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(10)
        c.connect(path)
        c.sendall(b"GET /gil HTTP/1.1\r\nHost: x\r\n\r\n")
        first = _read_until(c, b"}", 10)
        if b'"loop": 1' in first:
            held = c
            break
        c.close()
    assert held is not None
    mark = tmp_path / "in-view"
    held.sendall(b"GET /sleep?ms=3000&mark=%s HTTP/1.1\r\nHost: x\r\n\r\n" % str(mark).encode())
    _stalled_since(mark, 0.1)    # loop 1 is inside the view, stalled past 50 ms
    t0 = time.monotonic()
    seen = [_unix_get(path, "/gil", timeout=2.5)["loop"] for _ in range(6)]
    assert time.monotonic() - t0 < 2.0 and seen == [0] * 6, seen
    assert b'"loop": 1' in _read_until(held, b'"loop": 1', 10)
    held.close()


def test_tls_on_every_loop(tmp_path_factory):
    """--threads 2 over TLS (issue 31): each loop does its own handshakes
    (OpenSSL's error queue is per thread) and answers; SSE holds spread over
    both loops get one publish; a session made on one loop resumes."""
    from tlsfix import Certs, TLSServer, client_context, read_response, tls_connect
    certs = Certs(tmp_path_factory.mktemp("tls"))
    server = TLSServer(certs, "threads_app:app", "--threads", "2", "--realtime").start()
    loops, kept, holds, session = set(), [], [], None
    try:
        ctx = client_context(certs)
        for _ in range(64):
            s = tls_connect(server.port, ctx)
            kept.append(s)
            s.sendall(b"GET /gil HTTP/1.1\r\nHost: localhost\r\n\r\n")
            status, _, body = read_response(s)
            assert status == 200, body
            loops.add(json.loads(body)["loop"])
            session = session or s.session
            if loops == {0, 1}:
                break
        assert loops == {0, 1}, loops
        held_on = set()
        for _ in range(64):         # held streams (threads_app's /stream) until both loops hold some
            s = tls_connect(server.port, ctx)
            holds.append(s)
            s.sendall(b"GET /stream?channel=tls HTTP/1.1\r\nHost: localhost\r\n\r\n")
            got = _tls_read_until(s, b"\n\n", 10)
            while re.search(rb": loop (\d+)\n\n", got) is None:
                got = _tls_read_until(s, b"\n\n", 10, more=True)
            held_on.add(int(re.search(rb": loop (\d+)\n\n", got).group(1)))
            if held_on == {0, 1} and len(holds) >= 4:
                break
        assert held_on == {0, 1}, held_on
        s = kept[0]
        s.sendall(b"GET /publish?channel=tls HTTP/1.1\r\nHost: localhost\r\n\r\n")
        want = b"id: %d\ndata: hello\n\n" % json.loads(read_response(s)[2])["id"]
        for s in holds:
            assert want in _tls_read_until(s, want, 10)
        for _ in range(8):
            with tls_connect(server.port, ctx, session=session) as s:
                assert s.session_reused
    finally:
        for s in kept + holds:
            s.close()
        server.stop()


def _tls_read_until(sock, want, timeout, more=False):
    """What sock has sent so far, read until want is in it (more: in what
    comes after the last call's)."""
    deadline = time.monotonic() + timeout
    got = getattr(sock, "_got", b"")
    start = len(got) if more else 0
    while want not in got[start:]:
        remaining = deadline - time.monotonic()
        assert remaining > 0, got
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        assert chunk, got
        got += chunk
    sock._got = got
    return got
