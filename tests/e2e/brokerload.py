"""The load and the checks the broker failover tests share (test_broker_failover.py: a Redis
primary lost; test_broker_nats.py: a NATS node lost): streams collected on every worker,
publishers that retry each event with its key until acknowledged (through a host's view, and
m0pub in a plain process), /health watched, and the verdict -- every acknowledged event on every
stream once, in id order, without a gap. Every wait is bounded.
"""

import json
import os
import subprocess
import sys
import threading
import time

from rawhttp import request
from serverproc import REPO, wait_for

PYDIR = REPO / "python"
EVENT_TIMEOUT = 20.0


def health(port):
    r = request(port, "GET", "/health")
    assert r.status == 200
    return json.loads(r.body)


def wait_health(port, predicate, timeout=EVENT_TIMEOUT, workers=2):
    """/health until predicate holds on every worker (each pid seen so): the
    last answer."""
    good, last = set(), [None]

    def every():
        h = last[0] = health(port)
        if predicate(h):
            good.add(h["pid"])
        return len(good) >= workers
    try:
        wait_for(every, timeout, "health condition on %d workers" % workers)
    except AssertionError as e:
        raise AssertionError("%s (last: %r)" % (e, last[0])) from None
    return last[0]


class Collector(threading.Thread):
    """Reads one stream's events (heartbeats skipped) with their arrival
    times until stopped."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.events = []                 # (monotonic time, Event)
        self.stopping = threading.Event()
        self.error = None

    def run(self):
        while not self.stopping.is_set():
            try:
                ev = self.stream.next_event(0.5)
            except (TimeoutError, OSError):
                continue
            except EOFError as e:
                self.error = e
                return
            self.events.append((time.monotonic(), ev))

    def ids(self):
        return {ev.id for _, ev in self.events}

    def stop(self):
        self.stopping.set()
        self.join(5)
        self.stream.close()


class ViewPublisher(threading.Thread):
    """Publishes through a host's view (m0pub.publish in a worker), one key
    per event, each retried with its key until acknowledged."""

    def __init__(self, port, tag, channel):
        super().__init__(daemon=True)
        self.port, self.tag, self.channel = port, tag, channel
        self.acked = {}                  # key -> id
        self.unknown = set()             # keys that raised PublishOutcomeUnknown
        self.refused = 0
        self.stopping = threading.Event()
        self.error = None

    def run(self):
        i = 0
        try:
            while not self.stopping.is_set():
                key = "%s-%d" % (self.tag, i)
                deadline = time.monotonic() + 60
                while True:
                    r = request(self.port, "GET", "/publish?channel=%s&data=%s&key=%s" % (self.channel, key, key),
                                timeout=30)
                    if r.status == 200:
                        self.acked[key] = int(r.body)
                        break
                    body = r.body.decode("utf-8", "replace")
                    if body.startswith("PublishOutcomeUnknown:"):
                        self.unknown.add(key)
                    elif body.startswith("BrokerError:"):
                        self.refused += 1
                    else:
                        raise AssertionError("publish %s: %s %s" % (key, r.status, body))
                    if time.monotonic() > deadline:
                        raise AssertionError("publish %s never acknowledged: %s" % (key, body))
                    time.sleep(0.02)     # a retry's pace, not a wait for an event
                i += 1
                time.sleep(0.003)
        except Exception as e:           # reported by the test
            self.error = e


PUBLISHER = r"""
import os, sys, time
import m0pub
tag, channel, stop = sys.argv[1:4]
i = 0
while not os.path.exists(stop):
    key = "%s-%d" % (tag, i)
    while True:
        try:
            print("ok", key, m0pub.publish(channel, key, key=key), flush=True)
            break
        except m0pub.PublishOutcomeUnknown:
            print("unknown", key, flush=True)
        except m0pub.BrokerError:
            print("refused", key, flush=True)
        time.sleep(0.02)
    i += 1
    time.sleep(0.003)
