"""NATS JetStream as the broker's second engine (issue 33 item 3,
docs/broker.md "NATS JetStream").

A three-node JetStream cluster (three nats-server processes of Debian's,
routed to each other, stores under a temporary directory) started once for
the module; each test keeps to a broker prefix of its own (a stream of its
own) but the failover test, which uses the default one. Two m0serve "hosts"
(two workers each) on nats://: a publish from a view, from a plain Python
process (m0pub with M0_BROKER) and from `m0serve publish` reaches every
held stream with one id, the stream's sequence; keyed retries append once;
one node killed (kill -9: the stream's leader) and another restarted under
a publish loop from both hosts and from m0pub: every acknowledged event
once, in order, on every stream; a client resumes on the other host after
every m0serve restarted; m0-gap when the history was trimmed; GRIP control,
the publish socket and grants on NATS; the client protocol's reader of
m0pub fed hostile bytes.
"""

import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from brokerload import (Collector, HealthWatch, ProcessPublisher, ViewPublisher, assert_acked_once_in_order,
                        count_acked, health, more_acked, stop_publishers, wait_health)
from natsproc import NatsCluster, api, wait_for
from rawhttp import request
from serverproc import BINARY, REPO
from sse import SSEStream, hold_each_worker

PYDIR = REPO / "python"
EVENT_TIMEOUT = 20.0

sys.path.insert(0, str(PYDIR))
import m0pub  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("nats-server") is None, reason="nats-server is not installed (make deps)")


@pytest.fixture(scope="module")
def cluster():
    tmp = tempfile.mkdtemp(prefix="m0nats.")
    c = NatsCluster(tmp, nodes=3).start()
    yield c
    c.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def host(start_server, url, *args, prefix=None, workers=2, env=None):
    extra = ["--broker-prefix", prefix] if prefix else []
    e = {"M0_LOG_LEVEL": os.environ.get("M0_TEST_LOG_LEVEL", "info")}
    e.update(env or {})
    return start_server("broker_app:application", "--realtime", "--broker", url, "--heartbeat", "0.5", *extra,
                        *args, workers=workers, env=e)


def open_stream(port, channel, last=None):
    s = SSEStream(port, "/events?channel=%s" % channel, timeout=EVENT_TIMEOUT,
                  headers=[("Last-Event-ID", str(last))] if last is not None else [])
    assert s.status == 200
    s.next()
    return s


def view_publish(port, channel, data, n=1, key=None):
    q = "/publish?n=%d&channel=%s&data=%s" % (n, channel, data) + ("&key=%s" % key if key else "")
    r = request(port, "GET", q)
    assert r.status == 200, r.body
    return [int(x) for x in r.body.decode().split(",")]


def publisher_env(url, prefix=None, **extra):
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": url}
    if prefix:
        env["M0_BROKER_PREFIX"] = prefix
    env.update(extra)
    return env


