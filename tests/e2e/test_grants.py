"""Signed stream grants held by the loop (issue 18): GET PREFIX/sse and a
WebSocket to PREFIX/ws under --grant-path hold the channels of an HS256 JWT
verified in C, with no Python call; every kind of bad grant is refused (401,
or 403 for a channel the grant lacks or an origin not allowed) with no hold;
keys rotate through SIGHUP; one stream holds several channels (a grant's, or
a view's M0-Channel list) and gets each event once, in id order, also on a
resume with Last-Event-ID. tests/apps/grants_app.py counts its calls.

PyJWT is not in requirements/test.txt: the tests that need it skip without it."""

import base64
import hashlib
import hmac
import http.client
import json
import re
import signal
import socket
import sys
import time

import pytest

from serverproc import REPO
from sse import SSEStream
from wsraw import RawWS

sys.path.insert(0, str(REPO / "python"))
import m0pub  # noqa: E402

K1 = "k1-secret-0123456789abcdefghijklmnop"
K2 = "k2-secret-ZYXWVUTSRQPONMLKJIHGFEDCBA98"
APP = "grants_app:application"


def b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def raw_token(header, payload, key):
    """A token signed by hand: header and payload as JSON text, as sent."""
    signing = b64(header.encode()) + "." + b64(payload.encode())
    return signing + "." + b64(hmac.new(key.encode(), signing.encode(), hashlib.sha256).digest())


def claims(channels=("news",), ttl=60, **extra):
    c = {"channels": list(channels), "exp": int(time.time()) + ttl}
    c.update(extra)
    return json.dumps(c)


def good(channels=("news",), kid="k1", key=K1, **kw):
    return raw_token(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}), claims(channels, **kw), key)


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "grant.keys"
    path.write_text("k1 %s\nk2 %s\n" % (K1, K2))
    path.chmod(0o600)
    return path


@pytest.fixture
def server(start_server, key_file):
    return start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                        "--access-log")


def get(server, path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def publish(server, channel, data):
    resp, body = get(server, "/publish?channel=%s&data=%s" % (channel, data))
    assert resp.status == 200
    return int(body)


def calls(server):
    return int(get(server, "/calls")[1])


def held(server):
    return json.loads(get(server, "/health")[1])["held_streams"]


def wait_held(server, n, timeout=5):
    deadline = time.monotonic() + timeout
    while held(server) != n:
        assert time.monotonic() < deadline, "held_streams never reached %d" % n
        time.sleep(0.02)


def events(stream, n):
    out = []
    while len(out) < n:
        ev = stream.next_event(timeout=5)
        out.append((int(ev.id), ev.data))
    return out


# ------------------------------------------------------------------ holds

def test_helper_minted_grant_holds_sse_on_its_channels(server, key_file):
    tok = m0pub.grant(["news", "chat"], ttl=60, sub="alice", key_file=key_file)
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        assert s.status == 200 and s.headers["content-type"] == "text/event-stream"
        wait_held(server, 1)
        a = publish(server, "news", "n1")
        publish(server, "other", "never")
        b = publish(server, "chat", "c1")
        assert events(s, 2) == [(a, "n1"), (b, "c1")]
    assert calls(server) == 3          # the publishes (and /health is C's): the subscribe ran no Python


def test_pyjwt_minted_grant_holds_sse_and_bearer_header(server):
    jwt = pytest.importorskip("jwt")
    tok = jwt.encode({"channels": ["news"], "exp": int(time.time()) + 60}, K2, algorithm="HS256",
                     headers={"kid": "k2"})
    with SSEStream(server.port, "/rt/sse", headers=[("Authorization", "Bearer " + tok)]) as s:
        assert s.status == 200
        wait_held(server, 1)
        i = publish(server, "news", "hello")
        assert events(s, 1) == [(i, "hello")]


def test_grant_websocket_gets_events_and_inbound_is_closed_1008(server, key_file):
    tok = m0pub.grant(["news"], key_file=key_file)
    ws = RawWS(server.port, "/rt/ws?token=" + tok)
    assert ws.status == 101
    wait_held(server, 1)
    publish(server, "news", "over-ws")
    f = ws.recv()
    assert f.opcode == 1 and f.payload == b"over-ws"
    ws.send_text("hi")
    f = ws.recv()
    assert f.opcode == 8 and f.close_code == 1008
    assert calls(server) == 1


def test_grant_inbound_posts_messages_to_the_view(start_server, key_file):
    server = start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                          "--grant-inbound", "/inbound")
    tok = m0pub.grant(["news", "chat"], sub="bob", key_file=key_file)
    ws = RawWS(server.port, "/rt/ws?token=" + tok)
    assert ws.status == 101
    ws.send_text("hello")
    f = ws.recv()
    assert f.opcode == 1 and f.payload == b"bob|news,chat|hello"      # no "|saw ...": the token stayed here
    ws = RawWS(server.port, "/rt/ws", headers=[("Authorization", "Bearer " + tok)])
    assert ws.status == 101
    ws.send_text("again")
    f = ws.recv()
    assert f.opcode == 1 and f.payload == b"bob|news,chat|again"


