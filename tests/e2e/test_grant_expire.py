"""Grant expiry and refresh (issue 32 item 4): with --grant-expire close (the
default) a stream held on a grant gets an m0-refresh notice --grant-refresh
seconds before the grant's exp (SSE: an event with no id; WebSocket: a text
frame {"type": "m0-refresh", "exp": N}) and is ended at exp (SSE: a FIN;
WebSocket: a close frame 4001); a reconnect with a fresh grant and
Last-Event-ID (or ?last_event_id= on the new URL) resumes with nothing lost;
--grant-expire keep leaves a stream open past its exp, as before.

Grants here live 3 s (exp whole seconds, so 2..3 s left when the stream
opens) with --grant-refresh 1: the notice comes about 1 s before exp, the end
at exp within 1 s. Every wait is bounded and waits on the event itself."""

import json
import sys
import time

import pytest

from serverproc import REPO, run_to_exit
from sse import SSEStream
from wsraw import RawWS

sys.path.insert(0, str(REPO / "python"))
import m0pub  # noqa: E402

K1 = "k1-secret-0123456789abcdefghijklmnop"
APP = "grants_app:application"


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "grant.keys"
    path.write_text("k1 %s\n" % K1)
    path.chmod(0o600)
    return path


def start(start_server, key_file, *extra):
    return start_server(APP, "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt", *extra)


def mint(key_file, ttl, channels=("news",)):
    """A grant and its exp (seconds since the epoch)."""
    now = time.time()
    return m0pub.grant(list(channels), ttl=ttl, key_file=key_file, now=now), int(now) + ttl


def publish(server, channel, data):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/publish?channel=%s&data=%s" % (channel, data))
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    assert resp.status == 200
    return int(body)


def held(server):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/health")
    body = conn.getresponse().read()
    conn.close()
    return json.loads(body)["held_streams"]


def wait_held(server, n, timeout=5):
    deadline = time.monotonic() + timeout
    while held(server) != n:
        assert time.monotonic() < deadline, "held_streams never reached %d" % n
        time.sleep(0.02)


def until_closed(stream, deadline):
    """Every event until the server ends the stream (EOF), with the wall
    clock of the EOF; fails at the deadline (monotonic)."""
    got = []
    while True:
        try:
            ev = stream.next(max(0.01, deadline - time.monotonic()))
        except EOFError:
            return got, time.time()
        except (TimeoutError, OSError) as e:
            raise AssertionError("the stream was not closed in time (got %r)" % got) from e
        if ev.comment is None:
            got.append(ev)


def test_sse_gets_m0_refresh_before_exp_and_is_closed_at_exp(start_server, key_file):
    server = start(start_server, key_file, "--grant-refresh", "1")
    tok, exp = mint(key_file, 3)
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        assert s.status == 200
        wait_held(server, 1)
        a = publish(server, "news", "before")
        ev = s.next_event(timeout=5)
        assert (int(ev.id), ev.data) == (a, "before")
        ev = s.next_event(timeout=exp - time.time() + 2)
        noticed = time.time()
        assert ev.event == "m0-refresh" and ev.id is None, ev
        assert json.loads(ev.data) == {"exp": exp}
        assert noticed < exp, "the notice came %.2f s after exp" % (noticed - exp)
        assert noticed >= exp - 1.7, "the notice came %.2f s before exp (--grant-refresh 1)" % (exp - noticed)
        rest, closed = until_closed(s, time.monotonic() + (exp - time.time()) + 3)
        assert rest == []
        assert abs(closed - exp) <= 1.0, "closed %.2f s from exp" % (closed - exp)
    wait_held(server, 0)


def test_default_refresh_is_clamped_to_half_a_short_grant(start_server, key_file):
    """--grant-refresh defaults to 30 s; a grant with less life left than
    twice that gets its notice half-way through what is left."""
    server = start(start_server, key_file)
    opened = time.time()
    tok, exp = mint(key_file, 4)
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        assert s.status == 200
        ev = s.next_event(timeout=exp - time.time() + 2)
        noticed = time.time()
        assert ev.event == "m0-refresh" and json.loads(ev.data) == {"exp": exp}
        half = opened + (exp - opened) / 2
        assert half - 0.6 <= noticed <= half + 0.8, "notice at %.2f s, half-way is %.2f s" % (
            noticed - opened, half - opened)
        _, closed = until_closed(s, time.monotonic() + (exp - time.time()) + 3)
        assert abs(closed - exp) <= 1.0


