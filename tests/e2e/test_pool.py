"""The handler-thread pool (--blocking-threads N): slow views never stall the
loop, requests queue for free threads, --request-timeout answers 503, and a
client that leaves mid-view costs nothing."""

import re
import threading
import time

import pytest

from rawhttp import Conn, request
from serverproc import binary_is_sanitized, rss_kb, Server

SLOW_START = re.compile(r"conformance: slow start tag=(\S+)")


def slow_requests(server, count, seconds, tag="s"):
    """Start count slow requests in threads; returns (threads, results) where
    results[i] = (status, finished_at) once thread i is done."""
    results = [None] * count

    def one(i):
        response = request(server.port, "GET", "/slow?s=%s&tag=%s%d" % (seconds, tag, i), timeout=30)
        results[i] = (response.status, time.monotonic())

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    return threads, results


def wait_started(server, tags, timeout=10):
    """Block until the app logged the start of every slow view in tags."""
    for tag in tags:
        assert server.stderr.wait_for(re.compile(r"slow start tag=%s\b" % re.escape(tag)), timeout), tag


def test_eight_slow_views_run_in_parallel(start_server):
    server = start_server("conformance:application", "--blocking-threads", "8")
    began = time.monotonic()
    threads, results = slow_requests(server, 8, 1.5)
    for t in threads:
        t.join(30)
    elapsed = time.monotonic() - began
    assert [r[0] for r in results] == [200] * 8
    # Serially this is 12 s; in parallel about 1.5 s.
    assert elapsed < 4.0, "8 x 1.5 s views took %.2f s" % elapsed


def test_fast_requests_keep_their_latency_while_slow_views_run(start_server):
    server = start_server("conformance:application", "--blocking-threads", "8")
    with Conn(server.port) as conn:        # a warm keep-alive connection
        assert conn.request("GET", "/").status == 200
        threads, results = slow_requests(server, 6, 1.5)
        wait_started(server, ["s%d" % i for i in range(6)])
        began = time.monotonic()
        for _ in range(50):
            assert conn.request("GET", "/").status == 200
        fast_done = time.monotonic()
    for t in threads:
        t.join(30)
    assert all(r is not None and r[0] == 200 for r in results)
    # All 50 fast requests were answered while the six views were still asleep.
    assert fast_done < min(r[1] for r in results)
    assert fast_done - began < 1.0, "50 fast requests took %.3f s" % (fast_done - began)


def test_requests_queue_when_every_thread_is_busy(start_server):
    server = start_server("conformance:application", "--blocking-threads", "2")
    began = time.monotonic()
    threads, results = slow_requests(server, 3, 1.0)
    for t in threads:
        t.join(30)
    assert [r[0] for r in results] == [200] * 3
    finished = sorted(r[1] - began for r in results)
    # Two run at once; the third waits for a free thread.
    assert finished[1] < 1.9 and finished[2] >= 1.9, finished


def test_request_timeout_answers_503_to_queued_requests(start_server):
    server = start_server("conformance:application", "--blocking-threads", "1", "--request-timeout", "0.5")
    threads, results = slow_requests(server, 1, 2.0, tag="busy")
    wait_started(server, ["busy0"])
    began = time.monotonic()
    response = request(server.port, "GET", "/", timeout=10)
    waited = time.monotonic() - began
    assert response.status == 503
    assert 0.4 < waited < 1.8, waited
    for t in threads:
        t.join(30)
    assert results[0][0] == 200
    assert server.stderr.wait_for(re.compile(r"view still running after .* GET /slow"), 5)
    # The thread is free again: the next request is served.
    assert request(server.port, "GET", "/").status == 200


def test_client_gone_while_view_runs_frees_the_slot_safely(start_server):
    server = start_server("conformance:application", "--blocking-threads", "2", "--max-connections", "16")
    # Five rounds of six clients that send a request and leave while its view
    # runs: 30 abandoned requests through 16 slots, so slots must come back.
    for round_ in range(5):
        for i in range(6):
            conn = Conn(server.port)
            conn.send(b"GET /slow?s=0.05&tag=gone%d.%d HTTP/1.1\r\nHost: x\r\n\r\n" % (round_, i))
            conn.close()
        wait_started(server, ["gone%d.%d" % (round_, i) for i in range(6)])
    for _ in range(40):
        assert request(server.port, "GET", "/environ").status == 200
    assert "connection slots busy" not in server.stderr.text()


