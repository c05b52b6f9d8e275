"""GRIP's WebSocket-over-HTTP and stream recovery (issue 32, items 5 and 6).

The project is tests/apps/gripws: django-grip's documented setup
(GripMiddleware, GRIP_URL at the control port with the key) and its
documented WebSocket views — the README's echo service with a broadcast
endpoint, a chat room — unchanged, served by m0serve with --ws-over-http
/ws (two workers, a handler pool each): the sockets are held in C, their
events POSTed to the views as Pushpin's application/websocket-events, the
answers sent back as frames and subscriptions. Other views there exercise
one part of the protocol each and note what they were given in a log.

Item 6: a GRIP stream with prev-id and Grip-Link rel=next whose item does
not chain asks the link once, with Grip-Last, and writes its answer on the
same connection (Pushpin's recovery), instead of ending the stream.
"""

import contextlib
import importlib.util
import json
import re
import socket
import struct
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from serverproc import APPS_DIR, free_port
from wsraw import PING, PONG, TEXT, RawWS

if importlib.util.find_spec("django_grip") is None:
    pytest.skip("the GRIP packages are not installed (requirements/test.txt)", allow_module_level=True)
gripcontrol = pytest.importorskip("gripcontrol")
pubcontrol = pytest.importorskip("pubcontrol")
wsclient = pytest.importorskip("websockets.sync.client")
from websockets.exceptions import ConnectionClosed, InvalidStatus  # noqa: E402

KEY = "test-grip-ws-key-0123456789abcdef-01234567"
WAIT = 10.0
ACCESS_FORMAT = "%(r)s %(s)s %(B)s"


@pytest.fixture(scope="module")
def woh(tmp_path_factory, start_module_server):
    d = tmp_path_factory.mktemp("gripws")
    key = d / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    feeds = d / "feeds"
    feeds.mkdir()
    cport = free_port()
    env = {
        "GRIPWS_GRIP_URL": "http://127.0.0.1:%d?iss=pushpin&key=%s" % (cport, KEY),
        "GRIPWS_LOG": str(d / "notes.log"),
        "GRIPWS_FEEDS": str(feeds),
        "PYTHONPATH": str(APPS_DIR),
        "DJANGO_SETTINGS_MODULE": "gripws.settings",
        "PYTHONWARNINGS": "ignore",
    }
    server = start_module_server("gripws.wsgi", "--grip-key-file", str(key), "--grip-control",
                                 "127.0.0.1:%d" % cport, "--ws-over-http", "/ws", "--access-log",
                                 "--access-log-format", ACCESS_FORMAT, workers=2, env=env)
    return {"port": server.port, "cport": cport, "server": server, "log": d / "notes.log", "feeds": feeds}


def connect(woh, path, **kw):
    kw.setdefault("open_timeout", WAIT)
    kw.setdefault("ping_interval", None)        # the pings a test sends are its own
    return wsclient.connect("ws://127.0.0.1:%d%s" % (woh["port"], path), **kw)


def publisher(woh):
    return gripcontrol.GripPubControl({"control_uri": "http://127.0.0.1:%d" % woh["cport"], "key": KEY})


def post(woh, path, fields):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (woh["port"], path),
                                 data=urllib.parse.urlencode(fields).encode())
    with urllib.request.urlopen(req, timeout=WAIT) as r:
        return r.read()


