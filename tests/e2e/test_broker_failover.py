"""A broker that survives losing a machine (issue 33, docs/broker.md):
Redis Sentinel failover and TLS to Redis.

Sentinel: a primary, two replicas and three sentinels (Debian's redis-server
and redis-sentinel, down-after 1 s) and two m0serve "hosts" (two workers
each) on redis+sentinel://; streams held on every worker of both; events
published in a loop from both hosts' views and from a plain Python process
(m0pub with M0_BROKER), each with a key of its own and retried with that
key until it is acknowledged, while the primary is killed (kill -9), and
again while it is paused (SIGSTOP) until the sentinels fail it over. After
the failover every stream has every acknowledged event exactly once, in id
order, no id twice, no m0-gap; /health said degraded during the failover
and is clear after it. The gap (the longest time with no delivery) is
printed.

TLS: a redis-server with tls-port only and a CA the test makes with the
openssl CLI: rediss:// end to end (a view, m0pub, `m0serve publish`, a held
stream); a wrong CA and an expired certificate refused with one line; a
client certificate; SIGSTOP/SIGCONT over TLS as over TCP.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from brokerload import (Collector, HealthWatch, ProcessPublisher, ViewPublisher, assert_acked_once_in_order,
                        count_acked, health, more_acked, stop_publishers, wait_health)
from rawhttp import request
from redisproc import Redis, SentinelSet, TLSRedis, make_certs, wait_for
from serverproc import BINARY, REPO
from sse import SSEStream, hold_each_worker

PYDIR = REPO / "python"
EVENT_TIMEOUT = 20.0


def host(start_server, url, *args, workers=2):
    return start_server("broker_app:application", "--realtime", "--broker", url, "--heartbeat", "0.5",
                        *args, workers=workers, env={"M0_LOG_LEVEL": os.environ.get("M0_TEST_LOG_LEVEL", "info")})


@pytest.fixture(scope="module")
def sentinels():
    tmp = tempfile.mkdtemp(prefix="m0sent.")
    s = SentinelSet(tmp).start()
    yield s
    s.stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("fault", ["kill", "pause"])
def test_failover_keeps_every_acknowledged_event_once_in_order(start_server, sentinels, fault, tmp_path):
    s = sentinels
    old = s.primary()
    s.wait_settled(old)
    a = host(start_server, s.url)
    b = host(start_server, s.url)
    for x in (a, b):
        h = wait_health(x.port, lambda h: h["status"] == "ok" and h["broker"]["connected"])
        assert h["broker"]["engine"] == "redis" and h["broker"]["mode"] == "sentinel"
        assert h["broker"]["primary"] == "127.0.0.1:%d" % old and h["broker"]["min_replicas"] == 1
        assert h["broker"]["reading_from"] != h["broker"]["primary"]      # a replica: only what a failover keeps
    channel = "fo-" + fault
    streams = [Collector(st) for st in hold_each_worker(a.port, channel, timeout=EVENT_TIMEOUT) +
                                       hold_each_worker(b.port, channel, timeout=EVENT_TIMEOUT)]
    watches = [HealthWatch(a.port), HealthWatch(b.port)]
    # Keys of this run only: the broker remembers a key for five minutes.
    run = "%s%d" % (fault, time.time_ns() % 10 ** 9)
    pubs = [ViewPublisher(a.port, run + "-A", channel), ViewPublisher(b.port, run + "-B", channel)]
    for t in streams + watches + pubs:
        t.start()
    proc = ProcessPublisher(s.url, run + "-P", channel, str(tmp_path))
    try:
        wait_for(lambda: count_acked(pubs) >= 30, 30, "publishes before the fault")
        fault_at = time.monotonic()
        if fault == "kill":
            s.kill(old)
        else:
            s.pause(old)
        new = s.wait_failover(old, 30)
        switched_at = time.monotonic()
        if fault == "pause":
            s.resume(old)            # it comes back as a primary nobody follows, and is made a replica
        more_acked(pubs, 20, 30, "publishes after the failover")
    finally:
        stop_publishers(pubs, proc)
    everyone = pubs + [proc]
    ids, unknown = assert_acked_once_in_order(everyone, streams)
    # /health: degraded during the failover, clear after it (on every worker).
    for x in (a, b):
        wait_health(x.port, lambda h: h["status"] == "ok" and h["broker"]["primary"] == "127.0.0.1:%d" % new)
    for w in watches:
        w.stop()
        assert any(st == "degraded" and fault_at <= t for t, st, _ in w.seen), w.seen[-5:]
    # The gap: the longest time one stream went without an event around the fault.
    times = [t for t, _ in streams[0].events if fault_at - 2 <= t]
    gap = max((b2 - a2 for a2, b2 in zip(times, times[1:])), default=0.0)
    print("\nfailover (%s): sentinels switched after %.2f s; longest time without delivery %.2f s; %d events "
          "acknowledged (%d with an unknown outcome first, %d refusals retried)"
          % (fault, switched_at - fault_at, gap, len(ids), len(unknown), sum(p.refused for p in everyone)))
    if fault == "pause":
        assert unknown, "no publish was in flight while the primary was paused"
    # Put the set back for the next run: the old primary as a replica of the new one.
    if fault == "kill":
        s.restart_as_replica(old, new)
    s.wait_settled(new, 30)


def test_sentinel_urls_and_health_name_the_engine(start_server, sentinels):
    s = sentinels
    primary = s.primary()
    a = host(start_server, s.url, "--broker-min-replicas", "0", workers=1)
    h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)["broker"]
    # With no replicas asked for, the reader reads the primary.
    assert h["min_replicas"] == 0 and h["reading_from"] == h["primary"] == "127.0.0.1:%d" % primary
    assert h["url"].startswith("redis+sentinel://127.0.0.1:") and h["sentinel"] == "up"
    st = SSEStream(a.port, "/events?channel=names", timeout=EVENT_TIMEOUT)
    st.next()
    rc = subprocess.run([BINARY, "publish", "names", "from the shell", "--broker", s.url], capture_output=True,
                        text=True, timeout=20)
    assert rc.returncode == 0, rc.stderr
    ev = st.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (int(rc.stdout), "from the shell")
    st.close()
    # An unknown master name: the server serves, degraded, and says why.
    bad = host(start_server, s.url.rsplit("/", 1)[0] + "/nosuch", workers=1)
    h = wait_health(bad.port, lambda h: "does not know master nosuch" in h["broker"]["last_error"], workers=1)
    assert h["status"] == "degraded"
    rc = subprocess.run([BINARY, "publish", "names", "x", "--broker", s.url.rsplit("/", 1)[0] + "/nosuch"],
                        capture_output=True, text=True, timeout=20)
    assert rc.returncode == 1 and len(rc.stderr.strip().splitlines()) == 1 and "does not know master" in rc.stderr


def test_metrics_name_the_engine_and_primary(start_server, sentinels):
    a = start_server("broker_app:application", "--realtime", "--broker", sentinels.url, "--metrics-bind",
                     "127.0.0.1:0", workers=1)
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    port = int(a.stderr.wait_for(re.compile(r"metrics at http://127\.0\.0\.1:(\d+)/"), 10).group(1))
    body = request(port, "GET", "/metrics").body.decode()
    assert 'm0serve_broker_info{engine="redis",primary="127.0.0.1:%d"} 1' % sentinels.primary() in body, body[-800:]


def test_a_publish_is_acknowledged_once_a_replica_has_it(sentinels):
    """--broker-min-replicas 1 (Sentinel's default): with every replica
    paused the event reaches the primary, WAIT counts none, and the publisher
    hears PublishOutcomeUnknown (exit 3), not an id; once a replica is back
    the retry with the key answers the same event's id, appending nothing."""
    s = sentinels
    primary = s.primary()
    s.wait_settled(primary)
    replicas = [p for p in s.ports if p != primary and s.alive(p)]
    for p in replicas:
        s.pause(p)
    try:
        c = subprocess.run([BINARY, "publish", "waited", "x", "--key", "w-shell", "--broker", s.url],
                           capture_output=True, text=True, timeout=20)
        assert c.returncode == 3 and "WAIT counted 0 of 1 replicas" in c.stderr, c.stderr
        p = subprocess.run([sys.executable, "-c", "import m0pub; m0pub.publish('waited', 'y', key='w-python')"],
                           env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": s.url},
                           capture_output=True, text=True, timeout=20)
        assert p.returncode != 0 and "m0pub.PublishOutcomeUnknown" in p.stderr and "WAIT counted 0 of 1" in p.stderr
    finally:
        for r in replicas:
            s.resume(r)
    before = s.ask(primary, "XLEN", "m0:log")
    wait_for(lambda: all(s.linked(r) for r in replicas), 20, "the replicas linked again")
    c = subprocess.run([BINARY, "publish", "waited", "x", "--key", "w-shell", "--broker", s.url],
                       capture_output=True, text=True, timeout=20)
    assert c.returncode == 0, c.stderr
    assert s.ask(primary, "XLEN", "m0:log") == before                  # the retry appended nothing
    assert s.ask(primary, "GET", "m0:key:w-shell") == c.stdout.strip().encode()
    s.wait_settled(primary, 30)


# ------------------------------------------------------- presence (issue 32)

PRESENCE_READ = ("import json, sys, m0pub; ch = sys.argv[1]; "
                 "print(json.dumps([m0pub.channel_info(ch)['connections'], m0pub.presence(ch)]))")


def broker_presence(url, channel, **env):
    """[connections, {sub: n}] of channel as Redis alone has them (m0pub in
    a plain process with M0_BROKER: every host's live part); None when the
    read failed (mid-failover)."""
    e = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": url, **env}
    p = subprocess.run([sys.executable, "-c", PRESENCE_READ, channel], env=e, capture_output=True, text=True,
                       timeout=30)
    return json.loads(p.stdout) if p.returncode == 0 else None


def presence_stream(port, channel, sub):
    s = SSEStream(port, "/events?channel=%s&sub=%s" % (channel, sub), timeout=EVENT_TIMEOUT)
    assert s.status == 200
    s.next()
    return s


def test_presence_agent_follows_the_primary_after_a_failover(start_server, sentinels):
    """A worker's presence agent keeps its part in Redis through its own
    connection: when the primary is killed it dials again through the
    sentinels and pushes its part to the new primary (a sub that came
    after the failover is there, and the part stays live)."""
    s = sentinels
    old = s.primary()
    s.wait_settled(old)
    a = start_server("presence_app:application", "--realtime", "--broker", s.url, workers=1)
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    channel = "fo-presence"
    held = [presence_stream(a.port, channel, "alice")]
    wait_for(lambda: broker_presence(s.url, channel) == [1, {"alice": 1}], EVENT_TIMEOUT,
             "the part in Redis before the failover")
    try:
        s.kill(old)
        new = s.wait_failover(old, 30)
        held.append(presence_stream(a.port, channel, "bob"))
        # bob reached the new primary only if the agent followed it there.
        wait_for(lambda: broker_presence(s.url, channel) == [2, {"alice": 1, "bob": 1}], 30,
                 "the part on the new primary %d" % new)
        # In the server, the view's own reads (m0pub over Sentinel) answer too.
        r = request(a.port, "GET", "/presence?channel=%s" % channel)
        assert r.status == 200 and json.loads(r.body) == {"alice": 1, "bob": 1}, r.body
        # The part stays live there: heartbeats go to the new primary.
        def live_until():
            got = s.ask(new, "ZRANGE", "m0:pr:live", "0", "-1", "WITHSCORES")
            return max((int(v) for v in got[1::2]), default=0)
        first = live_until()
        wait_for(lambda: live_until() > first, 10, "a heartbeat on the new primary")
    finally:
        for x in held:
            x.close()
    s.restart_as_replica(old, new)
    s.wait_settled(new, 30)


def prefixed_publish(url, prefix, channel, data):
    """`m0serve publish` under a key prefix of the test's own: the id."""
    c = subprocess.run([BINARY, "publish", channel, data, "--broker", url, "--broker-prefix", prefix],
                       capture_output=True, text=True, timeout=20)
    assert c.returncode == 0, c.stderr
    return int(c.stdout)


def wait_listed(s, primary):
    """Every sentinel lists every live replica as usable (no "disconnected"
    flag, linked): a worker takes its list of replicas once, when it boots,
    and a replica whose connections were just killed (move_reader) is
    flagged disconnected for a moment and left out of it."""
    live = {p for p in s.ports if p != primary and s.alive(p)}

    def listed():
        for sp in s.sentinel_ports:
            usable = set()
            for r in s.ask(sp, "SENTINEL", "replicas", s.master):
                d = dict(zip(r[::2], r[1::2]))
                if d.get(b"flags") == b"slave" and d.get(b"master-link-status") == b"ok":
                    usable.add(int(d[b"port"]))
            if not live <= usable:
                return False
        return True
    wait_for(listed, EVENT_TIMEOUT, "every sentinel lists every replica as usable", interval=0.1)


def move_reader(port, s, to):
    """Drop the broker connections of the one worker at port (CLIENT KILL
    TYPE normal on the node its reader reads, as Sentinel does to the
    replica it promotes) until its reader is back, reading replica `to`;
    the /health broker object then."""
    want = "127.0.0.1:%d" % to
    seen = {"reconnects": health(port)["broker"]["reconnects"]}

    def there():
        b = health(port)["broker"]
        if not b["connected"]:
            return None
        if b["reading_from"] == want and b["reconnects"] > seen["reconnects"]:
            return b
        if b["reading_from"] != want or b["reconnects"] == seen["reconnects"]:
            seen["reconnects"] = b["reconnects"]
            s.ask(int(b["reading_from"].rsplit(":", 1)[1]), "CLIENT", "KILL", "TYPE", "normal")
        return None
    return wait_for(there, EVENT_TIMEOUT, "the reader back on %s" % want)


def test_a_reader_back_on_a_replica_that_lags_reports_no_gap(start_server, sentinels):
    """The flaky failover's case, made deterministic: a worker's reader read
    events on one replica and comes back (its connection dropped, as when
    Sentinel promotes that replica) on another that has not applied them
    yet — here its replication is held with CLIENT PAUSE WRITE: it answers,
    ROLE says it follows the primary, linked, and its counter is below the
    reader's position. That is a replica that lags, not a loss: the reader
    waits for the events it re-reads, finds them the same, and goes on.
    The stream gets every event once, in order, and no m0-gap."""
    s = sentinels
    primary = s.primary()
    s.wait_settled(primary)
    wait_listed(s, primary)
    r1, r2 = [p for p in s.ports if p != primary and s.alive(p)]
    a = host(start_server, s.url, "--broker-prefix", "lag:", workers=1)
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    move_reader(a.port, s, r1)
    st = SSEStream(a.port, "/events?channel=lag", timeout=EVENT_TIMEOUT)
    st.next()
    sent = [(prefixed_publish(s.url, "lag:", "lag", "before %d" % i), "before %d" % i) for i in range(3)]
    s.ask(r2, "CLIENT", "PAUSE", "60000", "WRITE")       # r2 receives, applies nothing
    try:
        sent += [(prefixed_publish(s.url, "lag:", "lag", "held %d" % i), "held %d" % i) for i in range(5)]
        got = [st.next_event(EVENT_TIMEOUT) for _ in sent]
        assert [(ev.id, ev.data) for ev in got] == sent                  # read on r1
        assert int(s.ask(r2, "GET", "lag:seq")) < sent[-1][0]            # r2 lags behind the reader
        b = move_reader(a.port, s, r2)
        assert b["gaps"] == 0, b
    finally:
        s.ask(r2, "CLIENT", "UNPAUSE")
    after = [(prefixed_publish(s.url, "lag:", "lag", "after %d" % i), "after %d" % i) for i in range(3)]
    got = [st.next_event(EVENT_TIMEOUT) for _ in after]
    assert [(ev.event, ev.id, ev.data) for ev in got] == [("message", i, d) for i, d in after]
    b = health(a.port)["broker"]
    assert b["gaps"] == 0 and b["reading_from"] == "127.0.0.1:%d" % r2, b
    assert "lost acknowledged events" not in a.stderr.text()
    st.close()


def test_a_reader_back_on_a_log_that_lost_what_it_read_reports_a_gap(start_server, sentinels):
    """The other side of that check: the node the reader comes back to holds
    other events under ids it had read — what a failover does when it
    promotes a replica that missed them (here the primary's log and counter
    are set back by hand, as that replica's would be, and the ids issued
    again). The live stream gets m0-gap through the reader's position, then
    the events after it."""
    s = sentinels
    primary = s.primary()
    s.wait_settled(primary)
    wait_listed(s, primary)
    r1 = [p for p in s.ports if p != primary and s.alive(p)][0]
    a = host(start_server, s.url, "--broker-prefix", "lost:", workers=1)
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    st = SSEStream(a.port, "/events?channel=lost", timeout=EVENT_TIMEOUT)
    st.next()
    sent = [(prefixed_publish(s.url, "lost:", "lost", "first %d" % i), "first %d" % i) for i in range(5)]
    assert [(ev.id, ev.data) for ev in (st.next_event(EVENT_TIMEOUT) for _ in sent)] == sent
    top = sent[-1][0]
    # The history of a replica promoted without the last three events.
    s.ask(primary, "DEL", "lost:log", "lost:ch:lost")
    s.ask(primary, "SET", "lost:seq", str(sent[1][0]))
    wait_for(lambda: s.ask(r1, "GET", "lost:seq") == str(sent[1][0]).encode(), EVENT_TIMEOUT, "r1 replicated")
    move_reader(a.port, s, r1)                  # the reader comes back (and re-reads)
    again = [(prefixed_publish(s.url, "lost:", "lost", "again %d" % i), "again %d" % i) for i in range(4)]
    assert [i for i, _ in again] == [i for i, _ in sent[2:]] + [top + 1]   # the ids issued again
    ev = st.next_event(EVENT_TIMEOUT)
    assert (ev.event, json.loads(ev.data)) == ("m0-gap", {"lost_through": top}), ev
    ev = st.next_event(EVENT_TIMEOUT)
    assert (ev.event, ev.id, ev.data) == ("message", top + 1, "again 3")
    assert health(a.port)["broker"]["gaps"] == 1
    st.close()


# ------------------------------------------------------------------------ TLS

@pytest.fixture(scope="module")
def certs():
    d = tempfile.mkdtemp(prefix="m0pki.")
    yield make_certs(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tls_redis(certs):
    tmp = tempfile.mkdtemp(prefix="m0tls.")
    r = TLSRedis(tmp, certs).start()
    yield r
    r.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def shell_publish(url, *args, env=None):
    e = dict(os.environ, **(env or {}))
    e.pop("M0_BROKER", None)
    return subprocess.run([BINARY, "publish", "news", "x", "--broker", url, *args], capture_output=True, text=True,
                          timeout=20, env=e)


def python_publish(url, data, key=None, **env):
    e = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": url, **env}
    code = "import m0pub, sys; print(m0pub.publish('news', sys.argv[1], key=sys.argv[2] or None))"
    return subprocess.run([sys.executable, "-c", code, data, key or ""], env=e, capture_output=True, text=True,
                          timeout=20)


def test_tls_presence_part(start_server, tls_redis, certs):
    """The presence agent's connection speaks TLS as the publisher's does:
    a worker's part reaches a rediss:// broker, and m0pub reads it back over
    TLS (in a plain process and from a view)."""
    ca = os.path.join(certs, "ca.pem")
    a = start_server("presence_app:application", "--realtime", "--broker", tls_redis.url, "--broker-ca-certs", ca,
                     workers=1)
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    st = presence_stream(a.port, "tls-room", "alice")
    try:
        wait_for(lambda: broker_presence(tls_redis.url, "tls-room", M0_BROKER_CA_CERTS=ca) == [1, {"alice": 1}],
                 EVENT_TIMEOUT, "the part in Redis over TLS")
        r = request(a.port, "GET", "/info?channel=tls-room")
        assert r.status == 200 and json.loads(r.body)["connections"] == 1, r.body
    finally:
        st.close()


def test_tls_end_to_end(start_server, tls_redis, certs):
    ca = os.path.join(certs, "ca.pem")
    a = host(start_server, tls_redis.url, "--broker-ca-certs", ca, workers=1)
    h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)["broker"]
    assert h["tls"] is True and h["url"].startswith("rediss://")
    s = SSEStream(a.port, "/events?channel=news", timeout=EVENT_TIMEOUT)
    s.next()
    r = request(a.port, "GET", "/publish?data=from-view")
    assert r.status == 200, r.body
    p = python_publish(tls_redis.url, "from-python", M0_BROKER_CA_CERTS=ca)
    assert p.returncode == 0, p.stderr
    c = shell_publish(tls_redis.url, "--broker-ca-certs", ca)
    assert c.returncode == 0, c.stderr
    got = [s.next_event(EVENT_TIMEOUT) for _ in range(3)]
    assert [e.id for e in got] == [int(r.body), int(p.stdout), int(c.stdout)]
    assert [e.data for e in got] == ["from-view", "from-python", "x"]
    s.close()


@pytest.mark.parametrize("case", ["wrong-ca", "expired"])
def test_tls_refused_with_one_line(start_server, certs, case):
    tmp = tempfile.mkdtemp(prefix="m0tls.")
    server = TLSRedis(tmp, certs, cert="expired" if case == "expired" else "server").start()
    try:
        ca = os.path.join(certs, "other-ca.pem" if case == "wrong-ca" else "ca.pem")
        why = "self-signed certificate in certificate chain" if case == "wrong-ca" else "certificate has expired"
        c = shell_publish(server.url, "--broker-ca-certs", ca)
        lines = c.stderr.strip().splitlines()
        assert c.returncode == 1 and len(lines) == 1 and "certificate verify failed: " + why in lines[0], c.stderr
        p = python_publish(server.url, "x", M0_BROKER_CA_CERTS=ca)
        assert p.returncode != 0 and ("m0pub.BrokerError: " in p.stderr and why in p.stderr), p.stderr
        a = host(start_server, server.url, "--broker-ca-certs", ca, workers=1)
        h = wait_health(a.port, lambda h: why in h["broker"]["last_error"], workers=1)
        assert h["status"] == "degraded"
        assert a.stderr.wait_for(re.compile(r"broker rediss://.* unreachable .*certificate verify failed: " + why), 10)
        # Logged once per connection (the reader's, the commands', the
        # presence agent's), not once per attempt.
        time.sleep(1.0)                  # a window in which the backoff retries, not a wait for an event
        n = [l for l in a.stderr.text().splitlines() if "certificate verify failed" in l]
        assert len(n) <= 3, n
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_tls_client_certificate(start_server, certs):
    tmp = tempfile.mkdtemp(prefix="m0tls.")
    server = TLSRedis(tmp, certs, auth_clients=True).start()
    try:
        ca = os.path.join(certs, "ca.pem")
        c = shell_publish(server.url, "--broker-ca-certs", ca)
        assert c.returncode == 1 and len(c.stderr.strip().splitlines()) == 1, c.stderr      # no certificate: refused
        assert "not published" in c.stderr or "unreachable" in c.stderr or "refused" in c.stderr, c.stderr
        c = shell_publish(server.url, "--broker-ca-certs", ca, "--broker-certfile", os.path.join(certs, "client.pem"),
                          "--broker-keyfile", os.path.join(certs, "client.key"))
        assert c.returncode == 0, c.stderr
        p = python_publish(server.url, "x", M0_BROKER_CA_CERTS=ca, M0_BROKER_CERTFILE=os.path.join(certs, "client.pem"),
                           M0_BROKER_KEYFILE=os.path.join(certs, "client.key"))
        assert p.returncode == 0, p.stderr
        a = host(start_server, server.url, "--broker-ca-certs", ca, "--broker-certfile",
                 os.path.join(certs, "client.pem"), "--broker-keyfile", os.path.join(certs, "client.key"), workers=1)
        wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_tls_sigstop_is_outcome_unknown_and_a_keyed_retry_publishes_once(start_server, tls_redis, certs):
    """Redis paused over TLS, as test_broker.py's item 2 over TCP: a publish
    sent on a kept connection has an unknown outcome; one that needs a new
    connection cannot finish its TLS handshake with a paused server and was
    not published (BrokerError, exit 1) -- nothing was sent. Either way the
    retry with the same key after SIGCONT publishes the event once, and the
    held stream (read over TLS) goes on."""
    ca = os.path.join(certs, "ca.pem")
    a = host(start_server, tls_redis.url, "--broker-ca-certs", ca, "--blocking-threads", "1", workers=1)
    wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)
    s = SSEStream(a.port, "/events?channel=news", timeout=EVENT_TIMEOUT)
    s.next()
    r = request(a.port, "GET", "/publish?data=warm")          # the one pool thread's connection, kept
    assert r.status == 200
    warm = int(r.body)
    assert s.next_event(EVENT_TIMEOUT).id == warm
    os.kill(tls_redis.proc.pid, signal.SIGSTOP)
    try:
        r = request(a.port, "GET", "/publish?data=from-view&key=t-view", timeout=30)
        assert r.status == 503 and r.body.startswith(b"PublishOutcomeUnknown:"), r.body
        assert b"may have been published" in r.body
        p = python_publish(tls_redis.url, "from-python", key="t-python", M0_BROKER_CA_CERTS=ca)
        assert p.returncode != 0 and "m0pub.BrokerError: " in p.stderr and "timed out" in p.stderr, p.stderr
        c = shell_publish(tls_redis.url, "--broker-ca-certs", ca, "--key", "t-shell")
        assert c.returncode == 1 and "TLS handshake timed out" in c.stderr, c.stderr
    finally:
        os.kill(tls_redis.proc.pid, signal.SIGCONT)
    r = request(a.port, "GET", "/publish?data=from-view&key=t-view")
    assert r.status == 200, r.body
    p = python_publish(tls_redis.url, "from-python", key="t-python", M0_BROKER_CA_CERTS=ca)
    assert p.returncode == 0, p.stderr
    c = shell_publish(tls_redis.url, "--broker-ca-certs", ca, "--key", "t-shell")
    assert c.returncode == 0, c.stderr
    ids = {int(r.body), int(p.stdout), int(c.stdout)}
    got = {}
    for _ in range(3):
        ev = s.next_event(EVENT_TIMEOUT)
        got[ev.id] = ev.data
    assert set(got) == ids and sorted(got.values()) == ["from-python", "from-view", "x"]
    r = request(a.port, "GET", "/publish?data=marker")
    ev = s.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (int(r.body), "marker")      # each event once: nothing in between
    assert tls_redis.command("XLEN", "m0:log") == 5         # warm, the three, marker
    s.close()


