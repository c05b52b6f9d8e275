#!/usr/bin/env python3
"""Time to first byte of streamed responses (bench/stream.sh).

One thread, non-blocking sockets (selectors/epoll), HTTP/1.1 with
``Connection: close`` (every server then frames the body the same way it
would for a last request: chunked or close-delimited), bodies de-chunked.

  ttfb  --url URL -n N [-c C]     N requests, C at a time; for each: the time
                                  from sending the request to the first byte
                                  of the response (head) and to the first
                                  byte of the body, and to the end
  sse   --url URL -c C            C streams at once, each reading Server-Sent
                                  Events whose data is JSON {"t": ..., "i": i}
                                  until the server ends the response: time to
                                  the first event, per-event lag (receive time
                                  minus "t", the time.time() at which the app
                                  yielded it), events per second delivered

Prints one JSON object on stdout.  Times in milliseconds.  Standard library
only.
"""

import argparse
import json
import selectors
import socket
import sys
import time
from urllib.parse import urlsplit


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return round(v[min(len(v) - 1, int(p / 100.0 * len(v)))], 3)


def summary(values):
    return {"p50": pct(values, 50), "p99": pct(values, 99), "max": round(max(values), 3) if values else None,
            "n": len(values)}


class Conn:
    """One request: connect, send, parse the head, de-chunk the body."""

    def __init__(self, host, port, target, on_body):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\nUser-Agent: stream_client\r\n"
                    "Accept: */*\r\n\r\n" % (target, host, port)).encode()
        self.on_body = on_body
        self.buf = b""
        self.head = None
        self.status = None
        self.chunked = False
        self.length = None          # Content-Length, if any
        self.chunk_left = 0         # bytes left in the current chunk (chunked)
        self.body_bytes = 0
        self.done = False
        self.error = None
        self.t_start = time.monotonic()
        self.t_sent = None
        self.t_head = None          # first response byte
        self.t_body = None          # first body byte
        self.t_end = None
        try:
            self.sock.connect((host, port))
        except BlockingIOError:
            pass

    def fileno(self):
        return self.sock.fileno()

    def on_writable(self):
        try:
            n = self.sock.send(self.req)
        except BlockingIOError:
            return False
        self.req = self.req[n:]
        if not self.req:
            self.t_sent = time.monotonic()
            return True
        return False

    def on_readable(self):
        try:
            data = self.sock.recv(262144)
        except BlockingIOError:
            return
        except OSError as e:
            self.fail(type(e).__name__)
            return
        now = time.monotonic()
        if not data:
            if self.head is not None and not self.chunked and self.length is None:
                self.finish(now)                 # close-delimited body ends here
            else:
                self.fail("closed early")
            return
        if self.t_head is None:
            self.t_head = now
        self.buf += data
        if self.head is None:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.head, self.buf = self.buf[:end].decode("latin-1"), self.buf[end + 4:]
            lines = self.head.split("\r\n")
            parts = lines[0].split()
            self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
            for line in lines[1:]:
                k, _, v = line.partition(":")
                k = k.strip().lower()
                v = v.strip()
                if k == "transfer-encoding" and "chunked" in v.lower():
                    self.chunked = True
                elif k == "content-length":
                    self.length = int(v)
        self.feed(now)

    def feed(self, now):
        if not self.chunked:
            if self.buf:
                self.body(self.buf, now)
                self.buf = b""
            if self.length is not None and self.body_bytes >= self.length:
                self.finish(now)
            return
        while True:
            if self.chunk_left == 0:
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return
                line = self.buf[:end].split(b";")[0].strip()
                if not line:                    # CRLF after a chunk's data
                    self.buf = self.buf[end + 2:]
                    continue
                size = int(line, 16)
                self.buf = self.buf[end + 2:]
                if size == 0:
                    self.finish(now)
                    return
                self.chunk_left = size
            if not self.buf:
                return
            take = self.buf[:self.chunk_left]
            self.buf = self.buf[len(take):]
            self.chunk_left -= len(take)
            self.body(take, now)

    def body(self, data, now):
        if self.t_body is None and data:
            self.t_body = now
        self.body_bytes += len(data)
        self.on_body(self, data, now)

    def finish(self, now):
        if not self.done:
            self.done = True
            self.t_end = now

    def fail(self, why):
        if not self.done:
            self.done = True
            self.error = why
            self.t_end = time.monotonic()