def test_a_granted_socket_is_logged_as_its_handshake_and_its_messages_as_the_inbound_view(start_server,
                                                                                        key_file):
    """Issue 27 item 15: with --grant-inbound the handshake's line is the
    request that came (GET PREFIX/ws, its token redacted), written when the
    socket ends; each message's line is the POST to the inbound view, with
    the time the view took."""
    server = start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                          "--grant-inbound", "/inbound", "--heartbeat", "0", "--access-log",
                          "--access-log-format", "%(r)s %(s)s %(B)s %(D)s")
    tok = m0pub.grant(["news", "chat"], sub="bob", key_file=key_file)
    ws = RawWS(server.port, "/rt/ws?token=" + tok)
    assert ws.status == 101
    ws.send_text("hello")
    f = ws.recv()
    assert f.payload == b"bob|news,chat|hello"
    message = server.stdout.wait_for(re.compile(r"^POST /inbound HTTP/1.1 200 %d (\d+)$" % len(f.payload)), 5)
    assert message and int(message.group(1)) > 0, server.stdout.text()
    ws.close_frame(1000)
    closing = ws.recv()
    assert ws.wait_eof()
    line = server.stdout.wait_for(re.compile(r"^GET /rt/ws\?token=REDACTED HTTP/1.1 101 (\d+) \d+$"), 5)
    assert line, server.stdout.text()
    assert int(line.group(1)) == 2 + len(f.payload) + 2 + len(closing.payload), line.string
    assert "GET /inbound" not in server.stdout.text()
    assert tok.split(".")[2] not in server.stdout.text()


def test_grant_cannot_ask_for_a_channel_it_lacks(server):
    resp, body = get(server, "/rt/sse?channel=secret&token=" + good(["news", "chat"]))
    assert resp.status == 403 and body == b"the grant does not cover this channel\n"
    resp, _ = get(server, "/rt/sse?channel=news,secret&token=" + good(["news", "chat"]))
    assert resp.status == 403
    # A subset it has is held.
    with SSEStream(server.port, "/rt/sse?channel=chat&token=" + good(["news", "chat"])) as s:
        assert s.status == 200
        wait_held(server, 1)
        publish(server, "news", "not-asked")
        i = publish(server, "chat", "asked")
        assert events(s, 1) == [(i, "asked")]
    wait_held(server, 0)


# -------------------------------------------------------------- refusals

def flip(tok, part):
    parts = tok.split(".")
    p = parts[part]
    c = "A" if p[1] != "A" else "B"
    parts[part] = p[0] + c + p[2:]
    return ".".join(parts)


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def flip_last(tok, part, bit=0o40):
    """tok with the last base64url character of part changed: its 6-bit
    value XOR bit. A last character of a part whose length is 2 or 3 mod 4
    holds 2 or 4 bits of the last byte, then unused bits: flipping those
    would decode to the same bytes. The top bit (0o40) is always one of the
    used bits, so the decoded part changes; bit=1 flips an unused one when
    the length is not 0 mod 4."""
    parts = tok.split(".")
    p = parts[part]
    parts[part] = p[:-1] + B64URL[B64URL.index(p[-1]) ^ bit]
    return ".".join(parts)


