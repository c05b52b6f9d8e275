"""smoke-asgi: WebSocket scopes for ASGI applications (issue 9).

The handshake is checked by the server before the application sees it; the
101 waits for websocket.accept; messages flow both ways in order; close
codes travel both ways; an application that does not accept gets 403.
Clients: the `websockets` library as users run it, and wsraw.RawWS where a
test needs the bytes on the wire.
"""

import json
import re
import signal
import socket
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from rawhttp import Conn, request
from serverproc import EXAMPLES_DIR, binary_is_sanitized, rss_kb
from wsraw import BINARY, CLOSE, PING, PONG, TEXT, RawWS, expected_accept

APP = "asgi_ws:app"


def url(server, path):
    return "ws://127.0.0.1:%d%s" % (server.port, path)


def test_starlette_websocketroute_echo_with_the_websockets_client(start_server):
    server = start_server("starlette_app:app")
    with connect(url(server, "/ws"), open_timeout=5) as ws:
        ws.send("hi")
        assert ws.recv(timeout=5) == "echo: hi"
        ws.send("bye")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert closed.value.rcvd.code == 1000


def test_text_and_bytes_echo_in_order_with_a_subprotocol(start_server):
    server = start_server(APP)
    with connect(url(server, "/ws/echo"), subprotocols=["other", "chat"], open_timeout=5) as ws:
        assert ws.subprotocol == "chat"
        for i in range(200):              # sent without waiting: order is kept
            ws.send("m%d" % i if i % 2 else b"b%d" % i)
        for i in range(200):
            assert ws.recv(timeout=5) == ("m%d" % i if i % 2 else b"b%d" % i)
        ws.send("close:4001")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=5)
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (4001, "bye")


def test_the_websocket_scope_follows_the_asgi_spec(start_server):
    server = start_server(APP)
    with RawWS(server.port, "/ws/sc%6Fpe?x=1", headers=[("Sec-WebSocket-Protocol", "a, chat"),
                                                        ("X-Custom", "V")]) as ws:
        assert ws.status == 101
        scope = json.loads(ws.recv_data().payload)
    assert scope["type"] == "websocket" and scope["scheme"] == "ws"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert "method" not in scope
    assert scope["http_version"] == "1.1"
    assert (scope["path"], scope["raw_path"], scope["query_string"]) == ("/ws/scope", "/ws/sc%6Fpe", "x=1")
    assert scope["subprotocols"] == ["a", "chat"]
    assert ["x-custom", "V"] in scope["headers"]
    assert all(name == name.lower() for name, _ in scope["headers"])
    assert scope["client"][0] == "127.0.0.1" and scope["server"] == ["127.0.0.1", server.port]
    assert "websocket.http.response" in scope["extensions"]


def test_behind_a_trusted_proxy_the_scheme_is_wss(start_server):
    server = start_server(APP)
    with RawWS(server.port, "/ws/scope", headers=[("X-Forwarded-Proto", "https"),
                                                  ("X-Forwarded-For", "198.51.100.9")]) as ws:
        scope = json.loads(ws.recv_data().payload)
    assert scope["scheme"] == "wss" and scope["client"][0] == "198.51.100.9"


def test_accept_headers_go_on_the_101(start_server):
    server = start_server(APP)
    with RawWS(server.port, "/ws/headers") as ws:
        assert ws.status == 101
        assert ws.headers["sec-websocket-accept"] == expected_accept(ws.key)
        assert ws.headers["set-cookie"] == "a=1; Path=/" and ws.headers["x-extra"] == "yes"
        assert "sec-websocket-protocol" not in ws.headers
        assert ws.recv_data().payload == b"hi"


@pytest.mark.parametrize("path", ["/ws/deny", "/ws/close-first", "/ws/raise-before"])
def test_a_socket_the_application_does_not_accept_gets_403(start_server, path):
    server = start_server(APP)
    with pytest.raises(InvalidStatus) as refused:
        with connect(url(server, path), open_timeout=5):
            pass
    assert refused.value.response.status_code == 403
    if path == "/ws/raise-before":
        assert server.stderr.wait_for(re.compile("refusing this socket by raising"), 5)
    assert request(server.port, "GET", "/").body == b"plain"      # the worker goes on


def test_the_denial_response_extension(start_server):
    server = start_server(APP)
    with RawWS(server.port, "/ws/http-deny") as ws:
        assert ws.status == 401
        assert ws._take(2, time.monotonic() + 5) == b"no"