def notes(woh, pattern, count=1, timeout=WAIT):
    """The lines of the views' log matching pattern once there are at least
    count of them (bounded wait on the file)."""
    deadline = time.monotonic() + timeout
    rx = re.compile(pattern)
    while True:
        text = woh["log"].read_text() if woh["log"].exists() else ""
        found = [ln for ln in text.splitlines() if rx.search(ln)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


def opened_id(ws):
    """The notes view's first message: the socket's Connection-Id."""
    first = ws.recv(timeout=WAIT)
    assert first.startswith("id ")
    return first[3:]


# --------------------------------------------------- django-grip's examples


def test_the_readme_echo_service_echoes_over_a_real_websocket(woh):
    with connect(woh, "/ws/echo/") as ws:
        assert "grip" not in ws.response.headers.get("Sec-WebSocket-Extensions", "")   # never offered
        for text in ("hello", "héllo wörld", "x" * 70000):
            ws.send(text)
            assert ws.recv(timeout=WAIT) == text
    assert woh["server"].stdout.wait_for(re.compile(r"^GET /ws/echo/ HTTP/1.1 101 "), WAIT)


def test_the_readme_broadcast_endpoint_reaches_every_echo_socket(woh):
    """publish() in a view (gripcontrol to the control port): every socket
    the echo view subscribed to 'test', on both workers, gets it."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(connect(woh, "/ws/echo/")) for _ in range(4)]
        assert post(woh, "/ws/broadcast/", {"data": "to everyone"}) == b"Ok\n"
        for ws in sockets:
            assert ws.recv(timeout=WAIT) == "to everyone"


def test_a_chat_room_hears_each_member_and_no_other_room(woh):
    with connect(woh, "/ws/chat/lobby/") as a, connect(woh, "/ws/chat/lobby/") as b, \
            connect(woh, "/ws/chat/kitchen/") as other:
        post(woh, "/ws/chat/lobby/say/", {"text": "welcome"})       # all three have subscribed
        post(woh, "/ws/chat/kitchen/say/", {"text": "kitchen only"})
        assert a.recv(timeout=WAIT) == "welcome" and b.recv(timeout=WAIT) == "welcome"
        assert other.recv(timeout=WAIT) == "kitchen only"
        a.send("hi from a")
        assert a.recv(timeout=WAIT) == "hi from a" and b.recv(timeout=WAIT) == "hi from a"
        b.send("hi from b")
        assert a.recv(timeout=WAIT) == "hi from b" and b.recv(timeout=WAIT) == "hi from b"
        with pytest.raises(TimeoutError):
            other.recv(timeout=0.3)


# ------------------------------------------------- publishes and subscribe


def test_c_subscribe_then_a_gripcontrol_publish_of_a_ws_message_reaches_the_socket(woh):
    with connect(woh, "/ws/echo/") as ws:
        ws.send("subscribed?")
        assert ws.recv(timeout=WAIT) == "subscribed?"
        pub = publisher(woh)
        pub.publish("test", pubcontrol.Item(gripcontrol.WebSocketMessageFormat("from outside")), blocking=True)
        assert ws.recv(timeout=WAIT) == "from outside"
        pub.publish("test", pubcontrol.Item(gripcontrol.WebSocketMessageFormat(b"\x00\xffbin", binary=True)),
                    blocking=True)
        assert ws.recv(timeout=WAIT) == b"\x00\xffbin"
        # Another channel, or an item without a ws-message, sends nothing.
        pub.publish("not-test", pubcontrol.Item(gripcontrol.WebSocketMessageFormat("elsewhere")), blocking=True)
        pub.publish_http_stream("test", "stream only\n", blocking=True)
        ws.send("last")
        assert ws.recv(timeout=WAIT) == "last"


def test_detach_keeps_the_socket_for_publishes_and_posts_nothing_more(woh):
    with connect(woh, "/ws/detach/") as ws:
        cid = notes(woh, r"^detach \S+ OPEN$")[-1].split()[1]
        ws.send("to nobody")
        publisher(woh).publish("detached", pubcontrol.Item(gripcontrol.WebSocketMessageFormat("still here")),
                               blocking=True)
        assert ws.recv(timeout=WAIT) == "still here"
    # Its message and its close were never posted: one request, the OPEN.
    assert notes(woh, r"^detach %s " % cid, count=2, timeout=0.5) == ["detach %s OPEN" % cid]


# --------------------------------------------------------- the socket's end


def test_a_view_answering_with_close_closes_the_socket_with_its_code(woh):
    with connect(woh, "/ws/closer/") as ws:
        ws.send("one")
        assert ws.recv(timeout=WAIT) == "one"
        ws.send("bye")
        with pytest.raises(ConnectionClosed) as ei:
            ws.recv(timeout=WAIT)
    assert ei.value.rcvd.code == 4001
    assert ei.value.rcvd_then_sent                      # the server's close came first


def test_a_clean_close_is_posted_once_as_close_with_its_code(woh):
    with connect(woh, "/ws/notes/") as ws:
        cid = opened_id(ws)
        ws.send("one")
        assert ws.recv(timeout=WAIT) == "got one"
        ws.close(code=4321)
    assert notes(woh, r"^notes %s CLOSE" % cid) == ["notes %s CLOSE 4321" % cid]
    assert notes(woh, r"^notes %s DISCONNECT" % cid, timeout=0.5) == []
    assert len(notes(woh, r"^notes %s CLOSE" % cid, count=2, timeout=0.5)) == 1


def test_a_client_that_disconnects_is_posted_once_as_disconnect(woh):
    """No close frame: the TCP connection just goes (a FIN, and a reset)."""
    for how in ("fin", "reset"):
        ws = RawWS(woh["port"], "/ws/notes/")
        assert ws.status == 101
        cid = ws.recv().payload.decode()[3:]
        ws.send(TEXT, b"one")
        assert ws.recv().payload == b"got one"
        if how == "reset":
            ws.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        ws.sock.close()
        assert notes(woh, r"^notes %s DISCONNECT" % cid) == ["notes %s DISCONNECT " % cid], how
        assert len(notes(woh, r"^notes %s (DISCONNECT|CLOSE)" % cid, count=2, timeout=0.5)) == 1, how


def test_pings_are_answered_at_once_and_posted(woh):
    ws = RawWS(woh["port"], "/ws/notes/")
    cid = ws.recv().payload.decode()[3:]
    ws.send(PING, b"are you there")
    frame = ws.recv()
    assert frame.opcode == PONG and frame.payload == b"are you there"
    assert notes(woh, r"^notes %s PING" % cid) == ["notes %s PING are you there" % cid]
    ws.close()


# ------------------------------------------------- the protocol's fields


def test_connection_id_is_one_per_socket_and_a_clients_own_fields_never_reach_the_view(woh):
    forged = [("Connection-Id", "forged-id"), ("Meta-User", "mallory"), ("Grip-Sig", "forged")]
    one = RawWS(woh["port"], "/ws/notes/", headers=forged)
    two = RawWS(woh["port"], "/ws/notes/")
    cid1, cid2 = one.recv().payload.decode()[3:], two.recv().payload.decode()[3:]
    assert cid1 != cid2 and "forged" not in cid1 and re.fullmatch(r"[0-9a-f]{32}", cid1)
    one.send(TEXT, b"again")
    assert one.recv().payload == b"got again"
    assert len(notes(woh, r"^notes %s (OPEN|TEXT)" % cid1, count=2)) == 2     # both requests: the same id
    meta = notes(woh, r"^notes %s META" % cid1)[0]
    assert meta.endswith("META {} proxied=True")       # no Meta-User; a real Grip-Sig, not the forged one
    one.close()
    two.close()


def test_set_meta_comes_back_as_meta_on_every_later_request(woh):
    with connect(woh, "/ws/meta/?room=kitchen") as ws:
        ws.send("x")
        assert json.loads(ws.recv(timeout=WAIT)) == {"room": "kitchen", "user": "alice"}
        ws.send("forget")                                # Set-Meta-room: "" removes it
        assert json.loads(ws.recv(timeout=WAIT)) == {"user": "alice"}
        ws.send("y")
        assert json.loads(ws.recv(timeout=WAIT)) == {"user": "alice"}


def test_a_keep_alive_control_message_is_sent_on_a_quiet_socket(woh):
    with connect(woh, "/ws/keepalive/") as ws:
        start = time.monotonic()
        assert ws.recv(timeout=WAIT) == "ka"
        assert ws.recv(timeout=WAIT) == "ka"
        assert time.monotonic() - start >= 1.5           # one a second of silence


def test_binary_messages_go_and_come_back_binary(woh):
    with connect(woh, "/ws/bin/") as ws:
        ws.send(b"\x00\x01\xfe\xff")
        assert ws.recv(timeout=WAIT) == b"\x00\x01\xfe\xff"


# ------------------------------------------------------------- the OPEN


def test_an_open_the_view_refuses_is_its_own_answer(woh):
    with pytest.raises(InvalidStatus) as ei:
        connect(woh, "/ws/refuse/")
    assert ei.value.response.status_code == 403
    assert ei.value.response.body == b"not for you\n"


def test_a_view_that_does_not_accept_is_a_502(woh):
    """websocket_only's view that never calls accept() answers events
    without OPEN: Pushpin's 502, its text; nothing is held."""
    with pytest.raises(InvalidStatus) as ei:
        connect(woh, "/ws/noaccept/")
    assert ei.value.response.status_code == 502
    assert ei.value.response.body == b"Error while proxying to origin.\n"
    assert woh["server"].stderr.wait_for(re.compile(r"answer to a WebSocket's OPEN has no OPEN: 502"), WAIT)


def test_a_request_under_the_prefix_that_is_not_a_handshake_is_the_views(woh):
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen("http://127.0.0.1:%d/ws/echo/" % woh["port"], timeout=WAIT)
    assert ei.value.code == 400 and ei.value.read() == b"Request must contain WebSocket events.\n"
    bad = RawWS(woh["port"], "/ws/echo/", version="8")
    assert bad.status == 426                              # checked in C before any OPEN
    bad.sock.close()


# ----------------------------------------------------- GRIP recovery (item 6)


def stream(woh, target):
    s = socket.create_connection(("127.0.0.1", woh["port"]), timeout=WAIT)
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % target).encode())
    return s