def test_websocket_gets_refresh_frame_then_close_4001_at_exp(start_server, key_file):
    server = start(start_server, key_file, "--grant-refresh", "1", "--heartbeat", "0")
    tok, exp = mint(key_file, 3)
    ws = RawWS(server.port, "/rt/ws?token=" + tok)
    try:
        assert ws.status == 101
        wait_held(server, 1)
        publish(server, "news", "over-ws")
        f = ws.recv(timeout=5)
        assert f.opcode == 1 and f.payload == b"over-ws"
        f = ws.recv(timeout=exp - time.time() + 2)
        noticed = time.time()
        assert f.opcode == 1 and json.loads(f.payload) == {"type": "m0-refresh", "exp": exp}, f
        assert exp - 1.7 <= noticed < exp
        f = ws.recv(timeout=exp - time.time() + 2)
        closed = time.time()
        assert f.opcode == 8 and f.close_code == 4001 and f.payload[2:] == b"grant expired", f
        assert abs(closed - exp) <= 1.0, "close frame %.2f s from exp" % (closed - exp)
        ws.close_frame(4001)
        assert ws.wait_eof(timeout=5)
    finally:
        ws.close()
    wait_held(server, 0)


def resume_nothing_lost(server, key_file, via_query):
    tok, exp = mint(key_file, 3)
    seen = []
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        wait_held(server, 1)
        sent = [publish(server, "news", "e%d" % i) for i in range(3)]
        while len(seen) < 3:
            ev = s.next_event(timeout=5)
            seen.append((int(ev.id), ev.data))
        ev = s.next_event(timeout=exp - time.time() + 2)
        assert ev.event == "m0-refresh"
        # Published after the notice, before the end: on this stream or, if
        # the end came first, on the next one.
        sent.append(publish(server, "news", "late"))
        rest, _ = until_closed(s, time.monotonic() + (exp - time.time()) + 3)
        seen += [(int(e.id), e.data) for e in rest]
    wait_held(server, 0)
    # Published while no stream was open.
    sent += [publish(server, "news", "gap%d" % i) for i in range(3)]
    fresh, _ = mint(key_file, 60)
    last = seen[-1][0]
    if via_query:
        path, headers = "/rt/sse?token=%s&last_event_id=%d" % (fresh, last), []
    else:
        path, headers = "/rt/sse?token=" + fresh, [("Last-Event-ID", str(last))]
    with SSEStream(server.port, path, headers=headers) as s:
        assert s.status == 200
        while len(seen) < len(sent):
            ev = s.next_event(timeout=5)
            assert ev.event == "message", ev          # no m0-gap: the journal has them all
            seen.append((int(ev.id), ev.data))
        wait_held(server, 1)
        tail = publish(server, "news", "live")
        ev = s.next_event(timeout=5)
        assert (int(ev.id), ev.data) == (tail, "live")
    assert [i for i, _ in seen] == sent
    assert [d for _, d in seen] == ["e0", "e1", "e2", "late", "gap0", "gap1", "gap2"]


def test_reconnect_with_a_fresh_grant_and_last_event_id_loses_nothing(start_server, key_file):
    server = start(start_server, key_file, "--grant-refresh", "1")
    resume_nothing_lost(server, key_file, via_query=False)


def test_a_new_eventsource_resumes_with_last_event_id_in_the_query(start_server, key_file):
    """A page that replaces its EventSource cannot send Last-Event-ID: the
    grant URL's last_event_id parameter stands for it."""
    server = start(start_server, key_file, "--grant-refresh", "1")
    resume_nothing_lost(server, key_file, via_query=True)


def test_the_header_wins_over_the_query(start_server, key_file):
    server = start(start_server, key_file)
    a = publish(server, "news", "a")
    b = publish(server, "news", "b")
    tok, _ = mint(key_file, 60)
    with SSEStream(server.port, "/rt/sse?token=%s&last_event_id=%d" % (tok, a - 1),
                   headers=[("Last-Event-ID", str(a))]) as s:
        ev = s.next_event(timeout=5)
        assert (int(ev.id), ev.data) == (b, "b")


