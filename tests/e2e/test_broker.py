"""smoke-broker: the broadcast bus on Redis (issue 13, docs/broker.md).

Two m0serve "hosts" (separate ports, buses and shared pages; two workers
each) on one redis-server the test starts itself: one publish reaches every
held stream with one id, from a view, from a plain Python process with
M0_BROKER and from `m0serve publish`; a client resumes on another host with
Last-Event-ID; Redis killed and restarted mid-stream; a broker unreachable
at start; a worker killed with -9 rejoins.
"""

import ast
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from rawhttp import request
from redisproc import Redis
from serverproc import BINARY, REPO
from sse import SSEStream, open_worker_stream, streams_by_worker
from sse import publish_by_view as publish

PYDIR = REPO / "python"
EVENT_TIMEOUT = 15.0          # generous: a reconnect backs off up to 5 s

open_stream = functools.partial(open_worker_stream, timeout=EVENT_TIMEOUT)       # (stream, worker pid)
hold_each_worker = functools.partial(streams_by_worker, timeout=EVENT_TIMEOUT)   # {worker pid: stream}


def host(start_server, url, *args, workers=2):
    """One m0serve "host" on the broker at url."""
    return start_server("broker_app:application", "--realtime", "--broker", url, "--heartbeat", "0.5",
                        *args, workers=workers)