def run(conns_to_start, concurrency, host, port, target, timeout, on_body):
    """Run conns_to_start requests, concurrency at a time; returns them all."""
    sel = selectors.DefaultSelector()
    pending = conns_to_start
    live = {}
    finished = []
    deadline = time.monotonic() + timeout

    def launch():
        nonlocal pending
        while pending > 0 and len(live) < concurrency:
            c = Conn(host, port, target, on_body)
            pending -= 1
            live[c.fileno()] = c
            sel.register(c, selectors.EVENT_WRITE)

    launch()
    while live and time.monotonic() < deadline:
        for key, ev in sel.select(timeout=0.2):
            c = key.fileobj
            if ev & selectors.EVENT_WRITE and c.t_sent is None:
                if c.on_writable():
                    sel.modify(c, selectors.EVENT_READ)
                continue
            if ev & selectors.EVENT_READ:
                c.on_readable()
            if c.done:
                sel.unregister(c)
                live.pop(key.fd, None)
                c.sock.close()
                finished.append(c)
        launch()
    for c in list(live.values()):
        c.fail("timeout")
        sel.unregister(c)
        c.sock.close()
        finished.append(c)
    return finished


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("ttfb", "sse"))
    ap.add_argument("--url", required=True)
    ap.add_argument("-n", "--requests", type=int, default=50)
    ap.add_argument("-c", "--concurrency", type=int, default=1)
    ap.add_argument("--expect-bytes", type=int, help="ttfb: each body must have this many bytes")
    ap.add_argument("--events", type=int, help="sse: events each stream must deliver")
    ap.add_argument("--timeout", type=float, default=120.0, help="bound on the whole run (seconds)")
    a = ap.parse_args()

    u = urlsplit(a.url)
    host, port = u.hostname, u.port or 80
    target = (u.path or "/") + ("?" + u.query if u.query else "")
    t0 = time.monotonic()

    if a.mode == "ttfb":
        done = run(a.requests, a.concurrency, host, port, target, a.timeout, lambda c, d, now: None)
        ok = [c for c in done if c.error is None and c.status == 200 and
              (a.expect_bytes is None or c.body_bytes == a.expect_bytes)]
        errors = {}
        for c in done:
            if c not in ok:
                why = c.error or ("status %s" % c.status if c.status != 200 else "%d body bytes" % c.body_bytes)
                errors[why] = errors.get(why, 0) + 1
        out = {
            "mode": "ttfb", "url": a.url, "requests": a.requests, "concurrency": a.concurrency,
            "ok": len(ok), "errors": errors,
            "ttfb_head_ms": summary([(c.t_head - c.t_sent) * 1000 for c in ok]),
            "ttfb_body_ms": summary([(c.t_body - c.t_sent) * 1000 for c in ok if c.t_body is not None]),
            "total_ms": summary([(c.t_end - c.t_sent) * 1000 for c in ok]),
            "body_bytes": ok[0].body_bytes if ok else None,
            "seconds": round(time.monotonic() - t0, 3),
        }
    else:
        state = {}
        lags, firsts = [], []
        times = []

        def on_body(c, data, now):
            st = state.setdefault(id(c), {"buf": b"", "events": 0})
            st["buf"] += data
            wall = time.time()
            while b"\n\n" in st["buf"]:
                ev, st["buf"] = st["buf"].split(b"\n\n", 1)
                for line in ev.split(b"\n"):
                    if line.startswith(b"data:"):
                        d = json.loads(line[5:].strip())
                        if st["events"] == 0:
                            firsts.append((now - c.t_sent) * 1000)
                        st["events"] += 1
                        lags.append((wall - d["t"]) * 1000)
                        times.append(now)

        done = run(a.concurrency, a.concurrency, host, port, target, a.timeout, on_body)
        per = [state.get(id(c), {"events": 0})["events"] for c in done]
        errors = {}
        for c in done:
            if c.error or c.status != 200:
                why = c.error or "status %s" % c.status
                errors[why] = errors.get(why, 0) + 1
        complete = sum(1 for c, n in zip(done, per) if c.error is None and (a.events is None or n == a.events))
        delivered = sum(per)
        span = (max(times) - t0) if times else None
        out = {
            "mode": "sse", "url": a.url, "streams": a.concurrency, "complete": complete, "errors": errors,
            "events_delivered": delivered,
            "events_expected": a.events * a.concurrency if a.events else None,
            "first_event_ms": summary(firsts),
            "lag_ms": summary(lags),
            "events_per_s": round(delivered / span, 1) if span else None,
            "seconds": round(time.monotonic() - t0, 3),
        }
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
