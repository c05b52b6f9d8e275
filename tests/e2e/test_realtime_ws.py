"""smoke-django-realtime-ws: WebSocket holds from plain synchronous Django
views (issue 10) — against examples/django_realtime's /ws/chat and /ws/echo.

1 one publish reaches two EventSources and two WebSockets on two workers,
  with the same data; 2 an inbound message relayed through a Django view
  that publishes it, and channel isolation; 3 a raw-socket RFC 6455 probe
  (accept value, 1002 for unmasked and reserved-bit frames, fragments
  reassembled around a ping, ping → pong, close(1000) echoed then FIN,
  1009, 1007, an abrupt vanish releases the slot); 4 handshake refusals and
  the degraded answers (HEAD, POST, no --realtime, forged M0-* headers);
  5 heartbeat pings, and a peer that never answers is closed; 6 the pool:
  slow views in flight do not delay a handshake and an echo, and with every
  thread busy the loop still serves the socket; 7 messages keep their order
  past the queue bound; 8 SIGTERM closes sockets with 1001.

The WebSocket clients are the `websockets` library (tests 1, 2, 6) and a
raw socket (wsraw.py) where the test needs bytes no library would send.
"""

import asyncio
import json
import re
import signal
import struct
import threading
import time

import websockets

from rawhttp import request
from serverproc import EXAMPLES_DIR
from sse import SSEStream
from test_realtime import WORKER_RE, csrf, health, publish
from wsraw import BINARY, CLOSE, CONT, PING, PONG, TEXT, RawWS, expected_accept

SITE = EXAMPLES_DIR / "django_realtime"


def rt_server(start_server, *args, workers=1):
    return start_server("rtsite.wsgi:application", "--realtime", *args, app_dir=SITE, workers=workers)


def ws_url(port, path):
    return "ws://127.0.0.1:%d%s" % (port, path)


async def connect(port, path, **kw):
    return await websockets.connect(ws_url(port, path), open_timeout=5, close_timeout=2, **kw)


def open_sse(port, channel):
    s = SSEStream(port, "/events?channel=%s" % channel)
    assert s.status == 200
    return s, int(WORKER_RE.search(s.next().comment).group(1))


def wait_health(port, predicate, timeout=2.0):
    deadline = time.monotonic() + timeout
    while True:
        h = health(port)
        if predicate(h):
            return h
        assert time.monotonic() < deadline, "health never satisfied the condition: %r" % h
        time.sleep(0.02)


# ----------------------------------------------------------- 1 fan-out

def test_one_publish_reaches_eventsources_and_websockets_on_two_workers(start_server):
    server = rt_server(start_server, workers=2)
    port = server.port
    streams, spare = {}, []
    for _ in range(60):                          # reuseport spreads connections
        s, worker = open_sse(port, "news")
        (spare if worker in streams else []).append(s)
        streams.setdefault(worker, s)
        if len(streams) == 2:
            break
    assert len(streams) == 2, "could not hold streams on two workers"
    token = csrf(port)

    async def main():
        sockets, spare_ws = {}, []
        for _ in range(60):
            ws = await connect(port, "/ws/chat?channel=news")
            worker = int(ws.response.headers["X-Worker"])
            (spare_ws if worker in sockets else []).append(ws)
            sockets.setdefault(worker, ws)
            if len(sockets) == 2:
                break
        assert len(sockets) == 2, "could not hold sockets on two workers"
        assert set(sockets) == set(streams)
        text = "first line\nsecond line, ünïcode"
        event_id = await asyncio.to_thread(publish_raw, port, text, token)
        got = [await asyncio.wait_for(ws.recv(), 5) for ws in sockets.values()]
        for ws in spare_ws + list(sockets.values()):
            await ws.close()
        return event_id, got

    event_id, got = asyncio.run(main())
    for s in streams.values():
        ev = s.next_event()
        assert ev.id == event_id
        assert ev.data == "first line\nsecond line, ünïcode"
    # A text frame (str), byte-identical to what onmessage sees.
    assert got == ["first line\nsecond line, ünïcode"] * 2
    for s in list(streams.values()) + spare:
        s.close()