def python_publish(url, channel, data, event=None, timeout=20, key=None):
    """m0pub.publish from a plain Python process (no server): (status, stdout, stderr)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": url}
    code = ("import m0pub, sys; "
            "print(m0pub.publish(sys.argv[1], sys.argv[2], event=sys.argv[3] or None, key=sys.argv[4] or None))")
    p = subprocess.run([sys.executable, "-c", code, channel, data, event or "", key or ""], env=env,
                       capture_output=True, timeout=timeout, text=True)
    return p.returncode, p.stdout.strip(), p.stderr


def health(port):
    r = request(port, "GET", "/health")
    assert r.status == 200
    return json.loads(r.body)


def wait_health(port, predicate, timeout=EVENT_TIMEOUT, workers=2):
    """Poll /health until predicate holds for every worker (connections land
    on any worker: each pid must be seen satisfying it)."""
    deadline = time.monotonic() + timeout
    good = set()
    while time.monotonic() < deadline:
        h = health(port)
        if predicate(h):
            good.add(h["pid"])
            if len(good) >= workers:
                return h
        time.sleep(0.1)
    raise AssertionError("health never satisfied the condition on %d workers: %r" % (workers, h))


def events_until(stream, count, timeout=EVENT_TIMEOUT):
    """The next count real events (heartbeats skipped)."""
    return [stream.next_event(timeout) for _ in range(count)]


def test_one_publish_reaches_both_hosts_with_one_id(start_server, redis):
    a = host(start_server, redis.url)
    b = host(start_server, redis.unix_url)        # TCP and unix URLs, one broker
    streams = list(hold_each_worker(a.port).values()) + list(hold_each_worker(b.port).values())

    [first] = publish(a.port, data="from-A")
    for s in streams:
        ev = s.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.data) == (first, "from-A")

    # A plain Python process (Celery, cron, manage.py shell) with M0_BROKER.
    rc, out, err = python_publish(redis.url, "news", "from cron\nline 2", event="cron")
    assert rc == 0, err
    second = int(out)
    for s in streams:
        ev = s.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.event, ev.data) == (second, "cron", "from cron\nline 2")

    # And from a shell.
    env = dict(os.environ, M0_BROKER=redis.url)
    p = subprocess.run([BINARY, "publish", "news", "from shell", "--event", "sh"], env=env, capture_output=True,
                       text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    third = int(p.stdout)
    for s in streams:
        ev = s.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.event, ev.data) == (third, "sh", "from shell")
    assert first < second < third
    h = health(b.port)["broker"]
    assert h["connected"] is True and h["last_id"] >= third and h["url"].startswith("unix://")
    for s in streams:
        s.close()


def test_resume_on_another_host(start_server, redis):
    a = host(start_server, redis.url)
    b = host(start_server, redis.url)
    s, _ = open_stream(a.port, "room")
    [i1] = publish(a.port, channel="room", data="one")
    assert s.next_event(EVENT_TIMEOUT).id == i1
    s.close()                                    # the client drops off host A
    missed = publish(a.port, n=2, channel="room")

    # Host B read those too: its journal answers.
    r, _ = open_stream(b.port, "room", headers=[("Last-Event-ID", str(i1))])
    assert [e.id for e in events_until(r, 2)] == missed
    [i4] = publish(b.port, channel="room", data="four")
    assert r.next_event(EVENT_TIMEOUT).id == i4

    # Host C starts now: its journal starts after i4, so the broker's
    # retention answers (asynchronously), then live events follow.
    c = host(start_server, redis.url)
    r2, _ = open_stream(c.port, "room", headers=[("Last-Event-ID", str(i1))])
    got = events_until(r2, 3)
    assert [e.id for e in got] == missed + [i4]
    assert [e.event for e in got] == ["message"] * 3
    [i5] = publish(a.port, channel="room", data="five")
    assert r2.next_event(EVENT_TIMEOUT).id == i5          # live, once
    [i6] = publish(c.port, channel="room", data="six")
    assert r2.next_event(EVENT_TIMEOUT).id == i6          # no duplicate in between
    assert r.next_event(EVENT_TIMEOUT).id == i5
    assert r.next_event(EVENT_TIMEOUT).id == i6
    resumes = 0
    for _ in range(20):
        resumes = max(resumes, health(c.port)["broker"]["resumes"])
    assert resumes >= 1
    for x in (r, r2):
        x.close()


def test_resume_from_the_broker_while_events_keep_coming(start_server, redis):
    """The broker's replay arrives while live events are being read: every
    event after the client's id comes once, in order, replay then live."""
    a = host(start_server, redis.url, workers=1)
    [i1] = publish(a.port, channel="race")
    c = host(start_server, redis.url, workers=1)     # its journal starts after i1: the broker answers
    sys.path.insert(0, str(PYDIR))
    import m0pub
    ids, done = [], threading.Event()

    def publisher():
        os.environ["M0_BROKER"] = redis.url
        try:
            for k in range(400):
                ids.append(m0pub.publish("race", "e%d" % k))
                if k == 100:
                    done.set()
        finally:
            os.environ.pop("M0_BROKER", None)
            done.set()

    t = threading.Thread(target=publisher)
    t.start()
    done.wait(10)
    r, _ = open_stream(c.port, "race", headers=[("Last-Event-ID", str(i1))])   # mid-stream
    t.join(30)
    got = []
    while len(got) < len(ids):
        ev = r.next_event(EVENT_TIMEOUT)
        assert ev.event != "m0-gap", ev
        got.append(ev.id)
    assert got == ids                           # all, in order, no duplicate
    r.close()


def test_resume_beyond_retention_is_a_gap(start_server, redis):
    a = host(start_server, redis.url, "--broker-retention", "3", workers=1)
    [i1] = publish(a.port, channel="tiny")
    missed = publish(a.port, n=5, channel="tiny")
    c = host(start_server, redis.url, "--broker-retention", "3", workers=1)
    r, _ = open_stream(c.port, "tiny", headers=[("Last-Event-ID", str(i1))])
    gap = r.next_event(EVENT_TIMEOUT)
    assert gap.event == "m0-gap" and json.loads(gap.data)["last_event_id"] == i1
    got = [r.next_event(EVENT_TIMEOUT).id for _ in range(4)]
    assert got == missed[-4:]
    # An id no broker issued: resync, then live.
    r2, _ = open_stream(c.port, "tiny", headers=[("Last-Event-ID", str(2 ** 62))])
    ev = r2.next_event(EVENT_TIMEOUT)
    assert ev.event == "m0-gap" and json.loads(ev.data) == {"last_event_id": None}
    [live] = publish(a.port, channel="tiny")
    assert r2.next_event(EVENT_TIMEOUT).id == live
    r.close()
    r2.close()


