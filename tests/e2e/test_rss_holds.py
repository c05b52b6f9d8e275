"""Memory per held connection (issue 20): 5,000 SSE streams (and, apart,
5,000 idle WebSockets) held by one worker must not cost more than a bound of
worker RSS each.

The streams are opened with Python's selectors, at most BATCH connecting or
waiting for their head at a time (how many requests are in flight at once
decides how much transient request memory the allocator is left holding,
so it is fixed here to keep the figure reproducible), then held idle while
the worker's VmRSS is read (once the burst's transient memory has gone back:
settled_rss_kb). Bytes per stream = (RSS held - RSS before the first stream)
/ streams. Latency is not asserted here: it lives in
bench/realtime.sh.
"""

import errno
import json
import resource
import selectors
import socket
import time

import pytest

from rawhttp import request
from serverproc import binary_is_sanitized, rss_kb

pytestmark = pytest.mark.skipif(binary_is_sanitized(), reason="ASan's quarantine and shadow memory make RSS meaningless")

STREAMS = 5000
BATCH = 64
OPEN_TIMEOUT = 20.0
SETTLE_TIMEOUT = 2.5

# Before issue 20's memory work a held SSE stream kept the request's struct
# m0_job (1,232 B) with the WSGI runner's state (112 B) and its struct m0_hold
# (96 B): 1,510-1,688 B measured here, 1,982 B per idle WebSocket. Now the job
# goes back to the loop's cache when the hold begins, the slot keeps only what
# a held connection needs (184 B, in a chunk made on demand), and the heap is
# trimmed after a burst of holds: 148-365 B per SSE stream and 428-851 B per
# idle WebSocket measured here (the low figures when the trim also gives back
# pages the warm-up left, the high ones when it runs before the burst ends;
# the live heap per held stream is the slot, the 96 B hold and 24 B of
# registry links, ~320 B: docs/performance.md has the budget). The bounds are
# the targets (512 B, 1 KiB), 1.2-1.4x the high figures; keeping the
# job for the hold, for one, measures 1,510 B.
BYTES_PER_STREAM_BOUND = 512
BYTES_PER_WEBSOCKET_BOUND = 1024