def python_publish(env, channel, data, key=None, event=None):
    code = ("import m0pub, sys; print(m0pub.publish(sys.argv[1], sys.argv[2], event=sys.argv[3] or None, "
            "key=sys.argv[4] or None))")
    p = subprocess.run([sys.executable, "-c", code, channel, data, event or "", key or ""], env=env,
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout.strip(), p.stderr


def shell_publish(env, *args):
    p = subprocess.run([BINARY, "publish", *args], env=env, capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout.strip(), p.stderr


def stream_info(cluster, stream, subjects=None):
    body = json.dumps({"subjects_filter": subjects}).encode() if subjects else b""
    for i in cluster.live():
        r = api(cluster.ports[i], "$JS.API.STREAM.INFO." + stream, body)
        if r is not None:
            return json.loads(r)
    raise AssertionError("no node answered")


def expect_everywhere(streams, eid, data, event="message"):
    for s in streams:
        ev = s.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.event, ev.data) == (eid, event, data)


# ------------------------------------------------------------------- basics

def test_one_publish_reaches_both_hosts_with_one_id_from_every_publisher(start_server, cluster):
    prefix = "t1:"
    a = host(start_server, cluster.url, prefix=prefix)
    b = host(start_server, cluster.url, "--metrics-bind", "127.0.0.1:0", prefix=prefix)
    for x in (a, b):
        h = wait_health(x.port, lambda h: h["broker"]["connected"])["broker"]
        assert h["engine"] == "nats" and h["stream"] == "t1-events" and h["replicas"] == 3
        assert h["primary"] in ("n1", "n2", "n3") and h["url"] == cluster.url
    # A channel name with the characters a subject cannot carry.
    channel = "user:42/a.b*>%x y"
    from urllib.parse import quote
    q = quote(channel, safe="")
    streams = hold_each_worker(a.port, q, timeout=EVENT_TIMEOUT) + hold_each_worker(b.port, q, timeout=EVENT_TIMEOUT)
    [first] = view_publish(a.port, q, "from-A")
    expect_everywhere(streams, first, "from-A")
    env = publisher_env(cluster.url, prefix)
    rc, out, err = python_publish(env, channel, "from cron\nline 2", event="cron")
    assert rc == 0, err
    second = int(out)
    expect_everywhere(streams, second, "from cron\nline 2", "cron")
    rc, out, err = shell_publish(env, channel, "from shell", "--event", "sh")
    assert rc == 0, err
    third = int(out)
    expect_everywhere(streams, third, "from shell", "sh")
    assert first < second < third
    # The stream: R3 over the cluster, one subject per channel, its name escaped (natsjs.h).
    info = stream_info(cluster, "t1-events", "t1.>")
    assert info["config"]["subjects"] == ["t1.>"] and info["config"]["num_replicas"] == 3
    assert info["config"]["max_msgs_per_subject"] == 1000 and info["config"]["duplicate_window"] == 300 * 10 ** 9
    assert info["state"]["last_seq"] == third
    assert info["state"]["subjects"] == {"t1.user%3A42%2Fa%2Eb%2A%3E%25x%20y": 3}
    assert m0pub._nats_token(channel.encode()) == b"user%3A42%2Fa%2Eb%2A%3E%25x%20y"
    h = health(b.port)["broker"]
    assert h["last_id"] >= third and h["primary"] == info["cluster"]["leader"]
    mport = int(b.stderr.wait_for(re.compile(r"metrics at http://127\.0\.0\.1:(\d+)/"), 10).group(1))
    body = request(mport, "GET", "/metrics").body.decode()
    assert 'm0serve_broker_info{engine="nats",primary="%s"} 1' % h["primary"] in body, body[-800:]
    for s in streams:
        s.close()


def test_keyed_retries_append_once_whoever_publishes(start_server, cluster):
    prefix = "t2:"
    a = host(start_server, cluster.url, prefix=prefix, workers=1)
    s = open_stream(a.port, "keys")
    env = publisher_env(cluster.url, prefix)
    [first] = view_publish(a.port, "keys", "once", key="order-42")
    assert view_publish(a.port, "keys", "once", key="order-42") == [first]
    rc, out, err = python_publish(env, "keys", "once", key="order-42")
    assert rc == 0 and int(out) == first, err
    rc, out, err = shell_publish(env, "keys", "once", "--key", "order-42")
    assert rc == 0 and int(out) == first, err
    # A key with spaces and '%' is one Nats-Msg-Id, not another key's.
    rc, out, err = python_publish(env, "keys", "odd", key="a b%20")
    assert rc == 0, err
    odd = int(out)
    rc, out2, err = shell_publish(env, "keys", "odd", "--key", "a b%20")
    assert rc == 0 and int(out2) == odd, err
    rc, out3, err = shell_publish(env, "keys", "other", "--key", "a%20b%20")
    assert rc == 0 and int(out3) > odd, err
    assert stream_info(cluster, "t2-events")["state"]["messages"] == 3
    got = [s.next_event(EVENT_TIMEOUT) for _ in range(3)]
    assert [(e.id, e.data) for e in got] == [(first, "once"), (odd, "odd"), (int(out3), "other")]
    s.close()


def test_resume_beyond_retention_is_a_gap(start_server, cluster):
    prefix = "t3:"
    a = host(start_server, cluster.url, "--broker-retention", "3", prefix=prefix, workers=1)
    [i1] = view_publish(a.port, "tiny", "one")
    missed = view_publish(a.port, "tiny", "x", n=5)
    c = host(start_server, cluster.url, "--broker-retention", "3", prefix=prefix, workers=1)
    r = open_stream(c.port, "tiny", last=i1)             # c's journal starts after: the stream answers
    gap = r.next_event(EVENT_TIMEOUT)
    assert gap.event == "m0-gap" and json.loads(gap.data) == {"last_event_id": i1, "replay_from": missed[-3]}
    assert [r.next_event(EVENT_TIMEOUT).id for _ in range(3)] == missed[-3:]
    # Within the history: no gap, exactly what was missed.
    r2 = open_stream(c.port, "tiny", last=missed[-3])
    assert [(e.id, e.event) for e in (r2.next_event(EVENT_TIMEOUT) for _ in range(2))] == \
        [(missed[-2], "message"), (missed[-1], "message")]
    # An id the stream never issued: resync, then live.
    r3 = open_stream(c.port, "tiny", last=2 ** 62)
    ev = r3.next_event(EVENT_TIMEOUT)
    assert ev.event == "m0-gap" and json.loads(ev.data) == {"last_event_id": None}
    [live] = view_publish(a.port, "tiny", "live")
    for x in (r, r2, r3):
        assert x.next_event(EVENT_TIMEOUT).id == live
        x.close()
    assert health(c.port)["broker"]["resumes"] >= 1


# ------------------------------------------------------ losing a machine

def test_a_node_killed_and_another_restarted_every_acknowledged_event_once_in_order(start_server, cluster,
                                                                                     tmp_path):
    c = cluster
    stream = "m0-events"
    # A channel's history (--broker-retention) covers what is published on
    # it while a reader follows the election (a few seconds at this test's
    # rate): beyond it the reader's streams get m0-gap, as
    # test_resume_beyond_retention_is_a_gap shows.
    a = host(start_server, c.url, "--broker-retention", "50000")
    b = host(start_server, c.url, "--broker-retention", "50000")
    for x in (a, b):
        wait_health(x.port, lambda h: h["status"] == "ok" and h["broker"]["connected"])
    channel = "fo"
    streams = [Collector(st) for st in hold_each_worker(a.port, channel, timeout=EVENT_TIMEOUT) +
                                       hold_each_worker(b.port, channel, timeout=EVENT_TIMEOUT)]
    watches = [HealthWatch(a.port), HealthWatch(b.port)]
    run = "r%d" % (time.time_ns() % 10 ** 9)       # keys of this run only (the window is five minutes)
    pubs = [ViewPublisher(a.port, run + "-A", channel), ViewPublisher(b.port, run + "-B", channel)]
    for t in streams + watches + pubs:
        t.start()
    proc = ProcessPublisher(c.url, run + "-P", channel, str(tmp_path), timeout=90, M0_BROKER_RETENTION="50000")
    killed = c.leader(stream)
    restarted = (killed + 1) % 3
    marks = {}
    try:
        wait_for(lambda: count_acked(pubs) >= 30, 30, "publishes before the fault")
        marks["kill"] = time.monotonic()
        c.kill(killed)                             # the stream's leader: an election follows
        more_acked(pubs, 20, 40, "publishes after the kill")
        marks["restart"] = time.monotonic()
        c.restart(restarted)                       # one node left meanwhile: no quorum until it is back
        more_acked(pubs, 20, 40, "publishes after the restart")
        marks["back"] = time.monotonic()
        c.start_node(killed)
        more_acked(pubs, 10, 40, "publishes with every node back")
    finally:
        stop_publishers(pubs, proc)
    everyone = pubs + [proc]
    ids, unknown = assert_acked_once_in_order(everyone, streams)
    for x in (a, b):
        wait_health(x.port, lambda h: h["status"] == "ok" and h["broker"]["connected"])
    for w in watches:
        w.stop()
        assert any(st == "degraded" and marks["kill"] <= t for t, st, _ in w.seen), w.seen[-5:]

    def gap(t0, t1):
        """The longest time the first stream went without an event in [t0, t1]."""
        times = [t for t, _ in streams[0].events if t0 <= t <= t1] + [t1]
        return max((b2 - a2 for a2, b2 in zip([t0] + times, times)), default=0.0)
    print("\nNATS R3: %d events acknowledged (%d with an unknown outcome first, %d refusals retried); longest "
          "time without delivery: %.2f s after kill -9 of the leader n%d, %.2f s while n%d restarted with n%d "
          "still down (no quorum)" % (len(ids), len(unknown), sum(p.refused for p in everyone),
                                      gap(marks["kill"], marks["restart"]), killed + 1,
                                      gap(marks["restart"], marks["back"]), restarted + 1, killed + 1))
    wait_for(lambda: c.stream(stream)["cluster"].get("leader") and
             all(r["current"] for r in c.stream(stream)["cluster"]["replicas"]), 30, "every replica current again")

    # Every m0serve restarts; a client resumes on the other host.
    last = max(ids)
    a.stop()
    b.stop()
    env = publisher_env(c.url, M0_BROKER_RETENTION="50000")
    missed = []
    for k in range(3):
        rc, out, err = python_publish(env, channel, "while-down-%d" % k)
        assert rc == 0, err
        missed.append(int(out))
    a2 = host(start_server, c.url, "--broker-retention", "50000")
    b2 = host(start_server, c.url, "--broker-retention", "50000")
    r = open_stream(b2.port, channel, last=last)
    got = [r.next_event(EVENT_TIMEOUT) for _ in range(3)]
    assert [(e.id, e.event, e.data) for e in got] == [(i, "message", "while-down-%d" % k) for k, i in enumerate(missed)]
    [live] = view_publish(a2.port, channel, "after")
    ev = r.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (live, "after")
    r.close()


# ------------------------------------------------ every publisher, every way

def test_grip_control_on_nats(start_server, cluster, tmp_path):
    from test_grip import BEARER, Stream, _post, item, key_file    # skips when the GRIP packages are missing
    from serverproc import free_port
    prefix = "t5:"
    # GRIP: a publish to host A's control port reaches host B's GRIP holds.
    hosts = []
    for _ in range(2):
        cport = free_port()
        srv = start_server("grip_asgi:app", "--grip-key-file", str(key_file(tmp_path)), "--grip-control",
                           "127.0.0.1:%d" % cport, "--broker", cluster.url, "--broker-prefix", prefix, workers=1)
        srv.cport = cport
        hosts.append(srv)
    ga, gb = hosts
    s = Stream(gb.port, "/st?ch=gst")
    try:
        s.read_until("asgi head\n")
        assert _post(ga.cport, item("gst", "i1\n", "i2\n"), BEARER) == (200, b"Published\n")
        s.read_until(b"asgi head\ni1\ni2\n")
    finally:
        s.close()
    assert stream_info(cluster, "t5-events")["state"]["messages"] == 2


def test_publish_socket_and_grants_on_nats(start_server, cluster, tmp_path):
    prefix = "t6:"
    # The publish socket: a server with --broker nats:// publishes through it.
    rundir = tempfile.mkdtemp(prefix="m0run.")
    try:
        path = os.path.join(rundir, "pub.sock")
        srv = host(start_server, cluster.url, "--publish-socket", path, prefix=prefix, workers=1,
                   env={"XDG_RUNTIME_DIR": rundir})
        st = open_stream(srv.port, "sock")
        env = {"PATH": os.environ.get("PATH", ""), "M0_PUBLISH_SOCKET": path}
        rc, out, err = shell_publish(env, "sock", "via socket", "--key", "k-sock")
        assert rc == 0, err
        ev = st.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.data) == (int(out), "via socket")
        rc, out2, err = python_publish(dict(env, PYTHONPATH=str(PYDIR)), "sock", "via socket", key="k-sock")
        assert rc == 0 and out2 == out, err        # the key travels: one event
        st.close()
    finally:
        shutil.rmtree(rundir, ignore_errors=True)
    # Grants: a stream held on a grant, fed through NATS.
    keys = tmp_path / "grant.keys"
    keys.write_text("k1 %s\n" % ("s" * 40))
    keys.chmod(0o600)
    g = start_server("grant_app:application", "--realtime", "--grant-key-file", str(keys), "--grant-path", "/rt",
                     "--broker", cluster.url, "--broker-prefix", prefix, workers=1)
    token = m0pub.grant(["granted"], key_file=str(keys))
    gs = SSEStream(g.port, "/rt/sse?token=" + token, timeout=EVENT_TIMEOUT)
    assert gs.status == 200
    wait_for(lambda: health(g.port)["held_streams"] == 1, 10, "the granted stream held")
    rc, out, err = python_publish(publisher_env(cluster.url, prefix), "granted", "to the grant")
    assert rc == 0, err
    ev = gs.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (int(out), "to the grant")
    gs.close()