def test_tls_through_sentinel(start_server, certs):
    """rediss+sentinel://: the sentinels, the primary and its replica all
    speak TLS only; each node's certificate is checked against the address
    the sentinels give (127.0.0.1, an IP entry of the test certificate)."""
    tmp = tempfile.mkdtemp(prefix="m0tlss.")
    s = SentinelSet(tmp, replicas=1, sentinels=1, certs=certs).start()
    try:
        ca = os.path.join(certs, "ca.pem")
        a = host(start_server, s.url, "--broker-ca-certs", ca, workers=1)
        h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)["broker"]
        assert h["tls"] is True and h["mode"] == "sentinel" and h["url"].startswith("rediss+sentinel://")
        assert h["reading_from"] != h["primary"] == "127.0.0.1:%d" % s.primary()
        st = SSEStream(a.port, "/events?channel=news", timeout=EVENT_TIMEOUT)
        st.next()
        for _ in range(10):          # exit 3 (WAIT counted no replica in time: a loaded machine): retry, same key
            c = shell_publish(s.url, "--broker-ca-certs", ca, "--key", "tls-sentinel")
            if c.returncode != 3:
                break
        assert c.returncode == 0, c.stderr
        p = python_publish(s.url, "x", key="tls-sentinel", M0_BROKER_CA_CERTS=ca)      # the same key: the same id
        assert p.returncode == 0 and int(p.stdout) == int(c.stdout), p.stderr
        ev = st.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.data) == (int(c.stdout), "x")
        st.close()
        c = shell_publish(s.url, "--broker-ca-certs", os.path.join(certs, "other-ca.pem"))
        assert c.returncode == 1 and "certificate verify failed" in c.stderr, c.stderr
    finally:
        s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_an_acl_user_authenticates_as_itself(start_server):
    """Managed Redis hands out ACL users: redis://USER:PASSWORD@ is AUTH
    USER PASSWORD (Redis 6), for the server, m0serve publish and m0pub."""
    tmp = tempfile.mkdtemp(prefix="m0redis.")
    server = Redis(tmp, persist=False, args=["--user", "alice", "on", ">s3cret", "~*", "&*", "+@all"]).start()
    try:
        url = "redis://alice:s3cret@127.0.0.1:%d" % server.port
        a = host(start_server, url, workers=1)
        h = wait_health(a.port, lambda h: h["broker"]["connected"], workers=1)["broker"]
        assert h["url"] == "redis://alice:***@127.0.0.1:%d/0" % server.port
        c = shell_publish(url)
        assert c.returncode == 0, c.stderr
        p = python_publish(url, "x")
        assert p.returncode == 0, p.stderr
        c = shell_publish("redis://alice:wrong@127.0.0.1:%d" % server.port)
        assert c.returncode == 1 and "WRONGPASS" in c.stderr and "s3cret" not in c.stderr, c.stderr
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def test_bad_tls_and_replica_flags():
    def run(*args):
        p = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=20)
        return p.returncode, p.stderr.strip().splitlines()

    rc, err = run("app:app", "--broker", "redis://h:1", "--broker-ca-certs", "/etc/hostname")
    assert rc == 2 and len(err) == 1 and "--broker-ca-certs" in err[0] and "rediss" in err[0]
    rc, err = run("app:app", "--broker", "rediss://h:1", "--broker-keyfile", "/etc/hostname")
    assert rc == 2 and len(err) == 1 and "--broker-keyfile" in err[0]
    rc, err = run("app:app", "--broker", "rediss://h:1", "--broker-ca-certs", "/nonexistent/ca.pem")
    assert rc == 2 and len(err) == 1 and "/nonexistent/ca.pem" in err[0]
    rc, err = run("app:app", "--broker", "redis+sentinel://h:1,h:2", "--broker-min-replicas", "1")
    assert rc == 2 and len(err) == 1 and "MASTER" in err[0]
    rc, err = run("app:app", "--broker", "redis://a:1,b:2")
    assert rc == 2 and len(err) == 1 and "sentinel" in err[0]
    rc, err = run("app:app", "--broker", "redis://h:1", "--broker-min-replicas", "x")
    assert rc == 2 and len(err) == 1 and "--broker-min-replicas" in err[0]
    rc, err = run("publish", "news", "x", "--broker", "rediss://127.0.0.1:1", "--broker-ca-certs", "/nonexistent/ca.pem")
    assert rc == 2 and len(err) == 1 and "/nonexistent/ca.pem" in err[0]


@pytest.mark.parametrize("url", ["rediss://:pw@host:1234/3", "redis+sentinel://a:1,b,[::1]:3/mymaster/2",
                                 "rediss+sentinel://s1/m"])
def test_m0pub_parses_the_new_urls(url):
    sys.path.insert(0, str(PYDIR))
    import m0pub
    cfg = m0pub.parse_broker_url(url)
    if url.startswith("rediss://"):
        assert cfg["tls"] and not cfg["sentinel"] and (cfg["host"], cfg["port"], cfg["db"]) == ("host", 1234, 3)
        assert cfg["shown"] == "rediss://:***@host:1234/3"
    elif url.startswith("redis+"):
        assert cfg["sentinel"] and not cfg["tls"] and cfg["master"] == "mymaster" and cfg["db"] == 2
        assert cfg["hosts"] == [("a", 1), ("b", 26379), ("::1", 3)]
        assert cfg["shown"] == "redis+sentinel://a:1,b:26379,[::1]:3/mymaster/2"
    else:
        assert cfg["sentinel"] and cfg["tls"] and cfg["hosts"] == [("s1", 26379)] and cfg["master"] == "m"