@pytest.mark.parametrize("threads", ["0", "4"])
def test_wsgi_multithread_is_truthful(start_server, threads):
    server = start_server("conformance:application", "--blocking-threads", threads)
    import json
    env = json.loads(request(server.port, "GET", "/environ").body)
    assert env["wsgi.multithread"] is (threads != "0")


def test_default_topology_is_one_worker_with_a_pool(start_server):
    server = Server("conformance:application")
    server.args.remove("--workers")
    server.args.remove("1")
    start_server.servers.append(server)
    server.start()
    assert "workers=1 (default topology: 1 worker)" in server.banner
    # The master cannot know the app is WSGI (it never imports it): the
    # worker that imported it names its pool.
    booted = server.stderr.wait_for(re.compile(r"worker booted .*; blocking-threads=(\S+)"), 10)
    assert booted and re.fullmatch(r"[1-8]\.\.40", booted.group(1))
    # An explicit 0 wins.
    explicit = start_server("conformance:application", "--blocking-threads", "0")
    assert "blocking-threads=0 (as configured)" in explicit.banner


def test_an_asgi_only_server_shows_no_handler_pool(start_server):
    """The pool runs WSGI views only: neither the banner nor the boot line
    of an ASGI application (detected, or --protocol asgi) describes one."""
    for extra in ((), ("--protocol", "asgi")):
        server = start_server("asgi_only:app", *extra, workers=None)
        booted = server.stderr.wait_for(re.compile(r"worker booted"), 10)
        assert booted
        assert "blocking-threads" not in server.banner
        assert "elastic" not in server.banner
        assert "blocking-threads" not in booted.string
        assert "(asgi, executor)" in booted.string
        server.stop()


@pytest.mark.skipif(binary_is_sanitized(), reason="ASan's quarantine makes RSS growth meaningless")
def test_rss_flat_over_10000_requests_with_the_pool(start_server):
    server = start_server("conformance:application", "--blocking-threads", "4", workers=1)
    (worker,) = server.wait_workers(lambda pids: len(pids) == 1)

    def run(count):
        with Conn(server.port) as conn:
            for i in range(count):
                if i % 100 == 99:
                    # A client that vanishes mid-request now and then.
                    gone = Conn(server.port)
                    gone.send(b"GET /slow?s=0.01 HTTP/1.1\r\nHost: x\r\n\r\n")
                    gone.close()
                path = "/environ?i=%d" % i if i % 2 else "/echo/readn"
                body = None if i % 2 else b"%064d" % i
                assert conn.request("POST" if body else "GET", path, body=body).status == 200

    run(1000)
    before = rss_kb(worker)
    run(10000)
    after = rss_kb(worker)
    assert after - before < 2048, "RSS grew from %d kB to %d kB" % (before, after)


def test_inline_answers_written_on_the_next_pass_keep_order_and_close(start_server):
    """--blocking-threads 0: a view of 20 us to 1 ms has its answer written on
    the loop's next pass (h1.c, DEFER_MIN_US): pipelined requests are still
    answered in order, a HEAD's without a body, Connection: close closes after
    the last one; another client is served meanwhile."""
    from rawhttp import build_request
    server = start_server("conformance:application", "--blocking-threads", "0")
    with Conn(server.port) as conn, Conn(server.port) as other:
        conn.send(build_request("GET", "/slow?s=0.0002&tag=p1") + build_request("HEAD", "/slow?s=0.0003&tag=p2")
                  + build_request("GET", "/slow?s=0.0004&tag=p3", headers=[("Connection", "close")]))
        assert other.request("GET", "/slow?s=0.0002&tag=o1").body == b"slept 0.0002"
        first = conn.read_response("GET")
        second = conn.read_response("HEAD")
        third = conn.read_response("GET")
        assert (first.status, first.body) == (200, b"slept 0.0002")
        assert (second.status, second.body) == (200, b"")
        assert (third.status, third.body) == (200, b"slept 0.0004")
        assert not conn._fill(), "the connection stays open after Connection: close"
        assert other.request("GET", "/slow?s=0.0002&tag=o2").status == 200
    wait_started(server, ["p1", "p2", "p3", "o1", "o2"])