@pytest.mark.parametrize("name", ["last_event_id", "lastEventId"])
def test_the_query_names_where_the_stream_starts(start_server, key_file, name):
    """Both spellings (lastEventId is Pushpin's and Mercure's) start the
    stream after the id: a page that rendered m0pub.history up to it."""
    server = start(start_server, key_file)
    a = publish(server, "news", "a")
    b = publish(server, "news", "b")
    tok, _ = mint(key_file, 60)
    with SSEStream(server.port, "/rt/sse?token=%s&%s=%d" % (tok, name, a)) as s:
        ev = s.next_event(timeout=5)
        assert (int(ev.id), ev.data) == (b, "b")


def test_keep_leaves_the_stream_open_past_exp(start_server, key_file):
    server = start(start_server, key_file, "--grant-expire", "keep", "--grant-refresh", "1", "--heartbeat", "0")
    tok, exp = mint(key_file, 2)
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        assert s.status == 200
        wait_held(server, 1)
        # Nothing at all (no notice, no end) until well past exp: the read
        # times out rather than seeing an event or the EOF.
        with pytest.raises((TimeoutError, OSError)) as e:
            s.next(timeout=exp - time.time() + 1.5)
        assert not isinstance(e.value, EOFError) and not s.eof
        assert time.time() > exp + 1
        i = publish(server, "news", "after-exp")
        ev = s.next_event(timeout=5)
        assert (int(ev.id), ev.data) == (i, "after-exp")
        assert held(server) == 1


def test_websocket_keep_is_not_closed(start_server, key_file):
    server = start(start_server, key_file, "--grant-expire", "keep", "--grant-refresh", "1", "--heartbeat", "0")
    tok, exp = mint(key_file, 2)
    ws = RawWS(server.port, "/rt/ws?token=" + tok)
    try:
        assert ws.status == 101
        with pytest.raises((TimeoutError, OSError)):
            ws.recv(timeout=exp - time.time() + 1.5)
        i = publish(server, "news", "after-exp")
        f = ws.recv(timeout=5)
        assert f.opcode == 1 and f.payload == b"after-exp", (i, f)
    finally:
        ws.close()


def test_refresh_zero_sends_no_notice_but_still_closes(start_server, key_file):
    server = start(start_server, key_file, "--grant-refresh", "0")
    tok, exp = mint(key_file, 2)
    with SSEStream(server.port, "/rt/sse?token=" + tok) as s:
        rest, closed = until_closed(s, time.monotonic() + (exp - time.time()) + 3)
        assert rest == []
        assert abs(closed - exp) <= 1.0


@pytest.mark.parametrize("args, line", [
    (["--grant-expire", "sometimes"], "m0serve: error: --grant-expire: invalid value 'sometimes'"),
    (["--grant-refresh", "-1"], "m0serve: error: --grant-refresh: invalid value '-1'"),
    (["--grant-refresh", "soon"], "m0serve: error: --grant-refresh: invalid value 'soon'"),
])
def test_bad_flag_values_exit_2_with_one_line(key_file, args, line):
    base = [APP, "--bind", "127.0.0.1:0", "--grant-key-file", str(key_file), "--grant-path", "/rt"]
    code, err = run_to_exit(base + args)
    assert code == 2 and err.strip() == line, (code, err)


def test_bad_env_value_and_flags_without_grant_path(key_file):
    import os
    code, err = run_to_exit([APP, "--bind", "127.0.0.1:0", "--grant-key-file", str(key_file), "--grant-path", "/rt"],
                            env=dict(os.environ, M0_GRANT_EXPIRE="never"))
    assert code == 2 and err.strip() == "m0serve: error: M0_GRANT_EXPIRE: invalid value 'never'", err
    for flag, value in (("--grant-expire", "keep"), ("--grant-refresh", "5")):
        code, err = run_to_exit([APP, "--bind", "127.0.0.1:0", flag, value])
        assert code == 2 and err.strip() == "m0serve: error: %s: needs --grant-path" % flag, err