def raise_nofile(needed):
    """Raise our soft RLIMIT_NOFILE (the server inherits it) towards needed;
    skip when the hard limit is too low."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip("RLIMIT_NOFILE hard limit is %d, below the %d descriptors %d held streams need "
                    "(raise it with ulimit -Hn / prlimit, which needs CAP_SYS_RESOURCE)" % (hard, needed, STREAMS))
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return soft
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return soft


class Holder:
    """Open n SSE streams to /events, at most batch in flight; keep them."""

    REQUEST = b"GET /events?channel=rss HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"

    STATUS = b" 200 "

    def __init__(self, port):
        self.port = port
        self.sel = selectors.DefaultSelector()
        self.socks = []
        self.pending = {}          # socket -> head bytes read so far

    def _start(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        err = s.connect_ex(("127.0.0.1", self.port))
        assert err in (0, errno.EINPROGRESS), "connect: %s" % errno.errorcode.get(err, err)
        self.socks.append(s)
        self.pending[s] = None     # None: connecting
        self.sel.register(s, selectors.EVENT_WRITE)

    def _on_event(self, s):
        head = self.pending[s]
        if head is None:
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            assert err == 0, "connect: %s" % errno.errorcode.get(err, err)
            s.sendall(self.REQUEST)
            self.pending[s] = b""
            self.sel.modify(s, selectors.EVENT_READ)
            return
        data = s.recv(4096)
        assert data, "the server closed a stream before its head (%d held)" % (len(self.socks) - len(self.pending))
        head += data
        if b"\r\n\r\n" not in head:
            self.pending[s] = head
            return
        status = head.split(b"\r\n", 1)[0]
        assert self.STATUS in status and self.accept(head), head[:300]
        del self.pending[s]
        self.sel.unregister(s)     # held: nothing more is read (no event is published)

    def accept(self, head):
        return b"text/event-stream" in head.lower()

    def open(self, n, batch, timeout):
        deadline = time.monotonic() + timeout
        started = 0
        while started < n or self.pending:
            while started < n and len(self.pending) < batch:
                self._start()
                started += 1
            assert time.monotonic() < deadline, "%d of %d streams held after %ss" % (
                len(self.socks) - len(self.pending), n, timeout)
            for key, _ in self.sel.select(timeout=1.0):
                self._on_event(key.fileobj)

    def close(self):
        for s in self.socks:
            s.close()
        self.sel.close()


class WsHolder(Holder):
    """The same for idle WebSockets approved by a WSGI view (wshold.c): the
    handshake a minimal client sends, the 101, nothing more."""

    REQUEST = (b"GET /ws?channel=rss HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\n\r\n")
    STATUS = b" 101 "

    def accept(self, head):
        return b"upgrade: websocket" in head.lower()


def health(port):
    response = request(port, "GET", "/health")
    assert response.status == 200
    return json.loads(response.body)


def wait_held(port, n, timeout=10.0):
    """The worker counts n held streams (the last heads are out before the
    slot becomes HELD)."""
    deadline = time.monotonic() + timeout
    while True:
        held = health(port)["held_streams"]
        if held == n or time.monotonic() > deadline:
            return held
        time.sleep(0.05)


def settled_rss_kb(pid, timeout=SETTLE_TIMEOUT):
    """The worker's RSS once the opening burst's transient memory has gone
    back (the loop trims the heap at most once a second after a burst of
    holds began, so within about a second of the last): the lowest VmRSS
    seen while polling for timeout seconds."""
    deadline = time.monotonic() + timeout
    low = rss_kb(pid)
    while time.monotonic() < deadline:
        time.sleep(0.05)
        low = min(low, rss_kb(pid))
    return low


def measure(start_server, holder_cls, what, bound):
    """Worker RSS per connection for STREAMS held by holder_cls, asserted
    against bound; every one is let go once its client leaves."""
    old_soft = raise_nofile(STREAMS + 512)
    try:
        # One worker; the pool stays at its default. A heartbeat far beyond the
        # test keeps the streams silent while RSS is read.
        server = start_server("realtime_app:application", "--realtime", "--heartbeat", "600", workers=1)
        (worker,) = server.wait_workers(lambda pids: len(pids) == 1)
        # Warm-up: a few requests and one publish, so the first-request costs
        # (imports, the bus, the pool threads) are in the baseline.
        for _ in range(20):
            assert request(server.port, "GET", "/publish?channel=warm").status == 200
        before = rss_kb(worker)
        holder = holder_cls(server.port)
        try:
            t0 = time.monotonic()
            holder.open(STREAMS, BATCH, OPEN_TIMEOUT)
            opened = time.monotonic() - t0
            assert wait_held(server.port, STREAMS) == STREAMS
            held = settled_rss_kb(worker)
            per_stream = (held - before) * 1024 / STREAMS
            print("worker RSS %d kB -> %d kB with %d held %s (opened in %.2f s): %.0f B each (bound %d)"
                  % (before, held, STREAMS, what, opened, per_stream, bound))
            assert per_stream <= bound, (
                "%.0f B of worker RSS per held %s exceeds the bound of %d B (RSS %d kB -> %d kB, %d held)"
                % (per_stream, what, bound, before, held, STREAMS))
            assert server.worker_pids() == {worker}
        finally:
            holder.close()
        # Every stream is let go once its client leaves.
        assert wait_held(server.port, 0) == 0
    finally:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (old_soft, hard))


def test_worker_rss_per_held_sse_stream(start_server):
    measure(start_server, Holder, "SSE streams", BYTES_PER_STREAM_BOUND)


def test_worker_rss_per_idle_held_websocket(start_server):
    measure(start_server, WsHolder, "WebSockets", BYTES_PER_WEBSOCKET_BOUND)