H = json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"})
REFUSED = {
    "alg_none": lambda: b64(json.dumps({"alg": "none", "kid": "k1"}).encode()) + "." + b64(claims().encode()) + ".",
    "alg_none_signed": lambda: raw_token(json.dumps({"alg": "none", "kid": "k1"}), claims(), K1),
    "other_kids_key": lambda: raw_token(H, claims(), K2),
    "unknown_kid": lambda: raw_token(json.dumps({"alg": "HS256", "kid": "k9"}), claims(), K1),
    "flipped_header": lambda: flip(good(), 0),
    "flipped_payload": lambda: flip(good(), 1),
    "flipped_signature": lambda: flip(good(), 2),
    "flipped_header_last": lambda: flip_last(good(), 0),
    "flipped_payload_last": lambda: flip_last(good(), 1),
    "flipped_signature_last": lambda: flip_last(good(), 2),
    # 32 bytes are 43 characters: the last holds 4 bits and 2 unused ones,
    # which must be zero (one token, one spelling: RFC 4648 §3.5).
    "signature_unused_bits": lambda: flip_last(good(), 2, bit=1),
    "past_exp": lambda: good(ttl=-3600),
    "future_nbf": lambda: good(nbf=int(time.time()) + 3600),
    "huge": lambda: good(channels=["c%d" % i for i in range(30)], pad="x" * 5000),
    # Both exp members valid: refused for the duplicate, not for a date.
    "duplicate_claim": lambda: raw_token(H, claims()[:-1] + ', "exp": %d}' % (time.time() + 120), K1),
    "missing_exp": lambda: raw_token(H, json.dumps({"channels": ["news"]}), K1),
    "missing_channels": lambda: raw_token(H, json.dumps({"exp": int(time.time()) + 60}), K1),
    "rs256": lambda: raw_token(json.dumps({"alg": "RS256", "kid": "k1"}), claims(), K1),
    "garbage": lambda: "not.a.token",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("kind", ["sse", "ws"])
def test_bad_grants_are_refused_with_no_hold(server, case, kind):
    tok = REFUSED[case]()
    if kind == "sse":
        resp, body = get(server, "/rt/sse?token=" + tok)
        status, headers = resp.status, {k.lower(): v for k, v in resp.getheaders()}
    else:
        ws = RawWS(server.port, "/rt/ws?token=" + tok)
        status, headers = ws.status, ws.headers
        body = ws.buf
        while True:                      # the refusal is closed after its body
            chunk = ws.sock.recv(4096)
            if not chunk:
                break
            body += chunk
    assert status == 401, (case, status, body)
    assert headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert body.count(b"\n") == 1 and len(body) < 80
    assert held(server) == 0
    assert calls(server) == 0


def test_nbf_is_allowed_the_leeway_and_no_more(server):
    """nbf a little in the future (10 s, within the 30 s clock-skew leeway,
    jwt.h) is held; 60 s ahead is refused."""
    now = int(time.time())
    with SSEStream(server.port, "/rt/sse?token=" + good(nbf=now + 10)) as s:
        assert s.status == 200
        wait_held(server, 1)
    wait_held(server, 0)
    resp, body = get(server, "/rt/sse?token=" + good(nbf=now + 60))
    assert resp.status == 401, body
    assert held(server) == 0


def test_bad_signature_and_unknown_kid_read_the_same(server):
    a, ab = get(server, "/rt/sse?token=" + REFUSED["other_kids_key"]())
    b, bb = get(server, "/rt/sse?token=" + REFUSED["unknown_kid"]())
    assert (a.status, ab, a.getheader("WWW-Authenticate")) == (b.status, bb, b.getheader("WWW-Authenticate"))


def test_no_token_is_a_bare_challenge(server):
    resp, _ = get(server, "/rt/sse")
    assert resp.status == 401 and resp.getheader("WWW-Authenticate") == "Bearer"


# ------------------------------------------------------ several channels

def test_three_channels_each_event_once_in_id_order(server):
    tok = good(["a", "b", "c"])
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s, \
            SSEStream(server.port, "/hold?channel=a,%20b,c,a") as v:
        assert v.status == 200
        wait_held(server, 2)
        sent = []
        for i in range(12):
            ch = "abc"[i * 7 % 3]
            sent.append((publish(server, ch, "%s%d" % (ch, i)), "%s%d" % (ch, i)))
        publish(server, "d", "never")
        sent.sort()
        assert events(s, 12) == sent
        assert events(v, 12) == sent
        stop = publish(server, "a", "last")
        assert events(s, 1) == [(stop, "last")] and events(v, 1) == [(stop, "last")]


def test_resume_with_last_event_id_on_a_grant_stream_merges_channels(server):
    ids = [publish(server, ch, "%s%d" % (ch, i)) for i, ch in enumerate("abcab")]
    tok = good(["a", "b", "c"])
    with SSEStream(server.port, "/rt/sse?token=" + tok, headers=[("Last-Event-ID", str(ids[1]))]) as s:
        got = events(s, 3)
        assert got == [(ids[2], "c2"), (ids[3], "a3"), (ids[4], "b4")]
        wait_held(server, 1)
        i = publish(server, "b", "live")
        assert events(s, 1) == [(i, "live")]
    # A resume from before this worker's journal: the gap notice first.
    with SSEStream(server.port, "/rt/sse?token=" + tok, headers=[("Last-Event-ID", "999999")]) as s:
        ev = s.next_event(timeout=5)
        assert ev.event == "m0-gap"


# ----------------------------------------------------- rotation, CORS, log

def test_key_rotation_through_sighup(start_server, tmp_path):
    path = tmp_path / "keys"
    path.write_text("k1 %s\n" % K1)
    path.chmod(0o600)
    server = start_server(APP, "--realtime", "--grant-key-file", str(path), "--grant-path", "/rt")
    assert get(server, "/rt/sse?token=" + good(kid="k2", key=K2))[0].status == 401
    old = set(server.worker_pids())
    path.write_text("k1 %s\nk2 %s\n" % (K1, K2))
    server.signal(signal.SIGHUP)
    server.wait_workers(lambda pids: pids and not (set(pids) & old))
    for kid, key in (("k1", K1), ("k2", K2)):            # both live
        with SSEStream(server.port, "/rt/sse?token=" + good(kid=kid, key=key)) as s:
            assert s.status == 200, kid
    # A bad file: a warning, and the keys that serve stay.
    path.write_text("k3 short\n")
    old = set(server.worker_pids())
    server.signal(signal.SIGHUP)
    server.wait_workers(lambda pids: pids and not (set(pids) & old))
    assert server.stderr.wait_for(re.compile(r"SIGHUP: .*grant keys already loaded stay"), 5)
    with SSEStream(server.port, "/rt/sse?token=" + good(kid="k2", key=K2)) as s:
        assert s.status == 200


def test_cors_origins(start_server, key_file):
    server = start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                          "--grant-cors-origin", "https://app.example")
    tok = good()
    with SSEStream(server.port, "/rt/sse?token=" + tok, headers=[("Origin", "https://app.example")]) as s:
        assert s.status == 200
        assert s.headers["access-control-allow-origin"] == "https://app.example"
        assert s.headers["access-control-allow-credentials"] == "true"
        assert s.headers["vary"] == "Origin"
    resp, _ = get(server, "/rt/sse?token=" + tok, {"Origin": "https://evil.example"})
    assert resp.status == 403
    ws = RawWS(server.port, "/rt/ws?token=" + tok, headers=[("Origin", "https://evil.example")])
    assert ws.status == 403
    ws = RawWS(server.port, "/rt/ws?token=" + tok, headers=[("Origin", "https://app.example")])
    assert ws.status == 101
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("OPTIONS", "/rt/sse", headers={"Origin": "https://app.example",
                                                "Access-Control-Request-Method": "GET"})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 204 and resp.getheader("Access-Control-Allow-Origin") == "https://app.example"