def test_redis_killed_and_restarted_mid_stream(start_server, redis):
    a = host(start_server, redis.url)
    b = host(start_server, redis.url)
    streams = list(hold_each_worker(a.port).values()) + list(hold_each_worker(b.port).values())
    before = publish(a.port, n=3)
    for s in streams:
        assert [e.id for e in events_until(s, 3)] == before

    redis.kill()
    r = request(a.port, "GET", "/publish?n=1")
    assert r.status == 503 and r.body.startswith(b"BrokerError:") and b"unreachable" in r.body
    rc, out, err = python_publish(redis.url, "news", "lost?")
    assert rc != 0 and "BrokerError" in err
    h = wait_health(a.port, lambda h: h["broker"]["connected"] is False)
    assert h["broker"]["last_error"]
    for s in streams:                            # held open, heartbeats go on
        assert s.next(3.0).comment == "heartbeat"

    redis.start()                                # same data: the append-only file
    after = None
    deadline = time.monotonic() + EVENT_TIMEOUT
    while after is None:
        r = request(a.port, "GET", "/publish?n=3")
        if r.status == 200:
            after = [int(x) for x in r.body.decode().split(",")]
        elif time.monotonic() > deadline:
            raise AssertionError("publishing never recovered: %r" % r.body)
        else:
            time.sleep(0.1)
    assert after == [before[-1] + 1, before[-1] + 2, before[-1] + 3]   # nothing lost, same count
    for s in streams:
        got = events_until(s, 3)
        assert [e.id for e in got] == after, got             # in order, no m0-gap
    wait_health(b.port, lambda h: h["broker"]["connected"] and h["broker"]["reconnects"] >= 1)
    for s in streams:
        s.close()


def test_a_counter_that_went_back_is_raised_and_told(start_server, redis):
    """A Redis that lost acknowledged writes (its counter below an id a worker
    read): the worker raises the counter on reconnect, so no id is issued
    twice, and tells its live streams."""
    a = host(start_server, redis.url)
    streams = list(hold_each_worker(a.port).values())
    before = publish(a.port, n=3)
    for s in streams:
        assert [e.id for e in events_until(s, 3)] == before
    redis.command("SET", "m0:seq", str(before[0]))
    redis.command("CLIENT", "KILL", "TYPE", "normal")          # every worker reconnects
    wait_health(a.port, lambda h: h["broker"]["connected"])
    [after] = publish(a.port)
    assert after > before[-1]                  # never an id issued twice
    gaps = 0
    for s in streams:
        ev = s.next_event(EVENT_TIMEOUT)
        if ev.event == "m0-gap":               # the worker that found the counter low
            gaps += 1
            ev = s.next_event(EVENT_TIMEOUT)
        assert ev.id == after
        s.close()
    assert gaps >= 1


def test_broker_unreachable_at_start(start_server, redis):
    redis.kill()                                 # nothing listens at first
    a = host(start_server, redis.unix_url, workers=1)
    assert a.stderr.wait_for(re.compile(r"broker unix://.* unreachable"), 10), a.stderr.text()
    assert request(a.port, "GET", "/").status == 200       # serves HTTP meanwhile
    assert health(a.port)["broker"]["connected"] is False
    s, _ = open_stream(a.port)
    redis.start()
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    rc, out, err = python_publish(redis.unix_url, "news", "hello")
    assert rc == 0, err
    ev = s.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (int(out), "hello")
    s.close()


def test_worker_killed_with_sigkill_rejoins(start_server, redis):
    a = host(start_server, redis.url)
    held = hold_each_worker(a.port)
    [i1] = publish(a.port)
    for s in held.values():
        assert s.next_event(EVENT_TIMEOUT).id == i1
    victim, survivor = sorted(held)
    os.kill(victim, signal.SIGKILL)
    assert held[victim].wait_closed(5)
    pids = a.wait_workers(lambda p: len(p) == 2 and victim not in p)
    (newpid,) = pids - {survivor}
    fresh = None
    for _ in range(80):
        s, pid = open_stream(a.port)
        if pid == newpid:
            fresh = s
            break
        s.close()
    assert fresh is not None, "no stream landed on the respawned worker"
    # The killed worker's client comes back with its Last-Event-ID.
    back, _ = open_stream(a.port, headers=[("Last-Event-ID", str(i1))])
    [i2] = publish(a.port)
    for s in (held[survivor], fresh, back):
        assert s.next_event(EVENT_TIMEOUT).id == i2
    for s in (held[survivor], fresh, back):
        s.close()