@pytest.mark.parametrize("version,key,status", [("8", None, 426), ("13", "short", 400)])
def test_an_invalid_handshake_is_refused_before_the_application(start_server, version, key, status):
    server = start_server(APP)
    with RawWS(server.port, "/ws/echo?tag=never", version=version, key=key) as ws:
        assert ws.status == status
        if status == 426:
            assert ws.headers["sec-websocket-version"] == "13"
    assert request(server.port, "GET", "/").status == 200
    assert "tag=never" not in server.stderr.text()


def test_close_codes_and_reasons_reach_the_application(start_server):
    """websocket.disconnect carries the peer's code and the UTF-8 reason of
    its close frame (RFC 6455 §7.1.5-7.1.6), "" without one."""
    server = start_server(APP)
    with RawWS(server.port, "/ws/echo?tag=coded") as ws:      # the peer closes with a code: echoed
        ws.close_frame(4002, b"leaving")
        frame = ws.recv()
        assert (frame.opcode, frame.close_code) == (CLOSE, 4002)
        assert ws.wait_eof()
    assert server.stderr.wait_for(re.compile("disconnect tag=coded code=4002 reason='leaving'"), 5)
    with RawWS(server.port, "/ws/echo?tag=nocode") as ws:     # a close frame without a code: 1005
        ws.send(CLOSE, b"")
        assert ws.recv().opcode == CLOSE
    assert server.stderr.wait_for(re.compile("disconnect tag=nocode code=1005 reason=''"), 5)
    with RawWS(server.port, "/ws/echo?tag=vanished") as ws:   # no close frame at all: 1006
        ws.send_text("x")
        assert ws.recv_data().payload == b"x"
    assert server.stderr.wait_for(re.compile("disconnect tag=vanished code=1006 reason=''"), 5)


def test_returning_or_raising_after_accept_closes_the_socket(start_server):
    server = start_server(APP)
    for path, first, code in [("/ws/return", "bye", 1000), ("/ws/raise-after", "x", 1011)]:
        with connect(url(server, path), open_timeout=5) as ws:
            assert ws.recv(timeout=5) == first
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=5)
        assert closed.value.rcvd.code == code
    assert server.stderr.wait_for(re.compile("failing after accept"), 5)


