"""smoke-django-realtime: SSE holds from plain synchronous Django views, the
broadcast bus, Last-Event-ID resume, /health — against examples/django_realtime.

Phases (issue 4): 1 fan-out across workers with one id, 2 heartbeats,
3 resume from the journal and the m0-gap marker, 4 a vanished client is
unsubscribed, 5 holds and publishes while pool threads are busy, 6 the
stream is framed as a hold, 7 SIGTERM with held streams open.
"""

import json
import re
import signal
import socket
import threading
import time
from http.cookies import SimpleCookie

import pytest

from rawhttp import Conn, request
from serverproc import EXAMPLES_DIR
from sse import SSEStream

SITE = EXAMPLES_DIR / "django_realtime"
WORKER_RE = re.compile(r"connected worker=(\d+)")


def rt_server(start_server, *args, workers=1):
    return start_server("rtsite.wsgi:application", "--realtime", *args, app_dir=SITE, workers=workers)


def csrf(port):
    """A CSRF cookie/token pair from the demo page."""
    response = request(port, "GET", "/")
    assert response.status == 200
    cookie = SimpleCookie()
    for name, value in response.headers:
        if name.lower() == "set-cookie":
            cookie.load(value)
    return cookie["csrftoken"].value


def publish(port, text, channel="news", token=None):
    """POST /publish through Django (CSRF and all); returns the event id."""
    token = token or csrf(port)
    body = ("text=%s&channel=%s" % (text, channel)).encode()
    response = request(port, "POST", "/publish", [
        ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
        ("Cookie", "csrftoken=%s" % token), ("X-CSRFToken", token)], body=body)
    assert response.status == 200, response.body
    return json.loads(response.body)["id"]


def open_stream(port, **kw):
    s = SSEStream(port, **kw)
    assert s.status == 200
    hello = s.next()
    worker = int(WORKER_RE.search(hello.comment).group(1))
    return s, worker


def health(port):
    response = request(port, "GET", "/health")
    assert response.status == 200
    return json.loads(response.body)


def test_phase1_one_publish_reaches_streams_on_two_workers(start_server):
    server = rt_server(start_server, workers=2)
    streams = {}
    spare = []
    for _ in range(60):                      # reuseport spreads connections
        s, worker = open_stream(server.port)
        if worker in streams:
            spare.append(s)
        else:
            streams[worker] = s
        if len(streams) == 2:
            break
    assert len(streams) == 2, "could not hold streams on two workers"
    event_id = publish(server.port, "hello")
    got = [s.next_event() for s in streams.values()]
    assert [e.id for e in got] == [event_id, event_id]
    assert [json.loads(e.data)["text"] for e in got] == ["hello", "hello"]
    assert all(e.event == "message" for e in got)
    for s in list(streams.values()) + spare:
        s.close()


def test_phase2_heartbeats_arrive_at_the_configured_cadence(start_server):
    server = rt_server(start_server, "--heartbeat", "0.3")
    s, _ = open_stream(server.port)
    beats = []
    for _ in range(3):
        ev = s.next(timeout=3)
        assert ev.comment == "heartbeat"
        beats.append(time.monotonic())
    gaps = [b - a for a, b in zip(beats, beats[1:])]
    assert all(0.15 < g < 0.9 for g in gaps), gaps
    s.close()


def test_phase3_resume_replays_the_journal_then_goes_live(start_server):
    server = rt_server(start_server)
    token = csrf(server.port)
    ids = [publish(server.port, "m%d" % i, token=token) for i in range(1, 6)]
    assert ids == sorted(ids) and len(set(ids)) == 5
    s, _ = open_stream(server.port, headers=[("Last-Event-ID", str(ids[1]))])
    replayed = [s.next_event() for _ in range(3)]
    assert [e.id for e in replayed] == ids[2:]
    assert [json.loads(e.data)["text"] for e in replayed] == ["m3", "m4", "m5"]
    live = publish(server.port, "m6", token=token)
    ev = s.next_event()
    assert (ev.id, json.loads(ev.data)["text"]) == (live, "m6")
    with pytest.raises((TimeoutError, OSError)):
        s.next_event(timeout=0.5)            # nothing duplicated after it
    s.close()


