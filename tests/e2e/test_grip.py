"""GRIP (issue 19): django-eventstream, django-grip and gripcontrol run
unchanged against m0serve with --grip-key-file and --grip-control, no
Pushpin.

The project is tests/apps/gripproj: django-eventstream's documented setup
(GripMiddleware, GRIP_URL at the control port with the key, the model
storage), served by two workers. Needs the GRIP packages (requirements/
test.txt); skipped cleanly without them.
"""

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from rawhttp import tcp_queues
from serverproc import APPS_DIR, free_port, run_to_exit
from sse import SSEStream
from wsraw import BINARY, TEXT, RawWS

# django_eventstream and django_grip need settings to import: only their
# presence is checked here (the server and the helper processes import them).
if importlib.util.find_spec("django_eventstream") is None or importlib.util.find_spec("django_grip") is None:
    pytest.skip("the GRIP packages are not installed (requirements/test.txt)", allow_module_level=True)
gripcontrol = pytest.importorskip("gripcontrol")
pubcontrol = pytest.importorskip("pubcontrol")
jwt = pytest.importorskip("jwt")

KEY = "test-grip-key-0123456789abcdef-0123456789"
WAIT = 10.0
ACCESS_FORMAT = "%(r)s %(s)s %(B)s %(D)s"


@pytest.fixture(scope="module")
def grip(tmp_path_factory, start_module_server):
    d = tmp_path_factory.mktemp("grip")
    key = d / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    cport = free_port()
    env = {
        "GRIPPROJ_DB": str(d / "db.sqlite3"),
        "GRIPPROJ_GRIP_URL": "http://127.0.0.1:%d?iss=pushpin&key=%s" % (cport, KEY),
        "PYTHONPATH": str(APPS_DIR),
        "DJANGO_SETTINGS_MODULE": "gripproj.settings",
        "PYTHONWARNINGS": "ignore",
    }
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v0"], env=dict(os.environ, **env), check=True,
                   timeout=60)
    server = start_module_server("gripproj.wsgi", "--grip-key-file", str(key), "--grip-control",
                                 "127.0.0.1:%d" % cport, "--access-log", "--access-log-format", ACCESS_FORMAT,
                                 workers=2, env=env)
    return {"port": server.port, "cport": cport, "env": env, "server": server}


class Stream:
    """A raw client connection: the request, then bytes as they come."""

    def __init__(self, port, target, headers=()):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        lines = ["GET %s HTTP/1.1" % target, "Host: 127.0.0.1"] + list(headers)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        self.eof = False

    def read_until(self, needle, timeout=WAIT):
        needle = needle.encode() if isinstance(needle, str) else needle
        deadline = time.monotonic() + timeout
        while needle not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                raise AssertionError("%r not received; got %r" % (needle, self.buf[-600:]))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                self.eof = True
            self.buf += chunk
        return self.buf

    def read_to_eof(self, timeout=WAIT):
        deadline = time.monotonic() + timeout
        while not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no end of stream; got %r" % self.buf[-600:])
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                self.eof = True
            self.buf += chunk
        return self.buf

    def head(self):
        self.read_until(b"\r\n\r\n")
        return self.buf.split(b"\r\n\r\n", 1)[0].decode("latin-1")

    def close(self):
        self.sock.close()


def get(port, target, headers=None):
    import urllib.request

    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, target), headers=headers or {})
    with urllib.request.urlopen(req, timeout=WAIT) as r:
        return r.status, dict(r.headers), r.read()


def send_event_elsewhere(env, text):
    """send_event from another process (a management command's way)."""
    code = ("import django; django.setup()\n"
            "from django_eventstream import send_event\n"
            "send_event('test', 'message', {'text': %r}, async_publish=False)\n" % text)
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), check=True, timeout=60)


def publisher(cport, **extra):
    cfg = {"control_uri": "http://127.0.0.1:%d" % cport, "control_iss": "pushpin", "key": KEY}
    cfg.update(extra)
    return gripcontrol.GripPubControl(cfg)


def grip_lines(head):
    return [line for line in head.split("\r\n")[1:] if line.lower().startswith("grip-")]


def test_eventstream_events_from_a_view_and_another_process(grip):
    s = Stream(grip["port"], "/events/")
    try:
        head = s.head()
        assert head.startswith("HTTP/1.1 200")
        assert "text/event-stream" in head
        assert grip_lines(head) == []
        s.read_until("event: stream-open")
        get(grip["port"], "/send/?text=from-view")
        body = s.read_until('data: {"text": "from-view"}').decode()
        send_event_elsewhere(grip["env"], "from-process")
        body = s.read_until('data: {"text": "from-process"}').decode()
        # %I rendered with the subscription's id_format: the browser's lastEventId.
        ids = re.findall(r"^id: (\S+)$", body, re.M)
        assert len(ids) == 2 and all(i.startswith("test:") for i in ids), body
        assert "%I" not in body and "%%" not in body
    finally:
        s.close()


def test_reconnect_with_last_event_id_replays_from_the_storage(grip):
    s = Stream(grip["port"], "/events/")
    try:
        s.read_until("event: stream-open")
        get(grip["port"], "/send/?text=first")
        get(grip["port"], "/send/?text=second")
        body = s.read_until('data: {"text": "second"}').decode()
    finally:
        s.close()
    first_id = re.search(r'id: (test:\d+)\ndata: \{"text": "first"\}', body).group(1)
    r = Stream(grip["port"], "/events/", ["Last-Event-ID: " + first_id])
    try:
        again = r.read_until('data: {"text": "second"}').decode()
        assert '"first"' not in again.split("stream-open")[-1]
        get(grip["port"], "/send/?text=third")
        r.read_until('data: {"text": "third"}')
    finally:
        r.close()