def test_reload_with_held_streams_resumes_on_the_new_workers(start_server, redis):
    """SIGHUP: the old workers end their streams, the clients come back with
    Last-Event-ID to the new generation (which read the log from when it
    booted: its journal replays) and go on live."""
    a = host(start_server, redis.url)
    held = hold_each_worker(a.port)
    [i1] = publish(a.port)
    for s in held.values():
        assert s.next_event(EVENT_TIMEOUT).id == i1
    old = set(held)
    a.signal(signal.SIGHUP)
    for s in held.values():
        assert s.wait_closed(EVENT_TIMEOUT)
    a.wait_workers(lambda p: len(p) == 2 and not p & old)
    missed = publish(a.port, n=2)
    back, pid = open_stream(a.port, headers=[("Last-Event-ID", str(i1))])
    assert pid not in old
    assert [e.id for e in events_until(back, 2)] == missed
    [live] = publish(a.port)
    assert back.next_event(EVENT_TIMEOUT).id == live
    back.close()


def c_string(source, name):
    """The value of a C string literal array (adjacent literals joined)."""
    m = re.search(r"%s\[\]\s*=\s*((?:\s*\"(?:[^\"\\]|\\.)*\")+)\s*;" % name, source)
    return "".join(ast.literal_eval(lit) for lit in re.findall(r"\"(?:[^\"\\]|\\.)*\"", m.group(1)))


def test_python_and_c_run_the_same_script():
    sys.path.insert(0, str(PYDIR))
    import m0pub
    src = (REPO / "src" / "realtime" / "broker_url.c").read_text()
    assert c_string(src, "M0_BROKER_PUBLISH_LUA") == m0pub.PUBLISH_LUA
    header = (REPO / "include" / "m0" / "broker_url.h").read_text()
    for name, value in [("PREFIX_DEFAULT", '"%s"' % m0pub.PREFIX_DEFAULT),
                        ("RETENTION_DEFAULT", str(m0pub.RETENTION_DEFAULT)),
                        ("BACKLOG_DEFAULT", str(m0pub.BACKLOG_DEFAULT)),
                        ("CHANNEL_TTL_MS", str(m0pub.CHANNEL_TTL_MS)),
                        ("TIMEOUT_MS", str(int(m0pub.TIMEOUT * 1000)))]:
        assert re.search(r"#define M0_BROKER_%s %s(?![\w])" % (name, re.escape(value)), header), name


def test_bad_broker_flags_and_publish_arguments():
    def run(*args, env=None):
        p = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=20,
                           env=dict(os.environ, **(env or {})))
        return p.returncode, p.stderr.strip().splitlines()

    rc, err = run("app:app", "--broker", "http://x")
    assert rc == 2 and len(err) == 1 and "--broker" in err[0]
    rc, err = run("app:app", "--broker", "redis://h:99999")
    assert rc == 2 and len(err) == 1 and "--broker" in err[0]
    rc, err = run("app:app", "--broker-prefix", "has space")
    assert rc == 2 and len(err) == 1 and "--broker-prefix" in err[0]
    rc, err = run("publish", "news", "x", "--evnt", "e", env={"M0_BROKER": "redis://127.0.0.1:1"})
    assert rc == 2 and len(err) == 1 and "--evnt" in err[0]
    rc, err = run("publish", "m0.reserved", "x", env={"M0_BROKER": "redis://127.0.0.1:1"})
    assert rc == 2 and len(err) == 1 and "reserved" in err[0]
    env = dict(os.environ)
    env.pop("M0_BROKER", None)
    p = subprocess.run([BINARY, "publish", "news", "x"], capture_output=True, text=True, timeout=20, env=env)
    assert p.returncode == 2 and "M0_BROKER" in p.stderr
    rc, err = run("publish", "news", "x", "--broker", "redis://127.0.0.1:1")
    assert rc == 1 and len(err) == 1 and "unreachable" in err[0]


