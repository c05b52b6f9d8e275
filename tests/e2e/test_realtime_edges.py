"""Realtime edges on a plain WSGI app: the GRIP-style degrade without
--realtime, channel validation, slow subscribers, m0pub outside m0serve."""

import json
import re
import os
import subprocess
import sys
import time

from rawhttp import request
from serverproc import REPO, binary_is_sanitized, rss_kb
from sse import SSEStream


def test_without_realtime_a_hold_degrades_to_a_short_response(start_server):
    server = start_server("realtime_app:application")
    response = request(server.port, "GET", "/events")
    assert response.status == 200
    assert response.body.startswith(b": connected")
    assert response.header("content-length") == str(len(response.body))
    assert not any(name.startswith("m0-") for name in response.header_names())
    assert request(server.port, "GET", "/publish").body == b"None"
    assert request(server.port, "GET", "/health").body != b""   # the app's own route, not ours


def test_reserved_or_invalid_channel_names_are_refused(start_server):
    server = start_server("realtime_app:application", "--realtime")
    for bad in ("m0.internal", "a%01b", "x" * 201):
        assert request(server.port, "GET", "/events?channel=" + bad).status == 500
    assert server.stderr.wait_for(re.compile("invalid M0-Channel"), 5)   # logged before each 500 went out


def test_a_subscriber_that_stops_reading_is_closed_not_buffered(start_server):
    server = start_server("realtime_app:application", "--realtime", "--outbox-limit", "65536")
    (worker,) = server.wait_workers(lambda pids: len(pids) == 1)
    stalled = SSEStream(server.port, "/events", rcvbuf=4096)     # never reads again
    before = rss_kb(worker)
    # ~16 MB of events: far more than kernel buffers and the outbox can take.
    for _ in range(8):
        assert request(server.port, "GET", "/publish?n=32&size=60000").status == 200
    h = json.loads(request(server.port, "GET", "/health").body)
    assert h["slow_subscribers_closed"] == 1 and h["held_streams"] == 0
    if not binary_is_sanitized():            # ASan's quarantine keeps freed memory
        assert rss_kb(worker) - before < 8 * 1024
    stalled.close()


def test_publish_outside_m0serve_is_a_noop():
    code = ("import m0pub, logging; logging.basicConfig(); "
            "print(m0pub.publish('news', 'x'), m0pub.enabled()); print(m0pub.publish('news', 'y'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=str(REPO / "python"), capture_output=True,
                         text=True, timeout=30, env=dict(os.environ, PYTHONPATH=str(REPO / "python")))
    assert out.returncode == 0
    assert out.stdout.split() == ["None", "False", "None"]
    assert out.stderr.count("not running under m0serve") == 1   # logs once


def test_publishing_an_oversized_event_is_an_application_error(start_server):
    server = start_server("realtime_app:application", "--realtime")
    assert request(server.port, "GET", "/publish?size=70000").status == 500
    assert server.stderr.wait_for(__import__("re").compile("exceeds the 65536-byte frame limit"), 5)


def test_concurrent_publishers_deliver_every_id_in_order(start_server):
    """Ids are taken and written under one lock: no loss, no reordering."""
    import threading
    server = start_server("realtime_app:application", "--realtime", workers=2)
    stream = SSEStream(server.port, "/events")
    stream.next()                                    # the hold's head comment
    def burst():
        for _ in range(5):
            assert request(server.port, "GET", "/publish?n=40").status == 200
    threads = [threading.Thread(target=burst) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    ids = [stream.next_event(timeout=5).id for _ in range(800)]
    assert ids == sorted(ids) and len(set(ids)) == 800
    stream.close()


def test_a_resume_larger_than_the_outbox_limit_is_delivered_whole(start_server):
    server = start_server("realtime_app:application", "--realtime", "--outbox-limit", "65536")
    ids = request(server.port, "GET", "/publish?n=100&size=5000").body.decode().split(",")
    stream = SSEStream(server.port, "/events", headers=[("Last-Event-ID", ids[0])])
    stream.next()
    got = [stream.next_event(timeout=5).id for _ in range(99)]
    assert got == [int(i) for i in ids[1:]]
    stream.close()


def test_an_unknown_last_event_id_gets_the_gap_marker(start_server):
    server = start_server("realtime_app:application", "--realtime")
    request(server.port, "GET", "/publish?n=3")
    for bad in ("abc", "-5", "1000"):
        stream = SSEStream(server.port, "/events", headers=[("Last-Event-ID", bad)])
        stream.next()
        assert stream.next_event(timeout=5).event == "m0-gap"
        stream.close()