def test_cross_origin_websocket_refused_without_cors_origins(server):
    tok = good()
    assert RawWS(server.port, "/rt/ws?token=" + tok, headers=[("Origin", "http://other:1")]).status == 403
    assert RawWS(server.port, "/rt/ws?token=" + tok, headers=[("Origin", "http://127.0.0.1")]).status == 101


@pytest.mark.parametrize("origin", ["https://127.0.0.1", "evil://127.0.0.1", "x-scheme://127.0.0.1",
                                    "ws://127.0.0.1", "http://127.0.0.1:8080", "http://127.0.0.1/",
                                    "http://u@127.0.0.1", "null", "127.0.0.1"])
def test_same_origin_is_scheme_host_and_port(server, origin):
    """RFC 6454: the request's own origin is its Host on the scheme it came on
    (plain http here: Host 127.0.0.1 is http://127.0.0.1:80); the right host
    under another scheme or port is another origin (issue 27 item 2)."""
    tok = good()
    assert RawWS(server.port, "/rt/ws?token=" + tok, headers=[("Origin", origin)]).status == 403
    with SSEStream(server.port, "/rt/sse?token=" + tok, headers=[("Origin", origin)]) as s:
        assert s.status == 403
    for own in ("http://127.0.0.1", "http://127.0.0.1:80", "HTTP://127.0.0.1"):
        assert RawWS(server.port, "/rt/ws?token=" + tok, headers=[("Origin", own)]).status == 101, own