def test_m0pub_without_a_server_raises_when_the_broker_is_down():
    rc, out, err = python_publish("redis://127.0.0.1:1", "news", "x")
    assert rc != 0 and "BrokerError" in err and "unreachable" in err


def test_the_same_limits_through_the_broker(start_server, redis):
    rc, out, err = python_publish(redis.url, "news", "x" * 70000)
    assert rc != 0 and "ValueError" in err and "exceeds" in err
    rc, out, err = python_publish(redis.url, "m0.internal", "x")
    assert rc != 0 and "ValueError" in err
    a = host(start_server, redis.url, workers=1)
    s, _ = open_stream(a.port)
    rc, out, err = python_publish(redis.url, "news", "y" * 65000)      # fits: the same frame everywhere
    assert rc == 0, err
    ev = s.next_event(EVENT_TIMEOUT)
    assert (ev.id, len(ev.data)) == (int(out), 65000)
    s.close()


def test_apublish_keeps_the_event_loop_serving_while_the_broker_stalls(start_server, redis):
    """An ASGI app's `await m0pub.apublish` with a broker that stopped
    answering: the executor's event loop serves other requests meanwhile
    (a plain publish would hold it for the whole round trip and its
    timeouts), and the caller then gets BrokerError, not a silent drop."""
    srv = start_server("asgi_raw:app", "--realtime", "--broker", redis.url, workers=1)
    s = SSEStream(srv.port, "/hold?channel=news", timeout=EVENT_TIMEOUT)
    assert s.status == 200
    r = request(srv.port, "GET", "/apublish?channel=news")
    assert r.status == 200 and int(r.body) > 0
    assert s.next_event(EVENT_TIMEOUT).data == "from-asgi"
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        result = {}
        t = threading.Thread(target=lambda: result.update(r=request(srv.port, "GET", "/apublish", timeout=30)))
        began = time.monotonic()
        t.start()
        slowest, served_while_pending = 0.0, 0
        while t.is_alive() and time.monotonic() - began < 30:
            started = time.monotonic()
            fast = request(srv.port, "GET", "/", timeout=10)
            slowest = max(slowest, time.monotonic() - started)
            assert fast.status == 200 and fast.body == b"hello"
            if t.is_alive():
                served_while_pending += 1
        t.join(30)
        pending_for = time.monotonic() - began
        assert not t.is_alive() and result["r"].body.startswith(b"BrokerError:"), result
        assert pending_for > 0.9, "the stalled publish returned in %.2fs" % pending_for
        assert served_while_pending > 3 and slowest < 0.5, (served_while_pending, slowest)
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    s.close()


@pytest.mark.parametrize("url", ["redis://:pw@host:1234/3", "redis://host", "redis://[::1]:7000/1",
                                 "unix:///run/redis.sock?db=2"])
def test_m0pub_parses_the_same_urls(url):
    sys.path.insert(0, str(PYDIR))
    import m0pub
    cfg = m0pub.parse_broker_url(url)
    assert cfg["db"] in (0, 1, 2, 3)
    if url.startswith("unix"):
        assert cfg["path"] == "/run/redis.sock" and cfg["db"] == 2
    elif "pw" in url:
        assert (cfg["host"], cfg["port"], cfg["password"], cfg["db"]) == ("host", 1234, "pw", 3)
    elif "::1" in url:
        assert (cfg["host"], cfg["port"], cfg["db"]) == ("::1", 7000, 1)
    else:
        assert (cfg["host"], cfg["port"]) == ("host", 6379)


# ------------------------------------------------------------ hardening (issue 23)