def test_a_forged_grip_sig_never_reaches_the_app(grip):
    status, _, body = get(grip["port"], "/echo/", {"Grip-Sig": "forged.token.x", "Grip-Last": "events-test; last-id=1"})
    seen = json.loads(body)
    assert status == 200
    assert "HTTP_GRIP_LAST" not in seen["meta"]
    sig = seen["meta"]["HTTP_GRIP_SIG"]
    assert sig != "forged.token.x"
    claims = jwt.decode(sig, KEY, algorithms=["HS256"])
    assert claims["iss"] == "pushpin" and claims["exp"] > time.time() + 3000
    assert seen["proxied"] is True


def test_gripcontrol_publish_http_stream_and_close(grip):
    s = Stream(grip["port"], "/st/")
    try:
        head = s.head()
        assert "Content-Type: text/plain" in head
        assert grip_lines(head) == []
        s.read_until("stream head\n")
        pub = publisher(grip["cport"])
        pub.publish_http_stream("st", "data: one\n\n", blocking=True)
        s.read_until("data: one\n\n")
        pub.publish_http_stream("st", gripcontrol.HttpStreamFormat(b"\xff\x00bin"), blocking=True)
        s.read_until(b"\xff\x00bin")
        pub.publish_http_stream("st", gripcontrol.HttpStreamFormat(close=True), blocking=True)
        body = s.read_to_eof()
        assert body.endswith(b"\xff\x00bin")
    finally:
        s.close()


def test_a_grip_stream_is_logged_when_it_ends_with_every_byte_sent(grip):
    """Issue 27 item 15: a GRIP stream's line is written when it ends (here
    by an http-stream close): its request line and status, the bytes after
    its head (the view's, the items', keep-alives), the time to the end."""
    s = Stream(grip["port"], "/st/?channel=stlog")
    try:
        s.head()
        s.read_until("stream head\n")
        pub = publisher(grip["cport"])
        pub.publish_http_stream("stlog", "item one\n", blocking=True)
        s.read_until("item one\n")
        assert "/st/?channel=stlog" not in grip["server"].stdout.text()      # open: not logged
        pub.publish_http_stream("stlog", gripcontrol.HttpStreamFormat(close=True), blocking=True)
        data = s.read_to_eof()
    finally:
        s.close()
    body = data.partition(b"\r\n\r\n")[2]
    line = grip["server"].stdout.wait_for(re.compile(r"^GET /st/\?channel=stlog HTTP/1.1 200 (\d+) (\d+)$"), 5)
    assert line, grip["server"].stdout.text()[-2000:]
    assert int(line.group(1)) == len(body) and body.endswith(b"item one\n"), (line.string, body)


def test_a_long_poll_is_logged_with_the_answer_it_got(grip):
    """A long-poll's line is its answer's: the item's status and body
    bytes, written when the answer is out."""
    pub = publisher(grip["cport"])
    fmt = gripcontrol.HttpResponseFormat(code=201, reason="Made", body="made\n")
    s = Stream(grip["port"], "/lp/?channel=lplog")
    try:
        head, body = answer_long_poll(s, pub, fmt, channel="lplog")
        assert head.startswith("HTTP/1.1 201 Made") and body == b"made\n"
    finally:
        s.close()
    line = grip["server"].stdout.wait_for(re.compile(r"^GET /lp/\?channel=lplog HTTP/1.1 (\d+) (\d+) \d+$"), 5)
    assert line, grip["server"].stdout.text()[-2000:]
    assert (int(line.group(1)), int(line.group(2))) == (201, 5), line.string
    assert len(re.findall(r"(?m)^GET /lp/\?channel=lplog ", grip["server"].stdout.text())) == 1


def held_ws(port, channel):
    """A WebSocket held on channel by the project's M0-Hold: websocket view;
    subscribed once its 101 is read."""
    ws = RawWS(port, "/ws/?channel=%s" % channel)
    assert ws.status == 101, ws.status
    return ws


def ws_item(*formats, **kw):
    from pubcontrol import Item

    return Item(list(formats), **kw)


def test_gripcontrol_ws_message_reaches_a_held_websocket_as_one_text_frame(grip):
    """EPCP ws-message "content": one text frame with exactly that content
    (RFC 6455 §5.6), not the GRIP frame's bytes."""
    with held_ws(grip["port"], "wsa") as ws:
        publisher(grip["cport"]).publish("wsa", ws_item(gripcontrol.WebSocketMessageFormat("hi")), blocking=True)
        f = ws.recv_data()
        assert (f.fin, f.opcode, f.payload) == (1, TEXT, b"hi")
        text = "d\u00e9j\u00e0 \u2713 " + "x" * 40000       # UTF-8 kept, a 16-bit length head (the bus carries 64 KiB)
        publisher(grip["cport"]).publish("wsa", ws_item(gripcontrol.WebSocketMessageFormat(text)), blocking=True)
        f = ws.recv_data()
        assert (f.fin, f.opcode, f.payload) == (1, TEXT, text.encode("utf-8"))


def test_gripcontrol_ws_message_content_bin_is_one_binary_frame(grip):
    data = b"\xff\x00bin\x80"
    with held_ws(grip["port"], "wsb") as ws:
        fmt = gripcontrol.WebSocketMessageFormat(data, binary=True)
        publisher(grip["cport"]).publish("wsb", ws_item(fmt), blocking=True)
        f = ws.recv_data()
        assert (f.fin, f.opcode, f.payload) == (1, BINARY, data)