def test_https_origin_only_from_a_trusted_proxy(start_server, key_file):
    """A trusted proxy's X-Forwarded-Proto / Forwarded proto=https makes the
    request's origin https://HOST; from an untrusted peer the header is
    ignored and https://HOST is another origin."""
    tok = good()
    trusted = start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt")
    for proto in (("X-Forwarded-Proto", "https"), ("Forwarded", "for=192.0.2.1;proto=https")):
        ws = lambda origin: RawWS(trusted.port, "/rt/ws?token=" + tok, headers=[("Origin", origin), proto]).status
        assert ws("https://127.0.0.1") == 101, proto
        assert ws("https://127.0.0.1:443") == 101, proto
        assert ws("http://127.0.0.1") == 403, proto
        with SSEStream(trusted.port, "/rt/sse?token=" + tok, headers=[("Origin", "https://127.0.0.1"), proto]) as s:
            assert s.status == 200, proto
    untrusted = start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                             "--forwarded-allow-ips", "192.0.2.7")
    hdrs = [("Origin", "https://127.0.0.1"), ("X-Forwarded-Proto", "https")]
    assert RawWS(untrusted.port, "/rt/ws?token=" + tok, headers=hdrs).status == 403
    assert RawWS(untrusted.port, "/rt/ws?token=" + tok, headers=[("Origin", "http://127.0.0.1")]).status == 101


def test_the_access_log_never_has_a_token(server):
    tok = good()
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        assert s.status == 200
    get(server, "/rt/sse?token=" + flip(tok, 2))
    get(server, "/rt/sse", {"Authorization": "Bearer " + flip(tok, 1)})
    assert server.stdout.wait_for(re.compile(r'"GET /rt/sse\?token=REDACTED HTTP/1.1" 401'), 5)
    wait_held(server, 0)
    assert server.stdout.wait_for(re.compile(r'"GET /rt/sse\?token=REDACTED HTTP/1.1" 200'), 5)
    text = server.stdout.text() + server.stderr.text()
    assert tok.split(".")[2] not in text and tok.split(".")[1] not in text


def test_credential_headers_are_redacted_in_the_access_log(start_server, key_file):
    """Issue 27 item 3: a header atom of --access-log-format prints the
    credentials of Authorization and of the grant cookie as REDACTED."""
    server = start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                          "--grant-cookie", "m0g", "--access-log", "--access-log-format",
                          "%(r)s %(s)s auth=[%({Authorization}i)s] cookie=[%({Cookie}i)s]")
    tok = good()
    with SSEStream(server.port, "/rt/sse", headers=[("Authorization", "Bearer " + tok)]) as s:
        assert s.status == 200
    with SSEStream(server.port, "/rt/sse", headers=[("Cookie", "theme=dark; m0g=%s; lang=en" % tok)]) as s:
        assert s.status == 200
    assert server.stdout.wait_for(re.compile(r"GET /rt/sse HTTP/1.1 200 auth=\[Bearer REDACTED\] cookie=\[-\]"), 5)
    assert server.stdout.wait_for(re.compile(
        r"GET /rt/sse HTTP/1.1 200 auth=\[-\] cookie=\[theme=dark; m0g=REDACTED; lang=en\]"), 5)
    text = server.stdout.text() + server.stderr.text()
    assert tok.split(".")[2] not in text and tok.split(".")[1] not in text


def test_a_sub_cannot_forge_a_debug_line(start_server, key_file):
    """Issue 27 item 5: at --log-level debug the grant's sub (and path, kid)
    is escaped: a newline in it is written as \\n, never a line of its own."""
    server = start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                          "--log-level", "debug")
    forged = "[2026-12-05 00:00:00 +0000] [1] [ERROR] forged line"
    tok = good(sub="alice\n" + forged + "\r\x1b[2J")
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        assert s.status == 200
    assert get(server, "/rt/sse?channel=other&token=" + tok)[0].status == 403
    held_line = server.stderr.wait_for(re.compile(r"grant /rt/sse held: kid k1, sub alice\\n\[2026"), 5)
    assert held_line, server.stderr.text()
    assert "\\r\\x1b[2J" in held_line.string
    assert server.stderr.wait_for(re.compile(r"grant /rt/sse \(kid k1, sub alice\\n\[2026.* refused"), 5)
    assert not any(line.startswith(forged) for line in server.stderr.text().split("\n"))
    assert "\x1b" not in server.stderr.text()


def test_no_python_call_across_a_thousand_subscribes(server):
    tok = good(["news", "chat"])
    req = ("GET /rt/sse?token=%s HTTP/1.1\r\nHost: x\r\n\r\n" % tok).encode()
    for _ in range(1000):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(req)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            assert chunk
            head += chunk
        assert head.startswith(b"HTTP/1.1 200")
        s.close()
    assert calls(server) == 0