def read_until(s, buf, needle, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("%r not received; got %r" % (needle, buf[-400:]))
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            raise AssertionError("the stream ended; got %r" % buf[-400:])
        buf += chunk
    return buf


def test_a_missed_prev_id_asks_the_next_link_once_and_its_items_go_out_in_order_on_the_same_stream(woh):
    feed = woh["feeds"] / "f1"
    feed.write_text("1 one\n")
    s = stream(woh, "/events/?feed=f1&last=1")
    try:
        buf = read_until(s, b"", b"open 1\n")
        pub = publisher(woh)
        pub.publish_http_stream("feed-f1", "item 2 two\n", id="2", prev_id="1", blocking=True)
        buf = read_until(s, buf, b"item 2 two\n")
        # 3 and 4 never reach the stream (published elsewhere, or lost): the
        # storage has them, and 5 says its predecessor is 4.
        with feed.open("a") as f:
            f.write("2 two\n3 three\n4 four\n5 five\n")
        pub.publish_http_stream("feed-f1", "item 5 five\n", id="5", prev_id="4", blocking=True)
        buf = read_until(s, buf, b"item 5 five\n")
        pub.publish_http_stream("feed-f1", "item 6 six\n", id="6", prev_id="5", blocking=True)
        buf = read_until(s, buf, b"item 6 six\n")
        body = buf.split(b"\r\n\r\n", 1)[1]
        assert body == b"open 1\nitem 2 two\nitem 3 three\nitem 4 four\nitem 5 five\nitem 6 six\n"
    finally:
        s.close()
    # One request of the link, with Grip-Last naming 2, seen as proxied.
    assert notes(woh, r"^next f1 ", count=2, timeout=0.5) == ["next f1 2 proxied=True"]
    assert woh["server"].stdout.wait_for(re.compile(r"^GET /next/\?feed=f1&timeout=120 HTTP/1.1 200 "), WAIT)


def test_items_published_while_the_link_is_asked_wait_for_its_answer(woh):
    """What comes meanwhile is held until the answer: those it covered are
    dropped (they do not chain on the new prev-id), the rest go after it."""
    feed = woh["feeds"] / "f2"
    feed.write_text("1 one\n2 two\n3 three\n")
    s = stream(woh, "/events/?feed=f2&last=1")
    try:
        buf = read_until(s, b"", b"item 3 three\n")           # the view's body: the storage after 1
        pub = publisher(woh)
        with feed.open("a") as f:
            f.write("4 four\n5 five\n")
        # 5 on prev-id 4: a gap (the stream has 3); 4 and 5 come from the
        # link; 6 (published right after) waits for the answer, then chains.
        pub.publish_http_stream("feed-f2", "item 5 five\n", id="5", prev_id="4", blocking=True)
        with feed.open("a") as f:
            f.write("6 six\n")
        pub.publish_http_stream("feed-f2", "item 6 six\n", id="6", prev_id="5", blocking=True)
        buf = read_until(s, buf, b"item 6 six\n")
        pub.publish_http_stream("feed-f2", "item 7 seven\n", id="7", prev_id="6", blocking=True)
        buf = read_until(s, buf, b"item 7 seven\n")
        body = buf.split(b"\r\n\r\n", 1)[1]
        assert body == b"open 1\nitem 2 two\nitem 3 three\nitem 4 four\nitem 5 five\nitem 6 six\nitem 7 seven\n"
    finally:
        s.close()


def test_the_links_timeout_asks_it_on_a_quiet_stream(woh):
    """Grip-Link's timeout: no item on the channel for that long, and the
    link is asked anyway (Pushpin's refresh): what the storage got reaches
    the stream with no publish at all."""
    feed = woh["feeds"] / "f3"
    feed.write_text("1 one\n")
    s = stream(woh, "/events/?feed=f3&last=1&timeout=1")
    try:
        buf = read_until(s, b"", b"open 1\n")
        with feed.open("a") as f:
            f.write("2 two\n")
        buf = read_until(s, buf, b"item 2 two\n", timeout=5)
    finally:
        s.close()
    assert notes(woh, r"^next f3 1 ")