# ------------------------------------------------------------ when it fails

def test_unreachable_servers_are_said_so_and_flags_are_checked(start_server, tmp_path):
    dead = "nats://127.0.0.1:1,127.0.0.1:2"
    a = host(start_server, dead, workers=1)
    h = wait_health(a.port, lambda h: "unreachable" in h["broker"]["last_error"], workers=1)
    assert h["status"] == "degraded" and h["broker"]["connected"] is False and h["broker"]["engine"] == "nats"
    assert request(a.port, "GET", "/").status == 200     # serves meanwhile
    rc, _, err = shell_publish(publisher_env(dead), "news", "x")
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "unreachable" in err, err
    rc, _, err = python_publish(publisher_env(dead), "news", "x")
    assert rc != 0 and "m0pub.BrokerError" in err and "unreachable" in err
    r = request(a.port, "GET", "/publish?channel=news&data=x")
    assert r.status == 503 and r.body.startswith(b"BrokerError:") and b"unreachable" in r.body

    def run(*args):
        p = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=20)
        return p.returncode, p.stderr.strip().splitlines()
    for args, flag in [(("--broker", "nats://h:4222/0"), "--broker"),
                       (("--broker", "redis://h", "--broker-replicas", "3"), "--broker-replicas"),
                       (("--broker", "nats://h", "--broker-min-replicas", "1"), "--broker-min-replicas"),
                       (("--broker", "nats://h", "--broker-replicas", "7"), "--broker-replicas"),
                       (("--broker", "nats://h", "--broker-ca-certs", "/x"), "--broker-ca-certs"),
                       (("--broker", "nats://h", "--presence-events", "room"), "--presence-events")]:
        rc, err = run("app:app", *args)
        assert rc == 2 and len(err) == 1 and flag in err[0], (args, err)
    rc, err = run("publish", "news", "x", "--broker", "nats://h:1/x")
    assert rc == 2 and len(err) == 1 and "--broker" in err[0]
    with pytest.raises(ValueError):
        m0pub.parse_broker_url("nats://h:4222/0")
    cfg = m0pub.parse_broker_url("nats://u:p@h1,[::1]:5000")
    assert (cfg["engine"], cfg["hosts"], cfg["username"], cfg["shown"]) == \
        ("nats", [("h1", 4222), ("::1", 5000)], "u", "nats://u:***@h1:4222,[::1]:5000")