def publish_raw(port, text, token, channel="news"):
    """POST /publish with raw=1: the text itself is the event's data."""
    from urllib.parse import urlencode
    body = urlencode({"text": text, "channel": channel, "raw": "1"}).encode()
    response = request(port, "POST", "/publish", [
        ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
        ("Cookie", "csrftoken=%s" % token), ("X-CSRFToken", token)], body=body)
    assert response.status == 200, response.body
    return json.loads(response.body)["id"]


# ------------------------------------------------- 2 relay and isolation

def test_inbound_message_relayed_through_a_django_view_and_channels_isolated(start_server):
    server = rt_server(start_server, "--blocking-threads", "2")
    port = server.port
    es, _ = open_sse(port, "room-a")
    token = csrf(port)

    async def main():
        a = await connect(port, "/ws/chat?channel=room-a", subprotocols=["chat.v1"])
        b = await connect(port, "/ws/chat?channel=room-a")
        c = await connect(port, "/ws/chat?channel=room-b")
        assert a.subprotocol == "chat.v1" and b.subprotocol is None
        await wait_health_async(port, lambda h: h["websockets"] == 3)
        await a.send("hello from A")                  # → POST /ws/chat on a pool thread → publish
        got_a = await asyncio.wait_for(a.recv(), 5)
        got_b = await asyncio.wait_for(b.recv(), 5)
        # Isolation: c's first message is the marker published after, not A's.
        await asyncio.to_thread(publish, port, "marker", "room-b", token)
        got_c = json.loads(await asyncio.wait_for(c.recv(), 5))
        for ws in (a, b, c):
            await ws.close()
        return got_a, got_b, got_c

    got_a, got_b, got_c = asyncio.run(main())
    assert got_a == got_b
    assert json.loads(got_a)["text"] == "hello from A"
    assert es.next_event().data == got_a               # the EventSource got the same bytes
    assert got_c["text"] == "marker"
    es.close()


async def wait_health_async(port, predicate, timeout=2.0):
    return await asyncio.to_thread(wait_health, port, predicate, timeout)


# ---------------------------------------------------- 3 the raw probe