class FakeRedis:
    """A broker impostor on 127.0.0.1: it reads RESP commands and answers
    each one with `replies(command)` (bytes: any number of replies, or
    none). Counts the connections it accepted. Stops on close()."""

    def __init__(self, replies):
        self.replies = replies
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.url = "redis://127.0.0.1:%d" % self.port
        self.connections = 0
        self.commands = 0
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(t)
            t.start()

    def _serve(self, conn):
        conn.settimeout(0.2)
        f = conn.makefile("rb")
        with conn:
            while not self.stopping.is_set():
                try:
                    line = f.readline()
                    if not line.startswith(b"*"):
                        return
                    cmd = []
                    for _ in range(int(line[1:])):
                        n = int(f.readline()[1:])
                        cmd.append(f.read(n + 2)[:-2])
                    self.commands += 1
                    conn.sendall(self.replies(cmd))
                except socket.timeout:
                    continue
                except (OSError, ValueError):
                    return

    def close(self):
        self.stopping.set()
        self.sock.close()
        for t in self.threads:
            t.join(2)


def expected(cmd):
    """The reply cmd expects (of the commands a connection begins with)."""
    name = cmd[0].upper()
    return {b"PING": b"+PONG\r\n", b"GET": b"$-1\r\n", b"XREAD": b"*-1\r\n"}.get(name, b"+OK\r\n")


def twice(cmd):
    """Each command answered with the reply it expects, twice."""
    return expected(cmd) * 2


def random_resp(rng):
    def value(depth=0):
        k = rng.randrange(7 if depth < 3 else 5)
        if k == 0:
            return b"+PONG\r\n"
        if k == 1:
            return b"-ERR nope\r\n"
        if k == 2:
            return b":%d\r\n" % rng.randrange(-5, 10 ** 16)
        if k == 3:
            s = bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
            return b"$%d\r\n%s\r\n" % (len(s), s)
        if k == 4:
            return b"$-1\r\n"
        n = rng.randrange(4)
        return b"*%d\r\n" % n + b"".join(value(depth + 1) for _ in range(n))

    def replies(cmd):
        """The reply cmd expects, then one to three random ones nobody asked
        for, the first not an error: an unasked reply reaches hiredis's
        abort only after an answer it took (one it refuses drops the
        connection first) and when it is not an error reply (an unasked
        error is the one hiredis itself turns into a disconnect)."""
        extra = value()
        while extra.startswith(b"-"):
            extra = value()
        return expected(cmd) + extra + b"".join(value() for _ in range(rng.randrange(3)))
    return replies


@pytest.mark.parametrize("mode", ["twice", "random"])
def test_item1_a_broker_that_answers_too_much_is_a_protocol_error_not_an_abort(start_server, mode):
    import random
    fake = FakeRedis(twice if mode == "twice" else random_resp(random.Random(23)))
    try:
        a = host(start_server, fake.url, workers=1)
        (pid,) = a.worker_pids()
        assert a.stderr.wait_for(re.compile(r"broker redis://127\.0\.0\.1:\d+.*protocol error"), 10), \
            a.stderr.text()
        # It reconnects (with its backoff) and is refused again, without dying.
        deadline = time.monotonic() + 10
        while fake.connections < 6 and time.monotonic() < deadline:
            assert request(a.port, "GET", "/").status == 200       # plain requests are served meanwhile
            time.sleep(0.1)
        assert fake.connections >= 6, fake.connections
        # Both connections refuse it. The reader's extra reply meets its next
        # command (out of step); the commands connection is idle after its
        # handshake (and after each probe), so its extra reply comes with no
        # command waiting: only the reader's guard (broker_reply.h) makes
        # that a protocol error (without it the connection dropped the reply
        # unseen and served on: no abort since rconn pairs replies itself,
        # but a broker talking out of turn went unnoticed).
        assert a.stderr.wait_for(re.compile(r"commands connection: protocol error: .* with no command waiting"),
                                 5), a.stderr.text()
        assert request(a.port, "GET", "/").body == str(pid).encode()
        assert a.worker_pids() == {pid}
        text = a.stderr.text()
        assert "killed by signal" not in text and "Assertion" not in text, text
        h = health(a.port)
        assert h["status"] == "degraded" and h["broker"]["connected"] is False
    finally:
        fake.close()