def test_an_item_with_http_stream_and_ws_message_reaches_each_hold_with_its_own_format(grip):
    """The GRIP stream gets the http-stream content, the WebSocket the
    ws-message content, an m0serve SSE hold neither (its first event after
    the item is the m0pub.publish behind it)."""
    s = Stream(grip["port"], "/st/?channel=mix")
    ws = held_ws(grip["port"], "mix")
    sse = SSEStream(grip["port"], "/sse/?channel=mix")
    try:
        assert sse.status == 200
        s.read_until("stream head\n")
        item = ws_item(gripcontrol.HttpStreamFormat("data: for-streams\n\n"),
                       gripcontrol.WebSocketMessageFormat("for-sockets"))
        publisher(grip["cport"]).publish("mix", item, blocking=True)
        s.read_until("data: for-streams\n\n")
        assert b"for-sockets" not in s.buf
        f = ws.recv_data()
        assert (f.opcode, f.payload) == (TEXT, b"for-sockets")
        get(grip["port"], "/m0publish/?channel=mix&data=after")
        ev = sse.next_event()
        assert ev.data == "after", ev
        assert b"for-streams" not in sse.raw and b"for-sockets" not in sse.raw
        f = ws.recv_data()                       # m0pub's event reaches the socket too, as text
        assert (f.opcode, f.payload) == (TEXT, b"after")
    finally:
        s.close()
        ws.close()
        sse.sock.close()


def test_a_websocket_gets_nothing_of_other_channels_nor_of_items_without_ws_message(grip):
    """Published in order, so the first frame a socket gets after them tells
    what it was not given: another channel's ws-message, its own channel's
    http-stream or http-response item (nor their GRIP frame bytes)."""
    with held_ws(grip["port"], "wsc") as ws:
        pub = publisher(grip["cport"])
        pub.publish("wsd", ws_item(gripcontrol.WebSocketMessageFormat("other channel")), blocking=True)
        pub.publish_http_stream("wsc", "stream only", blocking=True)
        pub.publish_http_response("wsc", "response only", blocking=True)
        pub.publish("wsc", ws_item(gripcontrol.WebSocketMessageFormat("mine")), blocking=True)
        f = ws.recv_data()
        assert (f.opcode, f.payload) == (TEXT, b"mine")
        assert ws.buf == b""


def test_a_ws_message_marked_text_that_is_not_utf8_is_refused(grip):
    body = json.dumps({"items": [{"channel": "wsa", "ws-message": {"type": "text", "content-bin": "/w=="}}]})
    status, text = _post(grip["cport"], body.encode(), {"Authorization": "Bearer " + KEY})
    assert status == 400 and b"not UTF-8" in text, (status, text)


def test_an_item_too_large_for_the_bus_refuses_the_whole_request_before_anything_is_published(grip):
    """One item over the bus's 64 KiB refuses the request (413) before any of
    its items is published: the small item ahead of it reaches no stream
    (the next thing the stream gets is the publish after the refusal)."""
    s = Stream(grip["port"], "/st/?channel=big")
    try:
        s.read_until("stream head\n")
        body = json.dumps({"items": [{"channel": "big", "http-stream": {"content": "small-first\n"}},
                                     {"channel": "big", "http-stream": {"content": "x" * 70000}}]})
        status, text = _post(grip["cport"], body.encode(), {"Authorization": "Bearer " + KEY})
        assert status == 413, (status, text)
        publisher(grip["cport"]).publish_http_stream("big", "after-the-413\n", blocking=True)
        s.read_until("after-the-413\n")
        assert b"small-first" not in s.buf
    finally:
        s.close()


def test_grip_keep_alive_is_written_on_an_idle_stream(grip):
    s = Stream(grip["port"], "/st/")
    try:
        s.read_until("stream head\n")
        s.read_until("stream head\nka\n", timeout=4)
    finally:
        s.close()


def test_gripcontrol_publish_http_response_answers_a_long_poll(grip):
    s = Stream(grip["port"], "/lp/", ["Connection: close"])
    pub = publisher(grip["cport"])
    fmt = gripcontrol.HttpResponseFormat(code=201, reason="Made", headers={"X-A": "1"}, body="made\n")
    try:
        # Nothing is written while it is held: publish until the hold takes one.
        deadline = time.monotonic() + 4
        while b"\r\n\r\n" not in s.buf:
            assert time.monotonic() < deadline, "the long-poll was not answered by the publish"
            pub.publish_http_response("lp", fmt, blocking=True)
            try:
                s.read_until(b"\r\n\r\n", timeout=0.2)
            except AssertionError:
                pass
        body = s.read_to_eof()
    finally:
        s.close()
    head, _, rest = body.partition(b"\r\n\r\n")
    head = head.decode("latin-1")
    assert head.startswith("HTTP/1.1 201 Made")
    assert "X-A: 1" in head and "Content-Length: 5" in head
    assert grip_lines(head) == []
    assert rest == b"made\n"
    assert "Connection: close" in head


def answer_long_poll(s, pub, fmt, channel="lp"):
    """Publish until the held long-poll on s is answered; its head and body
    (Content-Length framed) are taken off s.buf, what follows stays."""
    deadline = time.monotonic() + 4
    while b"\r\n\r\n" not in s.buf:
        assert time.monotonic() < deadline, "the long-poll was not answered by the publish"
        pub.publish_http_response(channel, fmt, blocking=True)
        try:
            s.read_until(b"\r\n\r\n", timeout=0.2)
        except AssertionError:
            pass
    return take_response(s)


def take_response(s):
    s.read_until(b"\r\n\r\n")
    head, _, rest = s.buf.partition(b"\r\n\r\n")
    head = head.decode("latin-1")
    n = int(re.search(r"(?im)^content-length: *(\d+)", head).group(1))
    s.buf = rest
    while len(s.buf) < n:
        _more(s)
    body, s.buf = s.buf[:n], s.buf[n:]
    return head, body


def _more(s):
    s.sock.settimeout(WAIT)
    chunk = s.sock.recv(65536)
    if not chunk:
        raise AssertionError("EOF inside a response; got %r" % s.buf[-600:])
    s.buf += chunk