def test_raw_rfc6455_probe(start_server):
    server = rt_server(start_server, "--ws-max-message", "1024", "--blocking-threads", "2")
    port = server.port

    # The handshake: 101 with the accept value computed from our key.
    ws = RawWS(port, "/ws/echo")
    assert ws.status == 101
    assert ws.headers["sec-websocket-accept"] == expected_accept(ws.key)
    assert ws.headers["upgrade"].lower() == "websocket"
    assert ws.headers["connection"].lower() == "upgrade"
    assert "content-length" not in ws.headers and "transfer-encoding" not in ws.headers
    assert not any(name.startswith("m0-") for name in ws.headers)

    # Echo through the view, text and binary.
    ws.send_text("plain")
    f = ws.recv_data()
    assert (f.opcode, f.payload) == (TEXT, b"plain")
    ws.send(BINARY, b"\x00\xff\x10")
    f = ws.recv_data()
    assert (f.opcode, f.payload) == (BINARY, b"\x00\xff\x10")

    # Ping → pong with the same payload, answered by the loop.
    ws.send(PING, b"are you there")
    f = ws.recv()
    assert (f.opcode, f.payload) == (PONG, b"are you there")

    # A fragmented text message, a ping between its fragments, é split
    # across two of them: reassembled into one message.
    ws.send(TEXT, b"h\xc3", fin=False)
    ws.send(PING, b"mid")
    ws.send(CONT, b"\xa9llo ", fin=False)
    ws.send(CONT, b"world", fin=True)
    f = ws.recv()
    assert (f.opcode, f.payload) == (PONG, b"mid")
    f = ws.recv_data()
    assert (f.opcode, f.payload) == (TEXT, "héllo world".encode())

    # close(1000) is echoed, then the server ends the TCP connection.
    ws.close_frame(1000, b"bye")
    f = ws.recv()
    assert f.opcode == CLOSE and f.close_code == 1000
    assert ws.wait_eof(3)
    ws.close()

    # Failures, each answered with its close code and then a FIN.
    cases = [
        ("unmasked client frame", RawWS.frame(TEXT, b"x", mask=False), 1002),
        ("reserved bit", RawWS.frame(TEXT, b"x", rsv=4), 1002),
        ("reserved opcode", RawWS.frame(0x3, b"x"), 1002),
        ("oversize", RawWS.frame(BINARY, b"x" * 1025), 1009),
        ("oversize in fragments", RawWS.frame(TEXT, b"a" * 600, fin=False) + RawWS.frame(CONT, b"b" * 600), 1009),
        ("invalid UTF-8", RawWS.frame(TEXT, b"ok \xff"), 1007),
        ("a close code not for the wire", RawWS.frame(CLOSE, struct.pack(">H", 1005)), 1002),
    ]
    for name, data, code in cases:
        with RawWS(port, "/ws/echo") as ws:
            assert ws.status == 101
            ws.send_raw(data)
            f = ws.recv()
            assert f.opcode == CLOSE and f.close_code == code, (name, f)
            assert ws.wait_eof(3), name

    # An abrupt vanish after the 101 releases the slot at once.
    wait_health(port, lambda h: h["websockets"] == 0)
    held = [RawWS(port, "/ws/chat?channel=vanish") for _ in range(3)]
    assert all(ws.status == 101 for ws in held)
    h = wait_health(port, lambda h: h["websockets"] == 3)
    assert {"channel": "vanish", "subscribers": 3} in h["channels"]
    connections = h["connections"]
    held[0].sock.close()
    h = wait_health(port, lambda h: h["websockets"] == 2, timeout=1.0)
    assert h["connections"] == connections - 1
    assert {"channel": "vanish", "subscribers": 2} in h["channels"]
    for ws in held[1:]:
        ws.close()
    wait_health(port, lambda h: h["websockets"] == 0 and h["channels"] == [], timeout=1.0)


# ---------------------------------------- 4 refusals and degraded answers

def test_handshake_refusals_and_degraded_answers(start_server):
    server = rt_server(start_server)
    port = server.port
    # Not version 13: 426 naming the version we speak (RFC 6455 §4.4).
    with RawWS(port, "/ws/chat", version="8") as ws:
        assert ws.status == 426
        assert ws.headers["sec-websocket-version"] == "13"
    with RawWS(port, "/ws/chat", version=None) as ws:
        assert ws.status == 426
    # A key that is not 16 bytes of base64: 400.
    with RawWS(port, "/ws/chat", key="c2hvcnQ=") as ws:
        assert ws.status == 400
    # The view approves a plain GET, which is no handshake: 400.
    response = request(port, "GET", "/ws/chat")
    assert response.status == 400
    # HEAD is never held: an ordinary answer (another method is refused, item 9 below).
    upgrade = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
               ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]
    response = request(port, "HEAD", "/ws/chat", upgrade)
    assert response.status == 200 and response.header("upgrade") is None
    # A client's own M0-* headers never reach the view: a forged message is
    # just a POST, which @websocket_view refuses.
    response = request(port, "POST", "/ws/chat?channel=news", [
        ("M0-Channel", "news"), ("M0-Slot", "1"), ("M0-Opcode", "text"),
        ("Content-Type", "text/plain")], body=b"forged")
    assert response.status == 403
    # A subprotocol the client did not offer is never claimed.
    with RawWS(port, "/ws/chat", headers=[("Sec-WebSocket-Protocol", "other, chat.v1")]) as ws:
        assert ws.status == 101 and ws.headers["sec-websocket-protocol"] == "chat.v1"
    with RawWS(port, "/ws/chat", headers=[("Sec-WebSocket-Protocol", "other")]) as ws:
        assert ws.status == 101 and "sec-websocket-protocol" not in ws.headers