def test_item2_a_publish_that_timed_out_is_outcome_unknown_and_a_keyed_retry_publishes_once(start_server, redis):
    a = host(start_server, redis.url, workers=1)
    s, _ = open_stream(a.port)
    [warm] = publish(a.port, data="warm")          # loads the script
    assert s.next_event(EVENT_TIMEOUT).id == warm
    env = dict(os.environ, M0_BROKER=redis.url)
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        # In a worker, from a plain Python process and from a shell: each
        # sends its event and hears nothing back within the 1 s timeout.
        r = request(a.port, "GET", "/publish?data=from-view&key=k-view", timeout=30)
        assert r.status == 503 and r.body.startswith(b"PublishOutcomeUnknown:"), r.body
        assert b"may have been published" in r.body
        rc, out, err = python_publish(redis.url, "news", "from-python", key="k-python")
        assert rc != 0 and "m0pub.PublishOutcomeUnknown" in err and "may have been published" in err, err
        p = subprocess.run([BINARY, "publish", "news", "from-shell", "--key", "k-shell"], env=env,
                           capture_output=True, text=True, timeout=20)
        assert p.returncode == 3 and "may have been published" in p.stderr, p.stderr
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    # The retries, with the same keys: the ids of the first tries, nothing appended.
    r = request(a.port, "GET", "/publish?data=from-view&key=k-view")
    assert r.status == 200, r.body
    i1 = int(r.body)
    rc, out, err = python_publish(redis.url, "news", "from-python", key="k-python")
    assert rc == 0, err
    i2 = int(out)
    p = subprocess.run([BINARY, "publish", "news", "from-shell", "--key", "k-shell"], env=env,
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 0, p.stderr
    i3 = int(p.stdout)
    assert len({warm, i1, i2, i3}) == 4
    got = {}
    for _ in range(3):
        ev = s.next_event(EVENT_TIMEOUT)
        got[ev.id] = ev.data
    assert got == {i1: "from-view", i2: "from-python", i3: "from-shell"}
    [marker] = publish(a.port, data="marker")
    ev = s.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (marker, "marker")          # each event once: no copy in between
    assert redis.command("XLEN", "m0:log") == b"5"          # warm, three events, marker
    # A refusal is not "unknown": it was not published.
    rc, out, err = python_publish("redis://127.0.0.1:1", "news", "x", key="k-refused")
    assert rc != 0 and "m0pub.BrokerError: " in err, err
    s.close()


def test_item2_the_key_window_and_rules():
    sys.path.insert(0, str(PYDIR))
    import m0pub
    assert m0pub.KEY_TTL_MS == 300000 and m0pub.KEY_MAX == 200
    header = (REPO / "include" / "m0" / "broker_url.h").read_text()
    assert re.search(r"#define M0_BROKER_KEY_TTL_MS %d\b" % m0pub.KEY_TTL_MS, header)
    assert re.search(r"#define M0_BROKER_KEY_MAX %d\b" % m0pub.KEY_MAX, header)
    for bad in ("", "x" * 201, "tab\there", "é"):
        with pytest.raises(ValueError):
            m0pub.publish("news", "x", key=bad)
    with pytest.raises(TypeError):
        m0pub.publish("news", "x", key=42)
    p = subprocess.run([BINARY, "publish", "news", "x", "--key", ""], capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, M0_BROKER="redis://127.0.0.1:1"))
    assert p.returncode == 2 and "--key" in p.stderr


def test_item8_health_is_degraded_while_the_broker_is_down_and_the_error_clears(start_server, redis):
    a = host(start_server, redis.url, workers=1)
    h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    assert h["status"] == "ok"
    redis.kill()
    h = wait_health(a.port, lambda h: not h["broker"]["connected"], workers=1)
    assert h["status"] == "degraded" and h["broker"]["last_error"], h
    redis.start()
    h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    assert h["status"] == "ok" and h["broker"]["last_error"] == "", h


