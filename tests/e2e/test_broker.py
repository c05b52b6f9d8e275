"""smoke-broker: the broadcast bus on Redis (issue 13, docs/broker.md).

Two m0serve "hosts" (separate ports, buses and shared pages; two workers
each) on one redis-server the test starts itself: one publish reaches every
held stream with one id, from a view, from a plain Python process with
M0_BROKER and from `m0serve publish`; a client resumes on another host with
Last-Event-ID; Redis killed and restarted mid-stream; a broker unreachable
at start; a worker killed with -9 rejoins.
"""

import ast
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from rawhttp import request
from redisproc import Redis
from serverproc import BINARY, REPO
from sse import SSEStream

WORKER_RE = re.compile(r"connected worker=(\d+)")
PYDIR = REPO / "python"
EVENT_TIMEOUT = 15.0          # generous: a reconnect backs off up to 5 s


@pytest.fixture
def redis():
    tmp = tempfile.mkdtemp(prefix="m0redis.")     # short: a unix socket path has 108 bytes
    server = Redis(tmp).start()
    yield server
    server.stop()
    subprocess.run(["rm", "-rf", tmp], check=False)


def host(start_server, url, *args, workers=2):
    """One m0serve "host" on the broker at url."""
    return start_server("broker_app:application", "--realtime", "--broker", url, "--heartbeat", "0.5",
                        *args, workers=workers)


def open_stream(port, channel="news", headers=()):
    s = SSEStream(port, "/events?channel=%s" % channel, headers=headers, timeout=EVENT_TIMEOUT)
    assert s.status == 200
    hello = s.next()
    return s, int(WORKER_RE.search(hello.comment).group(1))


def hold_each_worker(port, workers=2, channel="news"):
    """One stream held on each worker of the server at port (reuseport
    spreads connections): {worker pid: stream}."""
    found, spare = {}, []
    for _ in range(80):
        s, pid = open_stream(port, channel)
        if pid in found:
            spare.append(s)
        else:
            found[pid] = s
        if len(found) == workers:
            break
    for s in spare:
        s.close()
    assert len(found) == workers, "could not hold a stream on every worker"
    return found


def publish(port, n=1, channel="news", data=None, event=None):
    q = "/publish?n=%d&channel=%s" % (n, channel)
    if data is not None:
        q += "&data=%s" % data
    if event is not None:
        q += "&event=%s" % event
    r = request(port, "GET", q)
    assert r.status == 200, r.body
    return [int(x) for x in r.body.decode().split(",")]


def python_publish(url, channel, data, event=None, timeout=20):
    """m0pub.publish from a plain Python process (no server): (status, stdout, stderr)."""
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": url}
    code = "import m0pub, sys; print(m0pub.publish(sys.argv[1], sys.argv[2], event=sys.argv[3] or None))"
    p = subprocess.run([sys.executable, "-c", code, channel, data, event or ""], env=env, capture_output=True,
                       timeout=timeout, text=True)
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
    assert r.status == 503 and b"BrokerError" in r.body and b"unreachable" in r.body
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
    src = (REPO / "src" / "broker_url.c").read_text()
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
