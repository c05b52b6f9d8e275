"""Memory: a worker's resident set stays flat over 10,000 keep-alive requests."""

import pytest

from rawhttp import Conn
from serverproc import binary_is_sanitized, rss_kb

pytestmark = pytest.mark.skipif(binary_is_sanitized(), reason="ASan's quarantine makes RSS growth meaningless")

WARMUP = 10000  # RSS climbs in steps (allocator arenas) before it plateaus
REQUESTS = 10000
LIMIT_KB = 2048


def exercise(conn, count):
    """Alternate a GET that builds a full environ and a POST read via wsgi.input."""
    for i in range(count):
        if i % 2:
            response = conn.request("POST", "/echo/readn", [("X-Test", "rss")], body=b"%064d" % i)
        else:
            response = conn.request("GET", "/environ?i=%d" % i, [("X-Test", "rss")])
        assert response.status == 200


def test_worker_rss_growth_over_10000_requests(start_server):
    server = start_server("conformance:application", workers=1)
    (worker,) = server.wait_workers(lambda pids: len(pids) == 1)
    with Conn(server.port) as conn:
        exercise(conn, WARMUP)
        before = rss_kb(worker)
        exercise(conn, REQUESTS)
        after = rss_kb(worker)
    print("worker RSS: %d kB after warm-up, %d kB after %d more requests" % (before, after, REQUESTS))
    assert server.worker_pids() == {worker}
    assert after - before < LIMIT_KB, "RSS grew from %d kB to %d kB" % (before, after)