"""


class ProcessPublisher:
    """The same loop in a plain Python process (m0pub with M0_BROKER=url and
    the other variables env names)."""

    def __init__(self, url, tag, channel, tmp, timeout=60, **env):
        self.stopfile = os.path.join(tmp, "stop-%s" % tag)
        self.timeout = timeout
        e = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(PYDIR), "M0_BROKER": url}
        e.update(env)
        self.proc = subprocess.Popen([sys.executable, "-c", PUBLISHER, tag, channel, self.stopfile], env=e,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.acked, self.unknown, self.refused = {}, set(), 0

    def stop(self):
        open(self.stopfile, "w").close()
        out, err = self.proc.communicate(timeout=self.timeout)
        assert self.proc.returncode == 0, err
        for line in out.splitlines():
            kind, key, *rest = line.split()
            if kind == "ok":
                self.acked[key] = int(rest[0])
            elif kind == "unknown":
                self.unknown.add(key)
            else:
                self.refused += 1


class HealthWatch(threading.Thread):
    """Polls a host's /health: the statuses seen, with their times."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.seen = []
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            try:
                h = health(self.port)
                self.seen.append((time.monotonic(), h["status"], h["broker"]["primary"]))
            except (OSError, AssertionError, ValueError):
                pass
            self.stopping.wait(0.05)

    def stop(self):
        self.stopping.set()
        self.join(5)


def count_acked(pubs):
    return sum(len(p.acked) for p in pubs)


def more_acked(pubs, n, timeout, what):
    """Wait until each publisher of pubs has n more events acknowledged
    than now."""
    before = [len(p.acked) for p in pubs]
    wait_for(lambda: all(len(p.acked) >= k + n for p, k in zip(pubs, before)), timeout, what)


def stop_publishers(pubs, proc):
    """Stop the view publishers pubs (each finishes the event in hand) and
    the process publisher proc."""
    for p in pubs:
        p.stopping.set()
    for p in pubs:
        p.join(90)
    proc.stop()


def assert_acked_once_in_order(everyone, streams, timeout=EVENT_TIMEOUT):
    """The verdict, once the publishers everyone are stopped: none failed, no id
    acknowledged twice; every acknowledged event reaches every stream
    (Collectors, stopped here), once, in id order, with its data and no
    m0-gap; and each event whose publish was retried after an unknown
    outcome is delivered (once: above). Returns (the acknowledged ids,
    sorted; the keys retried after an unknown outcome)."""
    for p in everyone:
        assert getattr(p, "error", None) is None, p.error
    acked = {}
    for p in everyone:
        acked.update(p.acked)
    ids = sorted(acked.values())
    assert len(set(ids)) == len(ids), "an id acknowledged twice"
    by_id = {i: k for k, i in acked.items()}
    try:
        wait_for(lambda: all(set(ids) <= c.ids() for c in streams), timeout, "every acknowledged event delivered")
    except AssertionError:
        for c in streams:
            missing = sorted(set(ids) - c.ids())
            print("stream: %d events, missing %d: %s" % (len(c.events), len(missing),
                                                        [(i, by_id[i]) for i in missing[:10]]))
        raise
    for c in streams:
        c.stop()
        assert c.error is None, c.error
        got = [ev for _, ev in c.events]
        assert [ev for ev in got if ev.event == "m0-gap"] == [], "a gap was reported"
        seen_ids = [ev.id for ev in got]
        assert seen_ids == sorted(seen_ids) and len(set(seen_ids)) == len(seen_ids), "ids out of order or repeated"
        datas = [ev.data for ev in got]
        assert len(set(datas)) == len(datas), "an event delivered twice: %r" % (
            [d for d in set(datas) if datas.count(d) > 1][:5],)
        for ev in got:
            if ev.id in by_id:
                assert ev.data == by_id[ev.id]
    unknown = set().union(*(p.unknown for p in everyone))
    for c in streams:
        assert unknown <= {ev.data for _, ev in c.events}    # retried with its key: delivered once (above)
    return ids, unknown