UPGRADE = [("Upgrade", "websocket"), ("Connection", "Upgrade"),
           ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]


def test_issue23_item9_a_handshake_by_another_method_than_get_is_refused(start_server):
    """RFC 6455 §4.2.1: the handshake is a GET. A plain WSGI view that
    approves whatever comes gets a POST or PUT refused with the 400 the ASGI
    path answers, never its own body; HEAD still degrades."""
    server = start_server("realtime_app:application", "--realtime")
    asgi = start_server("asgi_ws:app", "--realtime")
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        response = request(server.port, method, "/ws", UPGRADE, body=b"x" if method != "DELETE" else None)
        assert response.status == 400, (method, response)
        assert b"ws approved" not in response.body
        assert b"GET" in response.body
        assert response.header("sec-websocket-accept") is None
        refused = request(asgi.port, method, "/ws/echo", UPGRADE, body=b"x" if method != "DELETE" else None)
        assert (refused.status, refused.body) == (response.status, response.body), method
    response = request(server.port, "HEAD", "/ws", UPGRADE)
    assert response.status == 200 and response.header("upgrade") is None
    assert response.header("sec-websocket-accept") is None
    with RawWS(server.port, "/ws") as ws:          # the GET it approves is a WebSocket
        assert ws.status == 101
        assert ws.headers["sec-websocket-accept"] == expected_accept(ws.key)


def test_without_realtime_the_approval_is_an_ordinary_response(start_server):
    server = start_server("rtsite.wsgi:application", app_dir=SITE)
    with RawWS(server.port, "/ws/chat") as ws:
        assert ws.status == 200
        assert "sec-websocket-accept" not in ws.headers
        assert not any(name.startswith("m0-") for name in ws.headers)


# ------------------------------------------------------- 5 heartbeats

def test_pings_at_the_heartbeat_cadence_and_a_silent_peer_is_closed(start_server):
    server = rt_server(start_server, "--heartbeat", "0.3")
    port = server.port
    live = RawWS(port, "/ws/echo")
    silent = RawWS(port, "/ws/echo")
    assert live.status == silent.status == 101
    # The live peer answers every ping and stays; the silent one never
    # answers and is closed after two intervals (plus the 200 ms sweep).
    began = time.monotonic()
    pings = 0
    while time.monotonic() - began < 1.5:
        f = live.recv(timeout=1.0)
        assert f.opcode == PING
        pings += 1
        live.send(PONG, f.payload)
    assert pings >= 3
    f = silent.recv(timeout=1.0)
    assert f.opcode == PING
    assert silent.wait_eof(timeout=2.0)
    assert wait_health(port, lambda h: h["websockets"] == 1)["websockets"] == 1
    live.send_text("still here")
    assert live.recv_data().payload == b"still here"
    live.close()
    silent.close()


# ------------------------------------------------------------- 6 the pool

def slow_views(port, n, busy_at_least):
    threads = [threading.Thread(target=request, args=(port, "GET", "/slow?s=1.5"), daemon=True)
               for _ in range(n)]
    for t in threads:
        t.start()
    wait_health(port, lambda h: h["pool"]["busy"] >= busy_at_least, timeout=5)
    return threads


def test_handshake_and_echo_while_slow_views_hold_pool_threads(start_server):
    # Two 1.5 s views in flight take two handler threads; the socket's
    # handshake view and its message view run on the others, and the loop
    # never waits for any of them.
    server = rt_server(start_server, "--blocking-threads", "4")
    port = server.port
    slow = slow_views(port, 2, 2)

    async def main():
        began = time.monotonic()
        ws = await connect(port, "/ws/echo")
        await ws.send("echo me")
        got = await asyncio.wait_for(ws.recv(), 5)
        took = time.monotonic() - began
        await ws.close()
        return got, took

    got, took = asyncio.run(main())
    assert got == "echo me"
    assert took < 1.0, "handshake + echo took %.3f s" % took
    assert health(port)["pool"]["busy"] >= 2          # the slow views were still running
    for t in slow:
        t.join(10)