def test_phase3_gap_marker_when_the_journal_is_too_short(start_server):
    server = rt_server(start_server, "--replay", "2")
    token = csrf(server.port)
    ids = [publish(server.port, "g%d" % i, token=token) for i in range(5)]
    s, _ = open_stream(server.port, headers=[("Last-Event-ID", str(ids[0]))])
    first = s.next_event()
    assert first.event == "m0-gap"
    assert json.loads(first.data)["last_event_id"] == ids[0]
    assert [s.next_event().id for _ in range(2)] == ids[3:]
    s.close()


def test_phase4_a_vanished_client_is_unsubscribed(start_server):
    server = rt_server(start_server)
    s, _ = open_stream(server.port)
    h = health(server.port)
    assert h["held_streams"] == 1
    assert {"channel": "news", "subscribers": 1} in h["channels"]
    s.close()
    deadline = time.monotonic() + 1.0
    while health(server.port)["held_streams"] != 0:
        assert time.monotonic() < deadline, "still subscribed a second after the client left"
        time.sleep(0.02)
    assert health(server.port)["channels"] == []


def test_phase5_holds_and_publishes_while_pool_threads_are_busy(start_server):
    server = rt_server(start_server, "--blocking-threads", "4", "--heartbeat", "0.3")
    held, _ = open_stream(server.port)
    token = csrf(server.port)
    slow = [threading.Thread(target=request, args=(server.port, "GET", "/slow?s=1.5"), daemon=True)
            for _ in range(2)]
    for t in slow:
        t.start()
    deadline = time.monotonic() + 5
    while health(server.port)["pool"]["busy"] < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    began = time.monotonic()
    fresh, _ = open_stream(server.port)               # a hold taken on a pool thread
    event_id = publish(server.port, "while-busy", token=token)
    assert fresh.next_event().id == event_id
    assert held.next_event().id == event_id
    assert time.monotonic() - began < 1.0
    assert health(server.port)["pool"]["busy"] >= 2   # the slow views were still running
    for t in slow:
        t.join(10)
    fresh.close()
    held.close()


def test_phase5_loop_keeps_held_streams_alive_when_every_thread_is_busy(start_server):
    server = rt_server(start_server, "--blocking-threads", "2", "--heartbeat", "0.3")
    held, _ = open_stream(server.port)
    slow = [threading.Thread(target=request, args=(server.port, "GET", "/slow?s=1.5"), daemon=True)
            for _ in range(2)]
    for t in slow:
        t.start()
    deadline = time.monotonic() + 5
    while True:
        h = health(server.port)                        # answered in C: no thread needed
        if h["pool"]["busy"] == 2:
            break
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert h["held_streams"] == 1 and h["pool"]["idle"] == 0
    assert held.next(timeout=1).comment == "heartbeat"
    for t in slow:
        t.join(10)
    held.close()


def test_phase6_the_stream_is_framed_as_a_hold(start_server):
    server = rt_server(start_server, "--heartbeat", "0.2")
    s, _ = open_stream(server.port)
    assert s.headers["content-type"] == "text/event-stream"
    assert s.headers["cache-control"] == "no-cache"
    assert s.headers["x-accel-buffering"] == "no"
    assert "transfer-encoding" not in s.headers
    assert "content-length" not in s.headers
    assert not any(name.startswith("m0-") for name in s.headers)
    assert s.next(timeout=2).comment == "heartbeat"
    event_id = publish(server.port, "framed")
    ev = s.next_event()
    assert ev.id == event_id
    # Raw bytes: SSE lines, no chunk-size lines between them.
    assert b"id: %d\nevent: message\ndata: " % event_id in s.raw
    s.close()