@pytest.mark.parametrize("given", ["wrong", None])
def test_item8_a_refused_password_is_logged_as_authentication_failed(start_server, given):
    tmp = tempfile.mkdtemp(prefix="m0redis.")
    server = Redis(tmp, persist=False, password="s3cret").start()
    try:
        url = "redis://%s127.0.0.1:%d" % (":%s@" % given if given else "", server.port)
        a = host(start_server, url, workers=1)
        assert a.stderr.wait_for(re.compile(r"broker .* authentication failed \((AUTH: WRONGPASS|PING: NOAUTH)"),
                                 10), a.stderr.text()
        assert "is not a counter" not in a.stderr.text()
        h = wait_health(a.port, lambda h: "authentication failed" in h["broker"]["last_error"], workers=1)
        assert h["status"] == "degraded"
        good = host(start_server, "redis://:s3cret@127.0.0.1:%d" % server.port, workers=1)
        wait_health(good.port, lambda h: h["broker"]["connected"], workers=1)
    finally:
        server.stop()
        subprocess.run(["rm", "-rf", tmp], check=False)


def test_item8_a_connection_dropped_as_soon_as_it_is_up_keeps_its_backoff(start_server, redis):
    """The backoff starts over only after a connection stayed up (STABLE_MS,
    10 s): a broker that takes each connection and drops it at once is
    redialled 100 ms, 200 ms, 400 ms ... apart, not every 100 ms for ever."""
    from redisproc import resp_command
    a = host(start_server, redis.url, workers=1)
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    with socket.create_connection(("127.0.0.1", redis.port), timeout=5) as killer:
        f = killer.makefile("rb")

        def call(*args):
            killer.sendall(resp_command(*args))
            line = f.readline()
            return f.read(int(line[1:-2]) + 2) if line[:1] == b"$" else line

        def received():
            return int(re.search(rb"total_connections_received:(\d+)", call("INFO", "stats")).group(1))
        before = received()
        deadline = time.monotonic() + 4.0
        while time.monotonic() < deadline:       # every connection but this one, dropped every 50 ms
            call("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
            time.sleep(0.05)
        attempts = received() - before
    # Two connections (reader, commands), each backing off 100 ms doubling:
    # about 6 attempts each in 4 s; starting over each time, about 25 each.
    assert attempts <= 20, attempts
    h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    assert h["status"] == "ok"


def test_item8_a_broker_at_maxclients_is_retried_with_backoff_and_logged_once(start_server):
    from redisproc import resp_command
    tmp = tempfile.mkdtemp(prefix="m0redis.")
    server = Redis(tmp, persist=False, args=["--maxclients", "2"]).start()
    held = []
    try:
        for _ in range(2):                     # the two slots, taken
            c = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            c.sendall(resp_command("PING"))
            assert c.recv(100) == b"+PONG\r\n"
            held.append(c)

        def rejected():
            held[0].sendall(resp_command("INFO", "stats"))
            data = b""
            while b"rejected_connections:" not in data or not data.endswith(b"\r\n"):
                data += held[0].recv(65536)
            return int(re.search(rb"rejected_connections:(\d+)", data).group(1))

        a = host(start_server, server.url, workers=1)
        assert a.stderr.wait_for(re.compile(r"max number of clients reached"), 10), a.stderr.text()
        before = rejected()
        time.sleep(4.0)                        # a window to count attempts in, not a wait for an event
        attempts = rejected() - before
        # Backing off (100 ms doubling to 5 s): at most 5 attempts per
        # connection in 4 s; without it, one every 100 ms (80). The presence
        # agent's connection (500 ms doubling): at most 3 more.
        assert attempts <= 15, attempts
        lines = [l for l in a.stderr.text().splitlines() if "max number of clients" in l]
        assert len(lines) <= 3, lines          # once per connection (reader, commands, presence)
        for c in held:
            c.close()
        held.clear()
        h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
        assert h["status"] == "ok" and h["broker"]["last_error"] == ""
    finally:
        for c in held:
            c.close()
        server.stop()
        subprocess.run(["rm", "-rf", tmp], check=False)