def test_frames_sent_right_behind_the_handshake_are_delivered(start_server):
    server = start_server(APP)
    ws = RawWS(server.port, handshake=False)
    head = ("GET /ws/echo HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % ws.key).encode()
    ws.send_raw(head + RawWS.frame(TEXT, "early") + RawWS.frame(BINARY, b"\x01\x02"))
    with ws:
        assert ws.read_head() == 101
        assert ws.recv_data().payload == b"early"
        assert ws.recv_data().payload == b"\x01\x02"


def test_an_idle_socket_is_pinged_without_realtime(start_server):
    server = start_server(APP, "--heartbeat", "0.3")
    with RawWS(server.port, "/ws/echo?tag=idle") as ws:
        frame = ws.recv(timeout=3)
        assert frame.opcode == PING
        assert ws.wait_eof(timeout=5)         # never answered: closed after two intervals
    assert server.stderr.wait_for(re.compile("disconnect tag=idle code=1006"), 5)


def test_a_large_send_is_delivered_whole_and_in_order(start_server):
    server = start_server(APP)
    with connect(url(server, "/ws/big?mb=16"), max_size=None, open_timeout=5) as ws:
        got = 0
        while True:
            m = ws.recv(timeout=10)
            if m == "end":
                break
            assert m == b"\x07" * 65536
            got += len(m)
    assert got == 16 * 1024 * 1024


@pytest.mark.skipif(binary_is_sanitized(), reason="ASan's quarantine makes RSS growth meaningless")
def test_a_slow_reader_costs_bounded_memory(start_server):
    server = start_server(APP)
    pid = next(iter(server.worker_pids()))
    before = rss_kb(pid)
    with RawWS(server.port, "/ws/big?mb=64") as ws:
        ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        time.sleep(1.5)                       # the application sends into a socket nobody reads
        grown = rss_kb(pid) - before
        total = 0
        while True:
            f = ws.recv_data(timeout=20)
            if f.opcode == TEXT:
                break
            total += len(f.payload)
    assert total == 64 * 1024 * 1024
    assert grown < 8 * 1024, "RSS grew %d kB with a 64 MiB send to a stalled reader" % grown


def test_an_accepted_socket_with_a_channel_receives_publishes(start_server):
    server = start_server(APP, "--realtime", workers=2)
    server.wait_workers(lambda p: len(p) == 2)
    with connect(url(server, "/ws/hold?channel=room"), open_timeout=5) as ws:
        assert ws.recv(timeout=5) == "held"
        published = request(server.port, "GET", "/publish?channel=room")
        assert published.status == 200
        assert ws.recv(timeout=5) == "to-sockets"


def test_sigterm_closes_sockets_with_1001(start_server):
    server = start_server(APP)
    with RawWS(server.port, "/ws/echo?tag=drain") as ws:
        ws.send_text("ping?")
        assert ws.recv_data().payload == b"ping?"
        server.signal(signal.SIGTERM)
        frame = ws.recv(timeout=5)
        assert (frame.opcode, frame.close_code) == (CLOSE, 1001)
    assert server.stderr.wait_for(re.compile("disconnect tag=drain code=1001"), 5)
    assert server.wait(10) == 0


def test_many_sockets_at_once(start_server):
    server = start_server(APP)
    errors = []

    def client(i):
        try:
            with connect(url(server, "/ws/echo"), open_timeout=10) as ws:
                for j in range(20):
                    ws.send("%d-%d" % (i, j))
                    assert ws.recv(timeout=10) == "%d-%d" % (i, j)
        except Exception as exc:              # reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert request(server.port, "GET", "/").status == 200


def test_the_fastapi_example_serves_json_a_stream_and_a_websocket(start_server):
    server = start_server("main:app", "--realtime", app_dir=EXAMPLES_DIR / "fastapi_app")
    assert request(server.port, "GET", "/").status == 200
    assert json.loads(request(server.port, "GET", "/api/hello").body)["message"] == "hello from FastAPI on m0serve"
    assert request(server.port, "GET", "/api/count?n=2").body == b"line 1 of 2\nline 2 of 2\n"
    with connect(url(server, "/ws/echo"), open_timeout=5) as ws:
        ws.send("hello")
        assert ws.recv(timeout=5) == "echo: hello"


def test_messages_sent_before_a_close_all_reach_the_application(start_server):
    server = start_server(APP)
    with connect(url(server, "/ws/count?tag=closed&delay=0.3"), open_timeout=5) as ws:
        for i in range(100):              # queued while the application sleeps
            ws.send("m%d" % i)
    assert server.stderr.wait_for(re.compile("count tag=closed n=100 code=1000"), 10)
    ws = RawWS(server.port, "/ws/count?tag=vanished&delay=0.3")
    for i in range(50):
        ws.send_text("v%d" % i)
    ws.close()                            # no close frame: the peer vanishes
    assert server.stderr.wait_for(re.compile("count tag=vanished n=50 code=1006"), 10)


def test_a_client_leaving_before_accept_is_seen_at_once(start_server):
    server = start_server(APP)
    ws = RawWS(server.port, "/ws/echo?tag=early", handshake=False)
    ws.send_raw(("GET /ws/deny-late HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % ws.key).encode())
    time.sleep(0.2)
    ws.close()                            # a FIN while the application awaits receive() before accepting
    assert server.stderr.wait_for(re.compile("deny-late saw websocket.disconnect code=1006"), 5)


def test_a_handshake_split_over_field_lines_is_a_websocket(start_server):
    server = start_server(APP)
    for split in (["Connection: keep-alive", "Connection: Upgrade", "Upgrade: websocket"],
                  ["Connection: Upgrade", "Upgrade: h2c", "Upgrade: websocket"]):
        ws = RawWS(server.port, handshake=False)
        lines = ["GET /ws/echo HTTP/1.1", "Host: x"] + split + [
            "Sec-WebSocket-Key: %s" % ws.key, "Sec-WebSocket-Version: 13"]
        ws.send_raw(("\r\n".join(lines) + "\r\n\r\n").encode())
        with ws:
            assert ws.read_head() == 101, split
            ws.send_text("split")
            assert ws.recv_data().payload == b"split"


def test_accept_headers_the_server_owns_are_not_duplicated(start_server):
    server = start_server(APP)
    ws = RawWS(server.port, handshake=False)
    ws.send_raw(("GET /ws/proto-header HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
                 % ws.key).encode())
    with ws:
        head = ws._until(b"\r\n\r\n").lower()
        assert head.startswith(b"http/1.1 101 ")
        assert head.count(b"\r\nupgrade:") == 1 and head.count(b"sec-websocket-protocol: chat") == 1
        assert b"\r\nx-kept: 1" in head
        assert ws.recv_data().payload == b"ok"
    with pytest.raises(InvalidStatus):        # the header names a subprotocol the client did not offer
        with connect(url(server, "/ws/proto-header"), open_timeout=5):
            pass


def test_a_ping_while_a_large_message_is_queued_keeps_the_socket(start_server):
    server = start_server(APP, "--heartbeat", "2")
    with RawWS(server.port, "/ws/one?s=16000000") as ws:
        ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
        time.sleep(0.5)                   # the message waits in the server's outbox
        ws.send(PING, b"there?")
        time.sleep(1.0)                   # a slow reader, inside two heartbeats
        frames = []
        while not frames or frames[-1].opcode != TEXT:
            frames.append(ws.recv(timeout=20))
    kinds = [(f.opcode, len(f.payload)) for f in frames if f.opcode != PING]
    assert (PONG, 6) in kinds and (BINARY, 16000000) in kinds, kinds
    assert frames[-1].payload == b"end"


def test_sending_while_publishes_reach_the_same_socket_never_stalls(start_server):
    """The outbox of a socket that is also subscribed drains through the
    fan-out's writes as well as EPOLLOUT: either way the application's
    send gets its credit back."""
    server = start_server(APP, "--realtime")
    stop = threading.Event()

    def publish():
        with Conn(server.port) as conn:
            while not stop.is_set():
                conn.request("GET", "/publish?channel=blast")
                time.sleep(0.002)

    publisher = threading.Thread(target=publish)
    with RawWS(server.port, "/ws/hold-blast?channel=blast&n=40&s=300000", timeout=30) as ws:
        ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        publisher.start()
        got = events = 0
        try:
            while True:
                f = ws.recv(timeout=10)   # a stall shows as a timeout here
                if f.opcode == BINARY:
                    got += 1
                    time.sleep(0.02)      # a reader slower than the server
                elif f.opcode == TEXT and f.payload == b"end":
                    break
                elif f.opcode == TEXT:
                    events += 1
        finally:
            stop.set()
            publisher.join(10)
    assert got == 40 and events > 0


def _cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_a_full_message_queue_stops_reading_without_spinning(start_server):
    server = start_server(APP)
    pid = next(iter(server.worker_pids()))
    with connect(url(server, "/ws/count?tag=full&delay=2.5"), open_timeout=5) as ws:
        for i in range(100):              # far past the queue's bound while the application sleeps
            ws.send("f%d" % i)
        time.sleep(0.3)
        before = _cpu_ticks(pid)
        time.sleep(1.0)
        spent = _cpu_ticks(pid) - before
    assert spent < 30, "the worker used %d%% of a CPU while the socket waited" % spent
    assert server.stderr.wait_for(re.compile("count tag=full n=100 code=1000"), 10)


def test_a_receive_pending_at_accept_gets_the_messages_after_it(start_server):
    """Issue 27 item 6: a task already inside receive() when the route sends
    websocket.accept (Quart's shape) is woken by the messages that follow,
    not only by the client leaving."""
    server = start_server(APP)
    with connect(url(server, "/ws/receive-first"), open_timeout=5) as ws:
        for i in range(3):
            ws.send("m%d" % i)
            assert ws.recv(timeout=5) == "got: m%d" % i


def test_quarts_chat_example_delivers_messages_between_two_clients(start_server):
    """Issue 27 item 6: Quart's examples/chat (tests/apps/quart_chat.py), with
    Quart from PyPI: what one client says reaches both, in order."""
    server = start_server("quart_chat:app")
    page = request(server.port, "GET", "/")
    assert page.status == 200 and b"new WebSocket" in page.body
    with connect(url(server, "/ws"), open_timeout=5) as alice, connect(url(server, "/ws"), open_timeout=5) as bob:
        # Each route subscribes before its lazy accept: after the 101, a
        # publish reaches it.
        alice.send("hello from alice")
        assert alice.recv(timeout=5) == "hello from alice"
        assert bob.recv(timeout=5) == "hello from alice"
        for i in range(5):
            bob.send("bob %d" % i)
        for i in range(5):
            assert alice.recv(timeout=5) == "bob %d" % i
            assert bob.recv(timeout=5) == "bob %d" % i
    assert request(server.port, "GET", "/").status == 200          # the worker goes on
    assert "[ERROR]" not in server.stderr.text()