def test_one_server_without_clustering_gets_a_stream_of_one_replica(start_server, tmp_path):
    single = NatsCluster(tmp_path, nodes=1).start()
    try:
        a = host(start_server, single.url, workers=1)
        h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)["broker"]
        assert h["replicas"] == 1 and h["primary"] != ""
        assert "not clustered" in a.stderr.text()
        s = open_stream(a.port, "solo")
        rc, out, err = python_publish(publisher_env(single.url), "solo", "alone")
        assert rc == 0, err
        ev = s.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.data) == (int(out), "alone")
        # R3 asked for explicitly on one server: refused, said so.
        rc, _, err = shell_publish(publisher_env(single.url, "r3x:", M0_BROKER_REPLICAS="3"), "solo", "x")
        assert rc == 1 and "could not be made" in err, err
        rc, _, err = python_publish(publisher_env(single.url, "r3x:", M0_BROKER_REPLICAS="3"), "solo", "x")
        assert rc != 0 and "m0pub.BrokerError" in err and "could not be made" in err, err
        # A server that takes the event and does not answer (paused): the
        # outcome is unknown; the retry with the key, once it answers,
        # gives the event's one id.
        os.environ["M0_BROKER"] = single.url
        try:
            warm = m0pub.publish("solo", "warm")        # this thread's connection, made
            single.pause(0)
            try:
                with pytest.raises(m0pub.PublishOutcomeUnknown):
                    m0pub.publish("solo", "maybe", key="solo-python")
                r = request(a.port, "GET", "/publish?channel=solo&data=maybe&key=solo-view", timeout=20)
                assert r.status == 503 and r.body.startswith(b"PublishOutcomeUnknown:"), r.body
            finally:
                single.resume(0)
            # Both reached the stream when it ran again: each retry answers its first id.
            py = m0pub.publish("solo", "maybe", key="solo-python")
            [view] = view_publish(a.port, "solo", "maybe", key="solo-view")
            assert {py, view} == {warm + 1, warm + 2}
            assert m0pub.publish("solo", "maybe", key="solo-python") == py
        finally:
            os.environ.pop("M0_BROKER", None)
        got = [s.next_event(EVENT_TIMEOUT) for _ in range(3)]
        assert [(e.data, e.id) for e in got] == [("warm", warm), ("maybe", warm + 1), ("maybe", warm + 2)]
        s.close()
    finally:
        single.stop()


