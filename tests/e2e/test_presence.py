"""Occupancy, presence, join/leave and history (issue 32; docs/realtime.md,
"Who is listening, and what they missed").

m0pub.channel_info / presence / history called from a view of
tests/apps/presence_app.py, with two workers on one host (the shared table)
and with two hosts of two workers on one Redis (each host's part in the
broker): counts exact after opens and closes, a worker killed with -9 drops
out, a host stopped expires; presence lists distinct subs with their
connections; join and leave once each, none for a quick reconnect; history
from the journal and from the broker's stream, complete or not.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rawhttp import Conn, request
from serverproc import REPO, kill_group
from sse import SSEStream
from sse import publish_by_view as publish

APP = "presence_app:application"
PYDIR = REPO / "python"
WAIT = 10.0                   # bound of every wait for a count to settle
PART_EXPIRY = 3.0 + 1.0       # docs: a stopped host drops out within 3 s of its last heartbeat (1 s apart)


def get_json(port, path):
    r = request(port, "GET", path)
    assert r.status == 200, r.body
    return json.loads(r.body)


def info(port, channel="room"):
    return get_json(port, "/info?channel=%s" % channel)


def presence(port, channel="room", limit=1000):
    return get_json(port, "/presence?channel=%s&limit=%d" % (channel, limit))


def open_stream(port, channel="room", sub=None, since=None, headers=()):
    """A held stream: (stream, worker pid)."""
    path = "/events?channel=%s" % channel
    if sub is not None:
        path += "&sub=%s" % sub
    if since is not None:
        path += "&since=%d" % since
    s = SSEStream(port, path, headers=headers, timeout=WAIT)
    assert s.status == 200
    hello = s.next()
    return s, int(hello.comment.split("worker=")[1])


def open_on(port, worker, **kw):
    """A stream held by that worker (reuseport spreads connections)."""
    for _ in range(80):
        s, pid = open_stream(port, **kw)
        if pid == worker:
            return s
        s.close()
    raise AssertionError("could not hold a stream on worker %d" % worker)


def workers_of(port, n=2):
    """The pids of the n workers serving port."""
    seen = set()
    for _ in range(80):
        seen.add(int(request(port, "GET", "/pid").body))
        if len(seen) == n:
            return sorted(seen)
    raise AssertionError("saw only workers %s" % seen)


def settle(fetch, want, timeout=WAIT):
    """Poll fetch() until it returns want (every worker answers alike: a few
    agreeing answers in a row); the last answer otherwise."""
    deadline = time.monotonic() + timeout
    agree = 0
    got = None
    while time.monotonic() < deadline:
        got = fetch()
        agree = agree + 1 if got == want else 0
        if agree >= 4:
            return got
        time.sleep(0.05)
    return got


def events_of(stream, timeout):
    """The real events that arrive within timeout (then none for timeout)."""
    out = []
    while True:
        try:
            out.append(stream.next_event(timeout))
        except (TimeoutError, OSError):
            return out


# ------------------------------------------------------------------ one host

def test_occupancy_and_presence_on_two_workers(start_server, tmp_path):
    slow = tmp_path / "slow-boot"
    server = start_server(APP, "--realtime", workers=2, env={"PRESENCE_APP_SLOW_BOOT": str(slow)})
    w1, w2 = workers_of(server.port)
    held = [open_on(server.port, w1, sub="alice"), open_on(server.port, w2, sub="alice"),
            open_on(server.port, w2, sub="bob"), open_on(server.port, w1)]
    both = open_on(server.port, w1, channel="room,lobby", sub="carol")     # a list: counted on each
    assert settle(lambda: info(server.port)["connections"], 5) == 5
    assert settle(lambda: presence(server.port), {"alice": 2, "bob": 1, "carol": 1}) == \
        {"alice": 2, "bob": 1, "carol": 1}
    assert settle(lambda: presence(server.port, "lobby"), {"carol": 1}) == {"carol": 1}
    assert presence(server.port, limit=1) in ({"alice": 2}, {"bob": 1}, {"carol": 1})
    assert info(server.port, "nobody") == {"connections": 0, "last_id": None}

    held[1].close()                                  # alice on w2
    both.close()
    assert settle(lambda: info(server.port)["connections"], 3) == 3
    assert settle(lambda: presence(server.port), {"alice": 1, "bob": 1}) == {"alice": 1, "bob": 1}
    assert settle(lambda: info(server.port, "lobby")["connections"], 0) == 0

    [last] = publish(server.port, "room")
    assert settle(lambda: info(server.port), {"connections": 3, "last_id": last}) == {"connections": 3,
                                                                                      "last_id": last}
    # A worker killed with -9: its part drops out (the master empties its
    # block when it reaps it), the other worker's stays exact — at once,
    # not only once a replacement claims the block (it takes 3 s to boot).
    # Asked on a connection the surviving worker keeps (a new one may land
    # on the dead worker's socket, which waits for the replacement).
    for _ in range(80):
        ask = Conn(server.port)
        if int(ask.request("GET", "/pid").body) == w1:
            break
        ask.close()
    slow.touch()
    os.kill(w2, signal.SIGKILL)
    assert settle(lambda: json.loads(ask.request("GET", "/info?channel=room").body)["connections"], 2,
                  timeout=2.0) == 2
    assert not [l for l in server.stderr.lines if "worker booted (pid" in l and "pid %d" % w2 not in l and
                "pid %d" % w1 not in l], "counted until the replacement came"
    ask.close()
    assert settle(lambda: presence(server.port), {"alice": 1}) == {"alice": 1}
    for s in held:
        s.close()
    assert settle(lambda: info(server.port)["connections"], 0) == 0
    assert settle(lambda: presence(server.port), {}) == {}


def test_grant_sub_is_listed(start_server, tmp_path):
    keys = tmp_path / "grant.keys"
    keys.write_text("k1 %s\n" % ("s" * 40))
    keys.chmod(0o600)
    server = start_server(APP, "--realtime", "--grant-key-file", str(keys), "--grant-path", "/rt", workers=2)
    url = request(server.port, "GET", "/url?channels=room,news&sub=dana").body.decode()
    streams = [SSEStream(server.port, url, timeout=WAIT) for _ in range(3)]
    assert all(s.status == 200 for s in streams)
    assert settle(lambda: presence(server.port), {"dana": 3}) == {"dana": 3}
    assert settle(lambda: presence(server.port, "news"), {"dana": 3}) == {"dana": 3}
    assert info(server.port)["connections"] == 3
    for s in streams:
        s.close()
    assert settle(lambda: presence(server.port), {}) == {}


def test_join_and_leave_once_each_none_for_a_quick_reconnect(start_server):
    server = start_server(APP, "--realtime", "--presence-events", "room,chat.", "--presence-debounce", "1",
                          workers=2)
    w1, w2 = workers_of(server.port)
    watcher = open_on(server.port, w1)               # no sub: it sends nothing itself
    a1 = open_on(server.port, w1, sub="alice")
    [join] = events_of(watcher, 2.0)
    assert (join.event, json.loads(join.data)) == ("join", {"sub": "alice"})
    a2 = open_on(server.port, w2, sub="alice")       # a second tab, on the other worker
    a1.close()                                       # one of two goes: still here
    a2.close()
    # A reload takes a moment: the page comes back 0.3 s later, well within
    # the debounce (1 s) but after the agent has made the leave due (it
    # wakes on the close). Back at once, the close and the reconnect could
    # land in one batch, and the cancel of a due leave would go untested.
    time.sleep(0.3)
    a3 = open_on(server.port, w2, sub="alice")       # a reconnect well within the debounce
    assert events_of(watcher, 2.0) == []             # neither leave nor join
    other = open_on(server.port, w2, channel="lobby", sub="zed")      # not a --presence-events channel
    a3.close()
    [leave] = events_of(watcher, 3.0)
    assert (leave.event, json.loads(leave.data), leave.id > join.id) == ("leave", {"sub": "alice"}, True)
    other.close()
    # A worker killed with -9 takes its holds with it: the leave still comes.
    b = open_on(server.port, w2, sub="bea")
    [join] = events_of(watcher, 2.0)
    assert (join.event, json.loads(join.data)) == ("join", {"sub": "bea"})
    os.kill(w2, signal.SIGKILL)
    b.close()
    [leave] = events_of(watcher, 4.0)
    assert (leave.event, json.loads(leave.data)) == ("leave", {"sub": "bea"})
    watcher.close()


def test_presence_lists_a_sub_whose_leave_is_pending(start_server):
    server = start_server(APP, "--realtime", "--presence-events", "room", "--presence-debounce", "2", workers=2)
    watcher, _ = open_stream(server.port)
    announced_while_away(watcher, [server.port], lambda: open_stream(server.port, sub="alice")[0], 2.0)


def announced_while_away(watcher, fetch_ports, hold, debounce):
    """A sub whose only connection closes stays in presence() with 0
    connections while its leave is pending (the list agrees with the
    join/leave events: a page that renders meanwhile and then applies the
    events must not lose it), is counted again when it comes back within the
    debounce (no event), and is gone once the leave is published."""
    alice = hold()
    join = watcher.next_event(WAIT)
    assert (join.event, json.loads(join.data)) == ("join", {"sub": "alice"})
    alice.close()
    for port in fetch_ports:
        assert settle(lambda: info(port)["connections"], 1) == 1          # the watcher alone
        assert settle(lambda: presence(port), {"alice": 0}) == {"alice": 0}
    alice = hold()                                   # back within the debounce: a reload
    for port in fetch_ports:
        assert settle(lambda: presence(port), {"alice": 1}) == {"alice": 1}
    alice.close()
    went = time.monotonic()
    for port in fetch_ports:
        assert settle(lambda: presence(port), {"alice": 0}) == {"alice": 0}
    leave = watcher.next_event(debounce + WAIT)
    assert (leave.event, json.loads(leave.data)) == ("leave", {"sub": "alice"})
    assert time.monotonic() - went > debounce * 0.5                   # the one leave, after the debounce
    for port in fetch_ports:
        assert presence(port) == {}                  # the leave is out: no longer listed
    watcher.close()


# ---------------------------------------------------------------- history

def test_history_since_an_id_in_the_journal_and_older(start_server):
    server = start_server(APP, "--realtime", "--replay", "5", workers=1)
    ids = [publish(server.port, "h", data="m%d" % i, event="note")[0] for i in range(8)]
    got = get_json(server.port, "/history?channel=h&since=%d" % ids[4])
    assert got == {"events": [{"id": ids[i], "event": "note", "data": "m%d" % i} for i in (5, 6, 7)],
                   "complete": True}
    # Older than the journal (it keeps 5): what it has, and the flag that
    # sends m0-gap to a resume.
    got = get_json(server.port, "/history?channel=h&since=%d" % ids[0])
    assert [e["id"] for e in got["events"]] == ids[3:] and got["complete"] is False
    got = get_json(server.port, "/history?channel=h&since=%d&limit=2" % ids[4])
    assert [e["id"] for e in got["events"]] == ids[5:7] and got["complete"] is True
    got = get_json(server.port, "/history?channel=h&limit=2")          # since None: the newest
    assert [e["id"] for e in got["events"]] == ids[6:] and got["complete"] is True
    got = get_json(server.port, "/history?channel=h&since=%d" % (ids[-1] + 1000))   # never issued
    assert got == {"events": [], "complete": False}
    assert get_json(server.port, "/history?channel=h&since=%d" % ids[-1]) == {"events": [], "complete": True}
    assert info(server.port, "h") == {"connections": 0, "last_id": ids[-1]}
    # Multi-line data comes back as published; an event without a name as None.
    [i] = publish(server.port, "h2", data="a%0Ab")
    assert get_json(server.port, "/history?channel=h2")["events"] == [{"id": i, "event": None, "data": "a\nb"}]


def test_a_stream_starts_after_the_history_the_page_rendered(start_server):
    server = start_server(APP, "--realtime", workers=1)
    ids = publish(server.port, "page", n=3)
    page = get_json(server.port, "/history?channel=page&limit=1")      # the page rendered ids[2] only...
    missed = publish(server.port, "page", n=2)                          # ...then these came, before it subscribed
    s, _ = open_stream(server.port, "page", since=page["events"][-1]["id"])
    assert [s.next_event().id for _ in range(2)] == missed
    live = publish(server.port, "page")
    assert s.next_event().id == live[0]
    s.close()
    # A reconnect's Last-Event-ID wins over where the view said to start.
    s, _ = open_stream(server.port, "page", since=ids[0], headers=[("Last-Event-ID", str(missed[1]))])
    assert s.next_event().id == live[0]
    s.close()


def test_outside_a_server_the_answers_are_empty(tmp_path):
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "XDG_RUNTIME_DIR": str(tmp_path),
           "M0_PUBLISH_SOCKET": ""}
    code = ("import json, m0pub; print(json.dumps([m0pub.channel_info('room'), m0pub.presence('room'), "
            "m0pub.history('room', since=3)]))")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [{"connections": 0, "last_id": None}, {}, {"events": [], "complete": False}]
    assert "not running under m0serve" in p.stderr


# ---------------------------------------------------------------- two hosts

def host(start_server, url, *args):
    return start_server(APP, "--realtime", "--broker", url, "--heartbeat", "0.5", *args, workers=2)


def test_occupancy_across_two_hosts_and_a_host_that_stops(start_server, redis):
    a = host(start_server, redis.url)
    b = host(start_server, redis.url)
    a1, a2 = workers_of(a.port)
    held_a = [open_on(a.port, a1, sub="alice"), open_on(a.port, a2, sub="bob")]
    held_b = [open_stream(b.port, sub="alice")[0], open_stream(b.port, sub="cleo")[0], open_stream(b.port)[0]]
    for port in (a.port, b.port):
        assert settle(lambda: info(port)["connections"], 5) == 5
        assert settle(lambda: presence(port), {"alice": 2, "bob": 1, "cleo": 1}) == \
            {"alice": 2, "bob": 1, "cleo": 1}
    held_b[1].close()
    assert settle(lambda: presence(a.port), {"alice": 2, "bob": 1}) == {"alice": 2, "bob": 1}
    assert settle(lambda: info(a.port)["connections"], 4) == 4
    # A worker of host A killed with -9: A's own count drops at once, B's
    # once the dead worker's part has expired.
    os.kill(a2, signal.SIGKILL)
    assert settle(lambda: info(a.port)["connections"], 3, timeout=2.0) == 3
    assert settle(lambda: presence(b.port), {"alice": 2}, timeout=PART_EXPIRY + WAIT) == {"alice": 2}
    # Host B stops at once (its whole process group killed): its part
    # expires from A's answers within the documented time.
    stopped = time.monotonic()
    kill_group(b.proc)
    assert settle(lambda: info(a.port)["connections"], 1, timeout=PART_EXPIRY + 2.0) == 1
    assert time.monotonic() - stopped < PART_EXPIRY + 2.0
    assert presence(a.port) == {"alice": 1}
    for s in held_a + held_b:
        s.close()
    # Outside any server, with M0_BROKER: every live part, from Redis.
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": redis.url}
    code = "import json, m0pub; print(json.dumps([m0pub.channel_info('room'), m0pub.presence('room')]))"
    again = [open_on(a.port, a1, sub="dora")]
    deadline = time.monotonic() + WAIT
    while True:
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        got = json.loads(p.stdout)
        if got[0]["connections"] == 1 and got[1] == {"dora": 1} or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got[0]["connections"] == 1 and got[1] == {"dora": 1}
    again[0].close()


def test_join_and_leave_across_hosts(start_server, redis):
    args = ("--presence-events", "room", "--presence-debounce", "1")
    a = host(start_server, redis.url, *args)
    b = host(start_server, redis.url, *args)
    watcher, _ = open_stream(a.port)
    sa, _ = open_stream(a.port, sub="alice")
    [join] = events_of(watcher, 3.0)
    assert (join.event, json.loads(join.data)) == ("join", {"sub": "alice"})
    sb, _ = open_stream(b.port, sub="alice")          # the same sub on the other host: no second join
    assert settle(lambda: presence(a.port), {"alice": 2}) == {"alice": 2}
    sa.close()
    sb.close()
    sb, _ = open_stream(b.port, sub="alice")          # back within the debounce
    assert events_of(watcher, 2.5) == []
    sb.close()
    [leave] = events_of(watcher, 5.0)
    assert (leave.event, json.loads(leave.data)) == ("leave", {"sub": "alice"})
    watcher.close()


def test_presence_lists_a_sub_whose_leave_is_pending_across_hosts(start_server, redis):
    args = ("--presence-events", "room", "--presence-debounce", "2")
    a = host(start_server, redis.url, *args)
    b = host(start_server, redis.url, *args)
    watcher, _ = open_stream(a.port)
    announced_while_away(watcher, [a.port, b.port], lambda: open_stream(b.port, sub="alice")[0], 2.0)


def test_history_across_hosts(start_server, redis):
    a = host(start_server, redis.url, "--broker-retention", "3")
    b = host(start_server, redis.url, "--broker-retention", "3")
    ids = [publish(a.port, "hx", data="d%d" % i)[0] for i in range(3)]
    got = get_json(b.port, "/history?channel=hx&since=%d" % ids[0])
    assert got == {"events": [{"id": ids[1], "event": None, "data": "d1"},
                              {"id": ids[2], "event": None, "data": "d2"}], "complete": True}
    assert get_json(b.port, "/history?channel=hx&limit=1")["events"][0]["id"] == ids[2]
    assert info(b.port, "hx")["last_id"] == ids[2]
    # The stream is trimmed (MAXLEN ~ 3: whole nodes of 100 entries go):
    # since the first id, what is kept, and complete False.
    more = publish(a.port, "hx", n=250)
    got = get_json(b.port, "/history?channel=hx&since=%d&limit=10000" % ids[0])
    assert got["complete"] is False and got["events"][-1]["id"] == more[-1]
    assert ids[1] not in [e["id"] for e in got["events"]]
    got = get_json(b.port, "/history?channel=hx&since=%d" % more[-2])
    assert got == {"events": [{"id": more[-1], "event": None, "data": "event 249"}], "complete": True}