def test_a_long_poll_answer_keeps_the_connection_for_the_next_request(grip):
    """RFC 9112 §9.3: a long-poll answered on an HTTP/1.1 connection whose
    request did not ask to close persists; the next request on it (sent
    after the answer, or pipelined behind the held one) is served."""
    pub = publisher(grip["cport"])
    fmt = gripcontrol.HttpResponseFormat(code=200, headers={"X-A": "1"}, body="made\n")
    s = Stream(grip["port"], "/lp/")
    try:
        head, body = answer_long_poll(s, pub, fmt)
        assert head.startswith("HTTP/1.1 200") and "X-A: 1" in head
        assert "connection: close" not in head.lower()
        assert body == b"made\n"
        s.sock.sendall(b"GET /echo/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head, body = take_response(s)
        assert head.startswith("HTTP/1.1 200")
        assert json.loads(body)["proxied"] is True
        # Held again on the same connection, with the next request pipelined
        # behind it: answered in order.
        s.sock.sendall(b"GET /lp/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                       b"GET /echo/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        head, body = answer_long_poll(s, pub, fmt)
        assert body == b"made\n"
        head, body = take_response(s)
        assert head.startswith("HTTP/1.1 200") and "Connection: close" in head
        assert json.loads(body)["proxied"] is True
        s.read_to_eof()
    finally:
        s.close()


def test_a_long_poll_is_answered_by_its_timeout(grip):
    t0 = time.monotonic()
    s = Stream(grip["port"], "/lp/", ["Connection: close"])
    try:
        body = s.read_to_eof(timeout=15)
    finally:
        s.close()
    elapsed = time.monotonic() - t0
    head, _, rest = body.partition(b"\r\n\r\n")
    head = head.decode("latin-1")
    assert head.startswith("HTTP/1.1 200")
    assert grip_lines(head) == []
    assert rest == b"timeout body\n"
    assert 4.5 <= elapsed < 12, elapsed


FORGED = "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nforged\n"


def read_head(s):
    """The head at the start of s.buf (taken off it) and what followed it."""
    s.read_until(b"\r\n\r\n")
    head, _, s.buf = s.buf.partition(b"\r\n\r\n")
    return head.decode("latin-1")


@pytest.mark.parametrize("code", [204, 304])
def test_a_long_poll_answered_by_a_bodiless_item_sends_its_head_alone(grip, code):
    """RFC 9110 §15.3.5/§15.4.5, RFC 9112 §6.3: a 204 or 304 ends at its
    head. The item's body (here a forged response) is dropped, no
    Content-Length framing is sent, and the next request on the connection
    gets its own answer."""
    pub = publisher(grip["cport"])
    fmt = gripcontrol.HttpResponseFormat(code=code, headers={"X-A": "1"}, body=FORGED)
    channel = "lpb%d" % code
    s = Stream(grip["port"], "/lp/?channel=" + channel)
    try:
        deadline = time.monotonic() + 4
        while b"\r\n\r\n" not in s.buf:
            assert time.monotonic() < deadline, "the long-poll was not answered by the publish"
            pub.publish_http_response(channel, fmt, blocking=True)
            try:
                s.read_until(b"\r\n\r\n", timeout=0.2)
            except AssertionError:
                pass
        head = read_head(s)
        assert head.startswith("HTTP/1.1 %d " % code) and "X-A: 1" in head
        assert not re.search(r"(?im)^(content-length|transfer-encoding):", head), head
        assert "connection: close" not in head.lower()         # kept: the head ends the answer
        s.sock.sendall(b"GET /echo/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        rest = s.read_to_eof()
    finally:
        s.close()
    assert b"forged" not in rest
    head, _, body = rest.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), rest[:200]
    assert json.loads(body)["proxied"] is True


def test_a_long_poll_timing_out_with_a_bodiless_status_sends_its_head_alone(grip):
    """The view's own answer at Grip-Timeout, with Grip-Status 204 or 304:
    its head, without the view's body (both held at once: one timeout)."""
    streams = {code: Stream(grip["port"], "/lp/?channel=lpt%d&status=%d" % (code, code), ["Connection: close"])
               for code in (204, 304)}
    try:
        for code, s in streams.items():
            data = s.read_to_eof(timeout=15)
            head, _, rest = data.partition(b"\r\n\r\n")
            head = head.decode("latin-1")
            assert head.startswith("HTTP/1.1 %d " % code), head
            assert not re.search(r"(?im)^(content-length|transfer-encoding):", head), head
            assert grip_lines(head) == []
            assert rest == b""
    finally:
        for s in streams.values():
            s.close()


@pytest.mark.parametrize("code", [204, 304])
def test_a_stream_hold_with_a_bodiless_status_is_a_502(grip, code):
    """A stream is content after its head; a 204 or 304 head carries none:
    instructions that cannot be followed, answered as Pushpin answers those
    (502), and nothing published to the channel reaches the client."""
    s = Stream(grip["port"], "/st/?channel=stb%d&status=%d" % (code, code))
    try:
        head = read_head(s)
        s.read_until(b"origin.\n")
    finally:
        s.close()
    assert head.startswith("HTTP/1.1 502 Bad Gateway"), head
    assert s.buf == b"Error while proxying to origin.\n"
    assert grip["server"].stderr.wait_for(re.compile(r"GRIP instructions not followed.*204 or 304"), 5)


def _post(cport, body, headers):
    import urllib.error
    import urllib.request

    req = urllib.request.Request("http://127.0.0.1:%d/publish/" % cport, data=body, method="POST",
                                 headers=dict({"Content-Type": "application/json"}, **headers))
    try:
        with urllib.request.urlopen(req, timeout=WAIT) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_an_unauthenticated_publish_is_refused(grip):
    item = json.dumps({"items": [{"channel": "st", "http-stream": {"content": "x"}}]}).encode()
    assert _post(grip["cport"], item, {})[0] == 401
    assert _post(grip["cport"], item, {"Authorization": "Bearer wrong"})[0] == 401
    forged = jwt.encode({"iss": "pushpin", "exp": int(time.time()) + 60}, "another-key-" * 4, algorithm="HS256")
    assert _post(grip["cport"], item, {"Authorization": "Bearer " + forged})[0] == 401
    expired = jwt.encode({"iss": "pushpin", "exp": int(time.time()) - 600}, KEY, algorithm="HS256")
    assert _post(grip["cport"], item, {"Authorization": "Bearer " + expired})[0] == 401
    # The key itself (GRIP_URL ?key= without iss) and a JWT signed with it pass.
    assert _post(grip["cport"], item, {"Authorization": "Bearer " + KEY}) == (200, b"Published\n")
    good = jwt.encode({"iss": "x", "exp": int(time.time()) + 60}, KEY, algorithm="HS256")
    assert _post(grip["cport"], item, {"Authorization": "Bearer " + good})[0] == 200
    assert _post(grip["cport"], b"{not json", {"Authorization": "Bearer " + KEY}) == (400, b"Body is not valid JSON.\n")
    with pytest.raises(Exception, match="401"):
        gripcontrol.GripPubControl({"control_uri": "http://127.0.0.1:%d" % grip["cport"]}).publish_http_stream(
            "st", "x", blocking=True)


def test_the_startup_line_names_the_control_port_once(grip):
    """The master's line for --grip-control says what it is once, then
    the address (the listener's own label is for the banner's list)."""
    line = grip["server"].stderr.wait_for(re.compile(r"GRIP control \(EPCP POST /publish/\) at (.*)$"), 5)
    assert line is not None
    assert line.group(1) == "http://127.0.0.1:%d" % grip["cport"], line.string
    assert line.string.count("GRIP control") == 1


def test_the_control_port_never_serves_the_app(grip):
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as e:
        get(grip["cport"], "/echo/")
    assert e.value.code == 404


def test_a_key_file_other_users_can_read_is_refused(tmp_path):
    """One rule for --grip-key-file and --grant-key-file (keyfile.h): exit 78
    and the same line (test_grant_mint.py checks both flags side by side)."""
    key = tmp_path / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o644)
    rc, err = run_to_exit(["gripproj.wsgi", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                           "--grip-key-file", str(key)])
    assert rc == 78
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == ["m0serve: error: --grip-key-file: %s: group or other users have access (mode 0644): "
                     "chmod 600 it" % key], err


def test_the_grip_key_file_is_read_again_on_sighup(tmp_path, start_server):
    """Issue 27 item 10: after the key file is edited and SIGHUP sent, the new
    workers sign Grip-Sig with the new key and the control port takes
    publishes signed with it (and no longer the old one); a file that fails
    to load keeps the key in use, with one warning."""
    key2 = "second-grip-key-ZYXWVUTSRQPONMLKJIHGFEDCBA"
    key = tmp_path / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    cport = free_port()
    server = start_server("grip_asgi:app", "--grip-key-file", str(key), "--grip-control", "127.0.0.1:%d" % cport)
    item = json.dumps({"items": [{"channel": "ast", "http-stream": {"content": "x"}}]}).encode()

    def sig():
        _, _, body = get(server.port, "/echo")
        return [v for k, v in json.loads(body) if k == "grip-sig"][0]

    def reload():
        old = set(server.worker_pids())
        server.signal(signal.SIGHUP)
        server.wait_workers(lambda pids: pids and not (set(pids) & old))

    assert jwt.decode(sig(), KEY, algorithms=["HS256"])["iss"] == "pushpin"
    key.write_text(key2 + "\n")
    reload()
    assert server.stderr.wait_for(re.compile(r"SIGHUP: GRIP key re-read from "), 5), server.stderr.text()
    assert jwt.decode(sig(), key2, algorithms=["HS256"])["iss"] == "pushpin"
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(sig(), KEY, algorithms=["HS256"])
    assert _post(cport, item, {"Authorization": "Bearer " + key2})[0] == 200
    assert _post(cport, item, {"Authorization": "Bearer " + KEY})[0] == 401
    s = Stream(server.port, "/st")
    try:
        s.read_until("asgi head\n")
        publisher(cport, key=key2).publish_http_stream("ast", "data: rotated\n\n", blocking=True)
        s.read_until("asgi head\ndata: rotated\n\n")
    finally:
        s.close()
    # A bad file (open to others, then empty): one warning each, key2 stays.
    for bad in ("mode", "empty"):
        if bad == "mode":
            key.chmod(0o640)
        else:
            key.chmod(0o600)
            key.write_text("\n")
        reload()
        assert server.stderr.wait_for(re.compile(
            r"\[WARNING\] SIGHUP: m0serve: error: --grip-key-file: .*: the GRIP key already loaded stays"), 5)
        assert jwt.decode(sig(), key2, algorithms=["HS256"])["iss"] == "pushpin"
        assert _post(cport, item, {"Authorization": "Bearer " + key2})[0] == 200
    assert len(re.findall(r"the GRIP key already loaded stays", server.stderr.text())) == 2


def test_asgi_gets_grip_sig_and_holds_a_grip_stream(tmp_path, start_server):
    key = tmp_path / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    cport = free_port()
    server = start_server("grip_asgi:app", "--grip-key-file", str(key), "--grip-control", "127.0.0.1:%d" % cport)
    _, _, body = get(server.port, "/echo", {"Grip-Sig": "forged", "Grip-Last": "x; last-id=1"})
    names = [k for k, _ in json.loads(body)]
    sigs = [v for k, v in json.loads(body) if k == "grip-sig"]
    assert "grip-last" not in names and len(sigs) == 1
    assert jwt.decode(sigs[0], KEY, algorithms=["HS256"])["iss"] == "pushpin"
    s = Stream(server.port, "/st")
    try:
        head = s.head()
        assert grip_lines(head) == [] and "content-type: text/plain" in head.lower()
        s.read_until("asgi head\n")
        publisher(cport).publish_http_stream("ast", "data: asgi\n\n", blocking=True)
        s.read_until("asgi head\ndata: asgi\n\n")
    finally:
        s.close()


def test_an_item_that_does_not_chain_is_recovered_through_the_next_link_on_the_open_stream(grip):
    """django-eventstream holds with prev-id = its storage's last id and a
    Grip-Link rel=next: an item whose prev-id is another means one was
    missed, so the server asks the link (Grip-Last: events-test; last-id=)
    as Pushpin does, and the stream stays open — the item that did not
    chain never reaches it, the next send_event (which chains on the
    storage's id the link's answer gave) does, on the same connection."""
    s = Stream(grip["port"], "/events/")
    try:
        head = s.head()
        s.read_until("event: stream-open")
        pub = publisher(grip["cport"])
        pub.publish_http_stream("events-test", "event: message\nid: %I\ndata: skipped\n\n", id="100000",
                                prev_id="99999", blocking=True)
        get(grip["port"], "/send/?text=chained")
        s.read_until('data: {"text": "chained"}')
        assert b"skipped" not in s.buf and not s.eof
        get(grip["port"], "/send/?text=again")
        s.read_until('data: {"text": "again"}')
    finally:
        s.close()
    assert head.startswith("HTTP/1.1 200")
    # The link was asked once, as a GET the application saw as proxied.
    link = grip["server"].stdout.wait_for(re.compile(r"^GET /events/\?[^ ]*link=next[^ ]* HTTP/1.1 200 "), WAIT)
    assert link is not None
    assert len(re.findall(r"(?m)^GET /events/\?[^ ]*link=next", grip["server"].stdout.text())) == 1


def test_a_hold_on_several_channels_gets_each_and_chains_each_prev_id(grip):
    """django-eventstream's events view on two channels holds three GRIP
    channels (events-test, events-two, user-anonymous), each with its own
    prev-id: a send_event on either reaches the stream, ids per channel."""
    s = Stream(grip["port"], "/events2/")
    try:
        head = s.head()
        assert head.startswith("HTTP/1.1 200")
        s.read_until("event: stream-open")
        get(grip["port"], "/send/?text=on-test")
        s.read_until('data: {"text": "on-test"}')
        # events-two's counter is not events-test's: its prev-id chains on
        # its own channel's id.
        get(grip["port"], "/send/?channel=two&text=on-two")
        s.read_until('data: {"text": "on-two"}')
        get(grip["port"], "/send/?channel=two&text=on-two-again")
        s.read_until('data: {"text": "on-two-again"}')
        get(grip["port"], "/send/?text=on-test-again")
        s.read_until('data: {"text": "on-test-again"}')
        # The user channel (require-sub): an item for a channel this hold has
        # is delivered, one for another is not.
        pub = publisher(grip["cport"])
        pub.publish("user-anonymous", pubcontrol.Item(gripcontrol.HttpStreamFormat("event: x\ndata: nope\n\n"),
                                                     meta={"require_sub": "events-other"}), blocking=True)
        pub.publish("user-anonymous", pubcontrol.Item(gripcontrol.HttpStreamFormat("event: x\ndata: kick\n\n"),
                                                     meta={"require_sub": "events-two"}), blocking=True)
        s.read_until("data: kick")
        assert b"data: nope" not in s.buf
        # An item on events-two that does not chain on events-two's id is a
        # missed one: recovered through the next link, the stream kept.
        pub.publish_http_stream("events-two", "event: message\ndata: skipped\n\n", id="900", prev_id="899",
                                blocking=True)
        get(grip["port"], "/send/?channel=two&text=after-the-gap")
        s.read_until('data: {"text": "after-the-gap"}')
        assert b"skipped" not in s.buf and not s.eof
    finally:
        s.close()


def test_instructions_that_cannot_be_followed_are_a_502(grip):
    """Pushpin's answer to a view whose Grip-* it cannot follow; the view's
    own body never reaches the client."""
    s = Stream(grip["port"], "/bad/")
    try:
        head = s.head()
        s.read_until(b"origin.\n")
    finally:
        s.close()
    assert head.startswith("HTTP/1.1 502 Bad Gateway")
    assert "Content-Length: 32" in head
    assert grip_lines(head) == []
    assert s.buf.split(b"\r\n\r\n", 1)[1] == b"Error while proxying to origin.\n"
    assert grip["server"].stderr.wait_for(re.compile(r"GRIP instructions not followed.*Grip-Hold"), 5)


def test_send_event_skip_user_ids_skips_that_user_only(grip):
    """skip_user_ids becomes the item's skip_users meta; the hold's
    skip-users filter drops it for the user its Grip-Set-Meta names
    ("anonymous" here), and the sequence moves on for the next event."""
    s = Stream(grip["port"], "/events/")
    try:
        s.read_until("event: stream-open")
        get(grip["port"], "/send/?text=not-for-anonymous&skip=anonymous")
        get(grip["port"], "/send/?text=for-everyone&skip=someone-else")
        body = s.read_until('data: {"text": "for-everyone"}')
        assert b"not-for-anonymous" not in body
    finally:
        s.close()


# --------------------------------------------------- with --broker (Redis)

def key_file(tmp_path):
    key = tmp_path / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    return key


def broker_host(start_server, tmp_path, redis, workers=2):
    """One m0serve "host" (its own processes) on the broker, with its own
    control port (server.cport)."""
    cport = free_port()
    server = start_server("grip_asgi:app", "--grip-key-file", str(key_file(tmp_path)), "--grip-control",
                          "127.0.0.1:%d" % cport, "--broker", redis.url, workers=workers)
    server.cport = cport
    return server


def item(channel, *contents):
    """An EPCP body: one http-stream item per content, in order."""
    return json.dumps({"items": [{"channel": channel, "http-stream": {"content": c}} for c in contents]}).encode()


BEARER = {"Authorization": "Bearer " + KEY}


def test_with_a_broker_a_publish_to_one_host_reaches_the_holds_of_another(tmp_path, start_server, redis):
    """Two hosts on one Redis: gripcontrol's publishes to host A's control
    port go through the broker's log and reach the Grip-Hold: stream and
    Grip-Hold: response holds of host B's workers, payload bytes intact,
    in order, with prev-id chaining kept."""
    a = broker_host(start_server, tmp_path, redis)
    b = broker_host(start_server, tmp_path, redis)
    streams = [Stream(b.port, "/st?ch=bst") for _ in range(4)] + [Stream(a.port, "/st?ch=bst")]   # B's workers, and A
    chained = Stream(b.port, "/st?ch=pst&prev=p0")
    try:
        for s in streams + [chained]:
            s.read_until("asgi head\n")
        pub = publisher(a.cport)
        pub.publish_http_stream("bst", "data: one\n\n", blocking=True)
        pub.publish_http_stream("bst", gripcontrol.HttpStreamFormat(b"\x00G\xff\r\n\x00bin"), blocking=True)
        for s in streams:
            s.read_until(b"asgi head\ndata: one\n\n\x00G\xff\r\n\x00bin")
        assert redis.command("XLEN", "m0:log") == b"2"       # through the broker, one entry each
        # The items of one request keep their order.
        assert _post(a.cport, item("bst", "i1\n", "i2\n", "i3\n"), BEARER) == (200, b"Published\n")
        for s in streams:
            s.read_until(b"\x00bini1\ni2\ni3\n")
        # id/prev-id across hosts: the item that chains on p0 is taken, one
        # that does not (p2 was never seen) ends the stream.
        pub.publish_http_stream("pst", "first\n", id="p1", prev_id="p0", blocking=True)
        chained.read_until("asgi head\nfirst\n")
        pub.publish_http_stream("pst", "skipped\n", id="p3", prev_id="p2", blocking=True)
        assert chained.read_to_eof() == chained.buf and b"skipped" not in chained.buf
    finally:
        for s in streams + [chained]:
            s.close()
    lp = Stream(b.port, "/lp?ch=blp", ["Connection: close"])
    try:
        fmt = gripcontrol.HttpResponseFormat(code=201, reason="Made", headers={"X-A": "1"}, body=b"made\x00\n")
        head, body = answer_long_poll(lp, publisher(a.cport), fmt, channel="blp")
    finally:
        lp.close()
    assert head.startswith("HTTP/1.1 201 Made") and "X-A: 1" in head and grip_lines(head) == []
    assert body == b"made\x00\n"


def test_with_the_broker_down_a_publish_is_a_503_and_nothing_arrives_later(tmp_path, start_server, redis):
    a = broker_host(start_server, tmp_path, redis, workers=1)
    s = Stream(a.port, "/st?ch=dst")
    try:
        s.read_until("asgi head\n")
        assert _post(a.cport, item("dst", "before\n"), BEARER) == (200, b"Published\n")
        s.read_until("asgi head\nbefore\n")
        redis.kill()
        status, body = _post(a.cport, item("dst", "lost\n"), BEARER)
        assert status == 503, body
        assert body.startswith(b"Broker unavailable: broker redis://127.0.0.1:") and b"Nothing was published" in body
        redis.start()                                      # same data: the append-only file
        deadline = time.monotonic() + WAIT
        while _post(a.cport, item("dst", "after\n"), BEARER)[0] != 200:
            assert time.monotonic() < deadline, "publishing never recovered"
            time.sleep(0.1)
        s.read_until("after\n", timeout=20)           # the reader reconnects with its backoff
        assert b"lost" not in s.buf
        assert redis.command("XLEN", "m0:log") == b"2"      # before, after
    finally:
        s.close()


def test_a_publish_whose_reply_never_comes_is_outcome_unknown_and_the_loop_serves_meanwhile(
        tmp_path, start_server, redis):
    """A broker that takes the command and never answers (stopped): the
    EPCP client gets a 503 that names the outcome as unknown, after the
    publisher's 1 s reply timeout; the worker's loop answers other requests
    meanwhile (the publish waits on its own thread, not on the loop)."""
    import threading

    a = broker_host(start_server, tmp_path, redis, workers=1)
    s = Stream(a.port, "/st?ch=ust")
    try:
        s.read_until("asgi head\n")
        assert _post(a.cport, item("ust", "warm\n"), BEARER)[0] == 200      # the script loaded, connected
        s.read_until("warm\n")
        os.kill(redis.proc.pid, signal.SIGSTOP)
        try:
            got = {}
            # 8 KiB of content: the publish is the one command that leaves
            # that much unread in the stopped Redis's socket (the reader's
            # and the probe's commands are a few dozen bytes).
            big = "maybe " + "x" * 8192 + "\n"
            t = threading.Thread(target=lambda: got.update(r=_post(a.cport, item("ust", big), BEARER)))
            t0 = time.monotonic()
            t.start()
            while max([rx for (local, _), (_, rx) in tcp_queues().items() if local == redis.port] + [0]) < 8192:
                assert time.monotonic() - t0 < 0.5, "the publish never reached Redis"
                time.sleep(0.005)
            status, _, body = get(a.cport, "/")
            assert status == 200 and body == b"m0serve GRIP control\n"
            assert get(a.port, "/echo")[0] == 200
            assert time.monotonic() - t0 < 0.9 and "r" not in got       # answered while the publish waits
            t.join(WAIT)
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
        status, body = got["r"]
        assert status == 503 and b"outcome unknown" in body, body
        assert b"Item 1 of 1" in body
    finally:
        s.close()


def test_with_a_broker_an_unauthenticated_publish_is_still_refused(tmp_path, start_server, redis):
    a = broker_host(start_server, tmp_path, redis, workers=1)
    assert _post(a.cport, item("x", "x"), {})[0] == 401
    assert _post(a.cport, item("x", "x"), {"Authorization": "Bearer wrong"})[0] == 401
    assert _post(a.cport, item("x", "x"), BEARER) == (200, b"Published\n")
    assert redis.command("XLEN", "m0:log") == b"1"          # only the authenticated one


# --------------------------------------------- the control port refuses first
# Issue 27, items 1, 4 and 13: the credential and the size are checked when
# the head is complete, before a byte of the body is read; a refusal closes
# the connection (the unread body is never parsed as a request).

def control_host(start_server, tmp_path, *args, env=None):
    cport = free_port()
    server = start_server("grip_asgi:app", "--grip-key-file", str(key_file(tmp_path)), "--grip-control",
                          "127.0.0.1:%d" % cport, *args, env=env)
    server.cport = cport
    return server


def publish_head(length=None, headers=()):
    lines = ["POST /publish/ HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"] + list(headers)
    lines.append("Content-Length: %d" % length if length is not None else "Transfer-Encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def refused_at_once(cport, raw):
    """Send raw (a head and only the first bytes of its body): the answer
    comes while the rest is unsent, says Connection: close, and the server
    closes after it."""
    from rawhttp import Conn

    with Conn(cport, timeout=5) as conn:
        conn.send(raw)
        r = conn.read_response("POST")
        assert r.status != 100, r                  # no 100 Continue for a refusal
        assert (r.header("connection") or "").lower() == "close", r
        assert conn.wait_closed(5)
    return r


def test_an_unauthenticated_publish_is_refused_before_its_body_is_read(tmp_path, start_server):
    server = control_host(start_server, tmp_path)
    for auth in ([], ["Authorization: Bearer wrong"]):
        for extra in ([], ["Expect: 100-continue"]):
            r = refused_at_once(server.cport, publish_head(500000000, auth + extra) + b'{"items": [')
            assert (r.status, r.header("www-authenticate"), r.body) == (401, "Bearer", b"Unauthorized\n")
        r = refused_at_once(server.cport, publish_head(None, auth) + b"ffff\r\n{\"items\": [")
        assert r.status == 401
    # The port still publishes for the key.
    assert _post(server.cport, item("x", "x"), BEARER) == (200, b"Published\n")


def test_a_publish_over_the_default_limit_is_413_before_its_body_is_read(tmp_path, start_server):
    """--grip-max-body defaults to 1 MiB: a Content-Length over it is a 413
    at once; a body of exactly 1 MiB is read and published (the EPCP parse
    has no smaller limit of its own)."""
    server = control_host(start_server, tmp_path)
    auth = ["Authorization: Bearer " + KEY]
    r = refused_at_once(server.cport, publish_head(1024 * 1024 + 1, auth) + b'{"items": [')
    assert (r.status, r.body) == (413, b"Request body too large.\n")
    body = item("big", "x" * 1000)
    body += b" " * (1024 * 1024 - len(body))
    assert _post(server.cport, body, BEARER) == (200, b"Published\n")


def test_grip_max_body_bounds_length_and_chunked_bodies_before_they_are_read(tmp_path, start_server):
    server = control_host(start_server, tmp_path, env={"M0_GRIP_MAX_BODY": "4096"})   # the flag's twin
    auth = ["Authorization: Bearer " + KEY]
    assert refused_at_once(server.cport, publish_head(4097, auth) + b'{"items"').status == 413
    # Chunked: refused at the chunk that passes the limit, the rest unsent.
    first = b"{" + b" " * 3999
    raw = publish_head(None, auth) + b"%x\r\n%s\r\n" % (len(first), first) + b"c8\r\n" + b" " * 200
    assert refused_at_once(server.cport, raw).status == 413
    body = item("lim", "x")
    assert _post(server.cport, body + b" " * (4096 - len(body)), BEARER) == (200, b"Published\n")
    rc, err = run_to_exit(["grip_asgi:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                           "--grip-key-file", str(key_file(tmp_path)), "--grip-max-body", "0"])
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1 and "--grip-max-body" in lines[0], err


def test_a_channel_name_the_bus_refuses_is_a_400_naming_the_rule(tmp_path, start_server):
    server = control_host(start_server, tmp_path)
    for channel, rule in (("m0.health", b"the m0. channel namespace is reserved"),
                          ("c" * 201, b"channel name longer than 200 bytes"),
                          ("a\tb", b"channel names are printable ASCII")):
        status, body = _post(server.cport, item(channel, "x"), BEARER)
        assert status == 400, (channel, status, body)
        assert body == b"Invalid format: item 0: publish item object contains 'channel' with invalid value: " + rule + \
            b"\n"
    assert _post(server.cport, item("c" * 200, "x"), BEARER) == (200, b"Published\n")


def test_the_control_port_with_expect_head_pipelining_and_chunked_bodies(tmp_path, start_server):
    """An authenticated publish may be sent 100 Continue and is read; HEAD,
    two requests in one write and a chunked publish are answered as HTTP/1.1
    says, on one connection."""
    from rawhttp import Conn, build_request, chunked

    server = control_host(start_server, tmp_path)
    s = Stream(server.port, "/st?ch=cx")
    try:
        s.read_until("asgi head\n")
        with Conn(server.cport, timeout=5) as conn:
            body = item("cx", "e1\n")
            conn.send(publish_head(len(body), ["Authorization: Bearer " + KEY, "Expect: 100-continue"]))
            assert conn.read_response("POST").status == 100       # wanted: it is sent
            conn.send(body)
            r = conn.read_response("POST")
            assert (r.status, r.body) == (200, b"Published\n") and r.header("connection") is None
            r = conn.request("HEAD", "/")
            assert (r.status, r.body, r.header("content-length")) == (200, b"", "21")
            conn.send(build_request("POST", "/publish/", [("Authorization", "Bearer " + KEY)], item("cx", "e2\n")) +
                      build_request("POST", "/publish/", [("Authorization", "Bearer " + KEY)], item("cx", "e3\n")))
            assert [conn.read_response("POST").status for _ in range(2)] == [200, 200]
            conn.send(build_request("POST", "/publish/", [("Authorization", "Bearer " + KEY),
                                                          ("Transfer-Encoding", "chunked")],
                                    chunked(item("cx", "e4\n"), (7, 30))))
            assert conn.read_response("POST").status == 200
            r = conn.request("GET", "/")
            assert (r.status, r.body) == (200, b"m0serve GRIP control\n")
        s.read_until("asgi head\ne1\ne2\ne3\ne4\n")
    finally:
        s.close()