# ------------------------------------------------ a hostile server (m0pub)

def test_m0pub_reads_any_bytes_from_a_server_without_hanging_or_crashing():
    """The client protocol's reader m0pub speaks NATS with: fed valid
    server traffic cut anywhere, random bytes, and mutations of valid
    traffic, it gives operations or raises _NatsProtocolError, never
    another exception, and holds at most a bounded buffer."""
    valid = (b'INFO {"server_id":"x","headers":true,"max_payload":1048576}\r\n+OK\r\nPING\r\nPONG\r\n'
             b"MSG _INBOX.a.1 1 22\r\n{\"stream\":\"s\",\"seq\":1}\r\n"
             b"HMSG _INBOX.a.2 1 16 16\r\nNATS/1.0 503\r\n\r\n\r\n"
             b"HMSG subj 9 reply.x 12 17\r\nNATS/1.0\r\n\r\nhello\r\n-ERR 'Permissions Violation'\r\n")
    r = m0pub._NatsReader()
    ops = []
    for i in range(len(valid)):
        r.feed(valid[i:i + 1])
        while True:
            op = r.next()
            if op is None:
                break
            ops.append(op[0])
    assert ops == ["INFO", "OK", "PING", "PONG", "MSG", "MSG", "MSG", "ERR"]
    assert m0pub._nats_status(b"NATS/1.0 503\r\n\r\n") == 503
    for bad in (b"x" * 70000,                              # a line past the limit
                b"MSG a 1 %d\r\n" % (m0pub._NATS_PAYLOAD_MAX + 1),   # a message past the limit
                b"HMSG a 1 9 5\r\nNATS/1.0\r\n\r\n\r\n",       # headers longer than the message
                b"MSG a 1 2\r\nhiXY",                     # no CRLF after the payload
                b"HMSG a 1 5 7\r\nHTTP/1hi\r\n",            # not a NATS header block
                b"MSG a 1 -2\r\n", b"MSG a\r\n", b"INFO []\r\n", b"HELLO\r\n"):
        r = m0pub._NatsReader()
        r.feed(bad)
        with pytest.raises(m0pub._NatsProtocolError):
            while r.next() is not None:
                pass
    rng = random.Random(33)
    pieces = [b"MSG ", b"HMSG ", b"INFO ", b"PING", b"+OK", b"-ERR ", b"\r\n", b" 1 ", b"99999999999", b"-1",
              b"{", b"}", b"NATS/1.0", b"x" * 70000]
    for case in range(3000):
        if case % 3 == 0:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
        elif case % 3 == 1:
            data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(12)))
        else:
            b = bytearray(valid)
            for _ in range(rng.randrange(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            data = bytes(b)
        r = m0pub._NatsReader()
        try:
            for k in range(0, len(data), 7):
                r.feed(data[k:k + 7])
                for _ in range(100):
                    op = r.next()
                    if op is None:
                        break
                    assert isinstance(op, tuple) and op[0] in ("INFO", "MSG", "PING", "PONG", "OK", "ERR")
            assert len(r.buf) <= len(data)
        except m0pub._NatsProtocolError:
            pass


def test_a_reader_that_fell_behind_the_history_tells_its_streams(start_server, cluster):
    """A worker stopped (SIGSTOP) while its channel's history moves on past
    --broker-retention: once it runs again, the ids it missed are no longer
    in the stream, and its live streams get m0-gap before the next events."""
    import signal
    prefix = "t8:"
    a = host(start_server, cluster.url, "--broker-retention", "5", "--outbox-limit", "32m", prefix=prefix,
             workers=1)
    s = open_stream(a.port, "behind")
    os.environ.update({"M0_BROKER": cluster.url, "M0_BROKER_PREFIX": prefix, "M0_BROKER_RETENTION": "5"})
    try:
        [first] = [m0pub.publish("behind", "first")]
        assert s.next_event(EVENT_TIMEOUT).id == first
        [worker] = a.worker_pids()
        os.kill(worker, signal.SIGSTOP)
        try:
            big = "x" * 50000                      # the consumer's flow control stops the pushes early
            ids = [m0pub.publish("behind", big) for _ in range(150)]
        finally:
            os.kill(worker, signal.SIGCONT)
    finally:
        for k in ("M0_BROKER", "M0_BROKER_PREFIX", "M0_BROKER_RETENTION"):
            os.environ.pop(k, None)
    got = []
    while not got or got[-1].id != ids[-1]:
        got.append(s.next_event(EVENT_TIMEOUT))
    # Delivered in id order; every id that did not arrive announced by an
    # m0-gap (a notice goes to the live streams at once, so it may come
    # before events of the pass still being fanned out); the channel's
    # history (its last 5 events) all there.
    seen = [e.id for e in got if e.event != "m0-gap"]
    gaps = [json.loads(e.data)["lost_through"] for e in got if e.event == "m0-gap"]
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert gaps, "no m0-gap"
    missing = sorted(set(ids) - set(seen))
    assert missing and missing[-1] <= max(gaps), (missing[-5:], gaps)
    assert set(ids[-5:]) <= set(seen)
    assert health(a.port)["broker"]["gaps"] == len(gaps)
    s.close()