def test_issue22_a_message_view_counts_in_flight_like_a_request(start_server):
    # A message's view on the pool is a job of the mount like a request's:
    # counted when it goes, uncounted when it comes back. The completion
    # used to uncount a job never counted (the mount's in_flight wrapped
    # to 2**32 - 1 after the first message).
    server = rt_server(start_server, "--blocking-threads", "2")
    port = server.port

    async def main():
        ws = await connect(port, "/ws/echo")
        for i in range(3):
            await ws.send("echo %d" % i)
            assert await asyncio.wait_for(ws.recv(), 5) == "echo %d" % i
        await ws.close()

    asyncio.run(main())
    h = wait_health(port, lambda h: h["websockets"] == 0)
    root = [m for m in h["mounts"] if m["prefix"] == "/"][0]
    assert root["in_flight"] == 0, root


def test_every_thread_busy_the_loop_still_serves_the_socket(start_server):
    # --blocking-threads 2 and two 1.5 s views: no thread is free for a view,
    # but what the loop owes the socket on its own (pong, /health) is
    # prompt, and messages sent meanwhile are answered in order once a
    # thread frees.
    server = rt_server(start_server, "--blocking-threads", "2")
    port = server.port
    ws = RawWS(port, "/ws/echo")
    assert ws.status == 101
    slow = slow_views(port, 2, 2)
    began = time.monotonic()
    ws.send_text("one")
    ws.send_text("two")
    ws.send(PING, b"p")
    f = ws.recv(timeout=1.0)
    assert (f.opcode, f.payload) == (PONG, b"p")
    assert time.monotonic() - began < 0.5
    assert health(port)["pool"]["busy"] == 2
    assert [ws.recv_data(timeout=5).payload for _ in range(2)] == [b"one", b"two"]
    ws.close()
    for t in slow:
        t.join(10)


# --------------------------------------------------- 7 order past the bound

def test_messages_keep_their_order_past_the_queue_bound(start_server):
    server = rt_server(start_server, "--blocking-threads", "2")
    with RawWS(server.port, "/ws/echo?delay=0.005") as ws:
        assert ws.status == 101
        ws.send_raw(b"".join(RawWS.frame(TEXT, "m%d" % i) for i in range(60)))
        got = [ws.recv_data(timeout=10).payload.decode() for _ in range(60)]
        assert got == ["m%d" % i for i in range(60)]


# ----------------------------------------------------------- 8 SIGTERM

def test_sigterm_closes_sockets_with_1001_and_exits_0(start_server):
    server = rt_server(start_server)
    ws = RawWS(server.port, "/ws/chat?channel=news")
    assert ws.status == 101
    wait_health(server.port, lambda h: h["websockets"] == 1)
    server.signal(signal.SIGTERM)
    f = ws.recv(timeout=5)
    assert f.opcode == CLOSE and f.close_code == 1001
    assert ws.wait_eof(5)
    assert server.wait(10) == 0
    ws.close()


# ------------------------------------------------ no pool; Flask's helpers

def test_messages_run_on_the_loop_thread_without_a_pool(start_server):
    server = rt_server(start_server, "--blocking-threads", "0")
    with RawWS(server.port, "/ws/echo") as ws:
        assert ws.status == 101
        ws.send_raw(b"".join(RawWS.frame(TEXT, "n%d" % i) for i in range(30)))
        assert [ws.recv_data().payload for _ in range(30)] == [b"n%d" % i for i in range(30)]
        ws.send(PING, b"x")
        assert ws.recv().opcode == PONG
    a = RawWS(server.port, "/ws/chat?channel=inline")
    b = RawWS(server.port, "/ws/chat?channel=inline")
    a.send_text("relayed inline")
    got_a, got_b = a.recv_data().payload, b.recv_data().payload
    assert got_a == got_b and json.loads(got_a)["text"] == "relayed inline"
    a.close()
    b.close()