def test_phase7_sigterm_with_held_streams_exits_0_promptly(start_server):
    server = rt_server(start_server, workers=2)
    streams = [open_stream(server.port)[0] for _ in range(4)]
    began = time.monotonic()
    server.signal(signal.SIGTERM)
    assert all(s.wait_closed(timeout=5) for s in streams)   # a clean FIN, not a hang
    assert server.wait(10) == 0
    assert time.monotonic() - began < 3.0



def health_of(port, deadline, want):
    """/health from the worker for which want(document) holds, asking on
    new connections (reuseport spreads them) until the deadline."""
    while True:
        h = health(port)
        if want(h):
            return h
        assert time.monotonic() < deadline, "no such /health answer; last %r" % h


def test_health_says_what_a_worker_published_and_what_it_received(start_server):
    """Issue 27 item 14: /health's events_published is what this worker's
    application published (m0pub.publish calls: m0serve_publishes_total,
    per worker); events_received is what its bus gave it (each worker gets
    every event: m0serve_bus_events_received_total)."""
    server = start_server("realtime_app:application", "--realtime", workers=2)
    deadline = time.monotonic() + 10
    # Both workers serve (a worker reads the bus from the moment it serves:
    # an event published before it did is not its to receive).
    first = health_of(server.port, deadline, lambda h: True)["pid"]
    health_of(server.port, deadline, lambda h: h["pid"] != first)
    with Conn(server.port) as c:                  # one connection: one worker
        assert c.request("GET", "/publish?channel=hc&n=3").status == 200
        pid = json.loads(c.request("GET", "/health").body)["pid"]
    # Its own events come back on its bus too; the bus is read by the loop.
    mine = health_of(server.port, deadline, lambda h: h["pid"] == pid and h["events_received"] >= 3)
    other = health_of(server.port, deadline, lambda h: h["pid"] != pid and h["events_received"] >= 3)
    assert (mine["events_published"], mine["events_received"]) == (3, 3)
    assert (other["events_published"], other["events_received"]) == (0, 3)


def _read_head(sock, buf=b""):
    """(head, what followed it) from a raw socket."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, buf
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode("latin-1"), rest


def test_a_held_stream_is_logged_once_when_it_ends_with_its_bytes_and_duration(start_server):
    """Issue 27 item 15: as nginx logs a long request, one access-log line
    when the stream ends: the request line and status it began with, every
    byte sent after the head (the view's, then the events'), the time from
    the request to the close — not a "200 <the view's bytes>" line when it
    opens."""
    server = start_server("realtime_app:application", "--realtime", "--heartbeat", "0", "--access-log",
                          "--access-log-format", "%(r)s %(s)s %(B)s %(D)s")
    t0 = t_head = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    try:
        sock.sendall(b"GET /events?channel=alog HTTP/1.1\r\nHost: x\r\n\r\n")
        head, body = _read_head(sock)
        t_head = time.monotonic()
        assert head.startswith("HTTP/1.1 200")
        while b"\n\n" not in body:                # the view's own ": connected ..." block
            body += sock.recv(65536)
        # Held now: a request after it is logged, the stream is not (yet).
        assert request(server.port, "GET", "/pid").status == 200
        assert server.stdout.wait_for(re.compile(r"^GET /pid HTTP/1.1 200 "), 5)
        assert "/events" not in server.stdout.text()
        assert request(server.port, "GET", "/publish?channel=alog&n=2").status == 200
        while body.count(b"\n\n") < 3:
            chunk = sock.recv(65536)
            assert chunk, body
            body += chunk
    finally:
        held_for = time.monotonic() - t_head
        sock.close()
    line = server.stdout.wait_for(re.compile(r"^GET /events\?channel=alog HTTP/1.1 200 (\d+) (\d+)$"), 5)
    assert line, server.stdout.text()
    assert int(line.group(1)) == len(body), (line.string, body)
    # From the request to the close: longer than the client held it after
    # the head, shorter than the whole test so far.
    assert held_for * 1e6 <= int(line.group(2)) <= (time.monotonic() - t0) * 1e6, line.string
    assert len(re.findall(r"(?m)^GET /events", server.stdout.text())) == 1