def test_flask_helpers(start_server):
    server = start_server("flask_ws:app", "--realtime")
    with RawWS(server.port, "/ws") as ws:
        assert ws.status == 101
        ws.send_text("shout")
        assert ws.recv_data().payload == b"SHOUT"
        ws.send(BINARY, b"\x01\x02\x03")
        f = ws.recv_data()
        assert (f.opcode, f.payload) == (BINARY, b"\x03\x02\x01")
    stray = request(server.port, "POST", "/ws", body=b"x")  # a POST that is not a message
    assert stray.status == 403
    forged = request(server.port, "POST", "/ws", headers=[("M0-Channel", "room")], body=b"x")
    assert forged.status == 403                           # M0-* from a client never count
    plain = start_server("flask_ws:app")                  # no --realtime: an ordinary answer
    with RawWS(plain.port, "/ws") as ws:
        assert ws.status == 200 and "sec-websocket-accept" not in ws.headers


def test_messages_sent_before_a_close_or_a_vanish_all_reach_the_views(start_server):
    server = start_server("flask_ws:app", "--realtime", "--blocking-threads", "2")
    with RawWS(server.port, "/ws/log") as ws:              # messages, then a close frame at once
        assert ws.status == 101
        ws.send_raw(b"".join(RawWS.frame(TEXT, "c%d" % i) for i in range(40)) +
                    RawWS.frame(CLOSE, struct.pack(">H", 1000)))
        f = ws.recv(timeout=5)
        assert (f.opcode, f.close_code) == (CLOSE, 1000)
    assert server.stderr.wait_for(re.compile(r"flask-ws: got c39$"), 10)
    ws = RawWS(server.port, "/ws/log")                     # messages, then the TCP connection closed
    ws.send_raw(b"".join(RawWS.frame(TEXT, "v%d" % i) for i in range(40)))
    ws.close()
    assert server.stderr.wait_for(re.compile(r"flask-ws: got v39$"), 10)
    lines = set(server.stderr.text().split("\n"))
    assert all("flask-ws: got c%d" % i in lines and "flask-ws: got v%d" % i in lines for i in range(40))
    assert request(server.port, "GET", "/ws/log").status != 500    # the worker serves on


def test_a_websocket_is_logged_when_it_ends_and_each_message_with_its_time(start_server):
    """Issue 27 item 15: the handshake's line is written when the socket
    ends (nginx's way): its request line, 101, every byte sent on the
    socket (frames), the time to the close — not "101 0" when it opens.
    Each inbound message's line has the time its view took, not 0."""
    server = rt_server(start_server, "--heartbeat", "0", "--access-log", "--access-log-format",
                       "%(r)s %(s)s %(B)s %(D)s")
    ws = RawWS(server.port, "/ws/echo")
    assert ws.status == 101
    t_open = time.monotonic()
    ws.send_text("plain")
    echo = ws.recv_data()
    assert echo.payload == b"plain"
    message = server.stdout.wait_for(re.compile(r"^POST /ws/echo\S* HTTP/1.1 200 5 (\d+)$"), 5)
    assert message, server.stdout.text()
    assert int(message.group(1)) > 0, message.string
    assert "GET /ws/echo" not in server.stdout.text()        # still open: not logged yet
    ws.close_frame(1000, b"bye")
    held_for = time.monotonic() - t_open          # the server ends after it reads our close
    closing = ws.recv()
    assert closing.opcode == CLOSE
    assert ws.wait_eof()
    line = server.stdout.wait_for(re.compile(r"^GET /ws/echo HTTP/1.1 101 (\d+) (\d+)$"), 5)
    assert line, server.stdout.text()
    assert int(line.group(1)) == (2 + len(echo.payload)) + (2 + len(closing.payload)), line.string
    assert int(line.group(2)) >= held_for * 1e6, (line.string, held_for)
    assert len(re.findall(r"(?m)^GET /ws/echo", server.stdout.text())) == 1
