#!/usr/bin/env python3
"""Hold N idle SSE streams, measure server RSS per stream and publish->delivery
latency (bench/realtime.sh).

One process, one thread doing non-blocking I/O with selectors (epoll):

1. read the server worker's VmRSS (--rss-pid);
2. open N connections to GET --path, at most --batch connects/heads
   outstanding at a time; each must answer 200 with Content-Type
   text/event-stream (a chunked body is de-chunked);
3. keep reading every stream for --settle seconds, read VmRSS again
   (optionally GET --health-path and keep the JSON);
4. a second thread GETs --publish-path?n=1&seq=K every --interval seconds,
   --events times; each event's data is JSON with "t" (the server's
   time.time() at publish) and "seq".  The main loop timestamps each event on
   each stream when it is parsed (time.time() right after the recv() that
   completed it) and records latency = receive time - t;
5. waits until every open stream has every event or --drain seconds after the
   last publish, reads VmRSS a third time, closes everything, and prints one
   JSON object on stdout.

Two latencies are reported for every delivery:

* latency_ms: time.time() right after the recv() that completed the event
  minus "t".  This includes the client's own work: one Python thread reads N
  sockets per event, so with 10,000 streams the last stream is read tens of
  ms after the first, whatever the server does.
* kernel_latency_ms: the kernel's receive timestamp of the data
  (SO_TIMESTAMPNS on each socket; on loopback, about when the server's write
  reached the socket) minus "t".  This is the server's fan-out time, free of
  the client's reading lag.  --no-kernel-timestamps turns it off.

Standard library only.
"""

import argparse
import errno
import json
import os
import selectors
import socket
import struct
import sys
import threading
import time


# Linux SO_TIMESTAMPNS (== SCM_TIMESTAMPNS; "_OLD" variant: struct timespec
# with 64-bit fields on 64-bit hosts).  Python does not export the constant.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def rss_kb(pid):
    if not pid:
        return None
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def http_get(host, port, target, timeout=10.0):
    """Tiny blocking HTTP/1.1 GET (Connection: close) -> (status, body bytes)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (target, host, port)).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    parts = head.split(b"\r\n", 1)[0].split()
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
    if b"transfer-encoding: chunked" in head.lower():
        out, rest = b"", body
        while rest:
            line, _, rest = rest.partition(b"\r\n")
            size = int(line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2:]
        body = out
    return status, body


class Conn:
    __slots__ = ("sock", "state", "buf", "chunked", "chunk_left", "raw", "got", "t_open")

    def __init__(self, sock):
        self.sock = sock
        self.state = "connect"     # connect -> head -> open -> closed
        self.buf = b""             # de-chunked SSE text not yet split into events
        self.raw = b""             # undecoded bytes (head, chunk framing)
        self.chunked = False
        self.chunk_left = 0        # bytes left in the current chunk (+2 for CRLF handled via -1 state)
        self.got = 0               # events received
        self.t_open = time.monotonic()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--stream-ports", default="",
                    help="comma-separated ports to spread the streams over, round robin (default: --port); "
                         "publishing and /health still go to --port")
    ap.add_argument("-n", "--streams", type=int, default=1000)
    ap.add_argument("--path", default="/events")
    ap.add_argument("--rss-pid", type=int, default=0)
    ap.add_argument("--health-path", default="")
    ap.add_argument("--publish-path", default="/publish")
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--drain", type=float, default=10.0)
    ap.add_argument("--batch", type=int, default=256, help="connects/heads outstanding at once")
    ap.add_argument("--open-timeout", type=float, default=90.0)
    ap.add_argument("--no-kernel-timestamps", action="store_true",
                    help="do not ask for SO_TIMESTAMPNS receive timestamps")
    a = ap.parse_args()
    use_kts = not a.no_kernel_timestamps and sys.platform.startswith("linux")

    out = {"requested": a.streams, "errors": {}}

    def err(kind):
        out["errors"][kind] = out["errors"].get(kind, 0) + 1

    sel = selectors.EpollSelector()
    request = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n"
               % (a.path, a.host, a.port)).encode()
    conns = []
    open_conns = []
    lat = []                # seconds, every (event, stream) delivery (client read time)
    lat_k = []              # same, kernel receive timestamp (SO_TIMESTAMPNS)
    per_seq = {}            # seq -> [count, first recv, last recv, t]
    per_seq_k = {}          # seq -> kernel-rx latencies (seconds)

    def close(c, why=None):
        if c.state == "closed":
            return
        if why:
            err(why)
        try:
            sel.unregister(c.sock)
        except (KeyError, ValueError):
            pass
        c.sock.close()
        c.state = "closed"

    def on_events(c, now, kts):
        # split complete events (blank-line terminated) out of c.buf
        buf = c.buf.replace(b"\r\n", b"\n")
        while True:
            end = buf.find(b"\n\n")
            if end < 0:
                break
            block, buf = buf[:end], buf[end + 2:]
            data = [ln[5:].lstrip(b" ") for ln in block.split(b"\n") if ln.startswith(b"data:")]
            if not data:
                continue            # comment (": hi", heartbeats)
            try:
                ev = json.loads(b"\n".join(data))
                seq, t = ev["seq"], float(ev["t"])
            except (ValueError, KeyError, TypeError):
                err("unparsable event")
                continue
            c.got += 1
            lat.append(now - t)
            if kts is not None:
                lat_k.append(kts - t)
                per_seq_k.setdefault(seq, []).append(kts - t)
            s = per_seq.get(seq)
            if s is None:
                per_seq[seq] = [1, now, now, t]
            else:
                s[0] += 1
                if now > s[2]:
                    s[2] = now
        c.buf = buf

    def feed_body(c, data, now, kts):
        if not c.chunked:
            c.buf += data
        else:
            c.raw += data
            while c.raw:
                if c.chunk_left > 0:
                    take = c.raw[:c.chunk_left]
                    c.buf += take
                    c.chunk_left -= len(take)
                    c.raw = c.raw[len(take):]
                    if c.chunk_left == 0:
                        c.chunk_left = -1      # expect CRLF after the chunk
                    continue
                if c.chunk_left == -1:
                    if len(c.raw) < 2:
                        break
                    c.raw = c.raw[2:]
                    c.chunk_left = 0
                    continue
                nl = c.raw.find(b"\r\n")
                if nl < 0:
                    break
                size = int(c.raw[:nl].split(b";")[0] or b"0", 16)
                c.raw = c.raw[nl + 2:]
                if size == 0:
                    close(c, "stream ended (last chunk)")
                    return
                c.chunk_left = size
        on_events(c, now, kts)

    def on_readable(c):
        kts = None
        try:
            if use_kts:
                data, anc, _flags, _addr = c.sock.recvmsg(65536, 256)
                for level, kind, blob in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(blob) >= 16:
                        sec, nsec = struct.unpack_from("qq", blob)
                        kts = sec + nsec * 1e-9
            else:
                data = c.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            close(c, "recv: " + (errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__))
            return
        now = time.time()
        if not data:
            close(c, "closed by server before head" if c.state == "head" else "closed by server while open")
            return
        if c.state == "head":
            c.raw += data
            end = c.raw.find(b"\r\n\r\n")
            if end < 0:
                if len(c.raw) > 16384:
                    close(c, "head too large")
                return
            head, rest = c.raw[:end], c.raw[end + 4:]
            c.raw = b""
            lines = head.split(b"\r\n")
            parts = lines[0].split()
            status = parts[1].decode() if len(parts) >= 2 else "?"
            hdrs = {}
            for ln in lines[1:]:
                k, _, v = ln.partition(b":")
                hdrs[k.strip().lower()] = v.strip().lower()
            if status != "200":
                close(c, "status " + status)
                return
            if not hdrs.get(b"content-type", b"").startswith(b"text/event-stream"):
                close(c, "content-type " + hdrs.get(b"content-type", b"(none)").decode())
                return
            c.chunked = b"chunked" in hdrs.get(b"transfer-encoding", b"")
            c.state = "open"
            open_conns.append(c)
            feed_body(c, rest, now, kts)
        elif c.state == "open":
            feed_body(c, data, now, kts)

    def on_writable(c):
        e = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if e:
            close(c, "connect: " + errno.errorcode.get(e, str(e)))
            return
        try:
            c.sock.send(request)        # tiny, fits in an empty send buffer
        except OSError as ex:
            close(c, "send: " + (errno.errorcode.get(ex.errno, str(ex.errno)) if ex.errno else type(ex).__name__))
            return
        c.state = "head"
        sel.modify(c.sock, selectors.EVENT_READ, c)

    def poll(timeout):
        for key, mask in sel.select(timeout):
            c = key.data
            if c.state == "connect":
                on_writable(c)
            else:
                on_readable(c)

    stream_ports = [int(p) for p in a.stream_ports.split(",") if p] or [a.port]

    # ---- 1. baseline RSS
    out["rss_before_kb"] = rss_kb(a.rss_pid)

    # ---- 2. open N streams
    t_start = time.monotonic()
    started = 0
    pending = []
    while True:
        now_m = time.monotonic()
        pending = [c for c in pending if c.state in ("connect", "head")]
        while started < a.streams and len(pending) < a.batch:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            if use_kts:
                s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            c = Conn(s)
            conns.append(c)
            started += 1
            rc = s.connect_ex((a.host, stream_ports[(started - 1) % len(stream_ports)]))
            if rc not in (0, errno.EINPROGRESS):
                s.close()
                c.state = "closed"
                err("connect: " + errno.errorcode.get(rc, str(rc)))
                continue
            sel.register(s, selectors.EVENT_WRITE, c)
            pending.append(c)
        if started >= a.streams and not pending:
            break
        if now_m - t_start > a.open_timeout:
            for c in pending:
                close(c, "timeout opening (%s)" % c.state)
            break
        poll(0.05)
    out["open_seconds"] = round(time.monotonic() - t_start, 3)
    out["opened"] = len(open_conns)

    # ---- 3. settle, then RSS with the streams held
    end = time.monotonic() + a.settle
    while time.monotonic() < end:
        poll(0.05)
    out["rss_held_kb"] = rss_kb(a.rss_pid)
    if a.health_path:
        try:
            st, body = http_get(a.host, a.port, a.health_path)
            out["health"] = json.loads(body) if st == 200 else {"status": st}
        except (OSError, ValueError) as e:
            out["health"] = {"error": repr(e)}
    alive_before = sum(1 for c in open_conns if c.state == "open")

    # ---- 4. publish --events events, --interval apart, from a second thread
    pub = {"sent": 0, "errors": [], "t_first": None, "t_last": None, "rtt_ms": []}
    done = threading.Event()

    def publisher():
        for k in range(a.events):
            t0 = time.time()
            if pub["t_first"] is None:
                pub["t_first"] = t0
            try:
                st, body = http_get(a.host, a.port, "%s?n=1&seq=%d" % (a.publish_path, k))
                if st != 200:
                    pub["errors"].append("status %d" % st)
                else:
                    pub["sent"] += 1
            except OSError as e:
                pub["errors"].append(repr(e))
            t1 = time.time()
            pub["rtt_ms"].append(round((t1 - t0) * 1000, 2))
            pub["t_last"] = t1
            delay = a.interval - (time.time() - t0)
            if delay > 0:
                time.sleep(delay)
        done.set()

    if a.events > 0 and open_conns:
        th = threading.Thread(target=publisher, daemon=True)
        th.start()
        drain_end = None
        while True:
            poll(0.02)
            if done.is_set():
                if drain_end is None:
                    drain_end = time.monotonic() + a.drain
                live = [c for c in open_conns if c.state == "open"]
                if all(c.got >= pub["sent"] for c in live) or time.monotonic() > drain_end:
                    break
        th.join(timeout=1)
    out["publish"] = {"sent": pub["sent"], "errors": pub["errors"][:5],
                      "request_ms_p50": sorted(pub["rtt_ms"])[len(pub["rtt_ms"]) // 2] if pub["rtt_ms"] else None}
    out["rss_after_events_kb"] = rss_kb(a.rss_pid)

    # ---- 5. results
    live = [c for c in open_conns if c.state == "open"]
    expected = pub["sent"] * alive_before
    out["streams_alive_at_end"] = len(live)
    out["streams_lost_during_events"] = alive_before - len(live)
    out["deliveries"] = len(lat)
    out["deliveries_expected"] = expected
    short = [c.got for c in open_conns if c.got < pub["sent"]]
    out["streams_missing_events"] = len(short)
    lat.sort()

    def pct(xs, p):          # nearest-rank percentile of a sorted list, in ms
        if not xs:
            return None
        i = min(len(xs) - 1, max(0, -(-p * len(xs) // 100) - 1))
        return round(xs[i] * 1000, 3)

    out["latency_ms"] = {"p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99),
                         "max": round(lat[-1] * 1000, 3) if lat else None,
                         "min": round(lat[0] * 1000, 3) if lat else None}
    lat_k.sort()
    out["kernel_latency_ms"] = {"p50": pct(lat_k, 50), "p90": pct(lat_k, 90), "p99": pct(lat_k, 99),
                                "max": round(lat_k[-1] * 1000, 3) if lat_k else None,
                                "min": round(lat_k[0] * 1000, 3) if lat_k else None,
                                "samples": len(lat_k)}
    per_event = []
    for seq in sorted(per_seq):
        cnt, first, last, t = per_seq[seq]
        ks = sorted(per_seq_k.get(seq, []))
        per_event.append({"seq": seq, "deliveries": cnt,
                          "read_first_ms": round((first - t) * 1000, 2), "read_last_ms": round((last - t) * 1000, 2),
                          "kernel_p50_ms": round(ks[len(ks) // 2] * 1000, 2) if ks else None,
                          "kernel_max_ms": round(ks[-1] * 1000, 2) if ks else None})
    out["per_event"] = per_event
    spans = sorted((s[2] - s[1]) * 1000 for s in per_seq.values())
    out["fanout_span_ms_p50"] = round(spans[len(spans) // 2], 3) if spans else None
    if a.rss_pid and out["rss_before_kb"] and out["rss_held_kb"] and out["opened"]:
        out["rss_per_stream_bytes"] = round((out["rss_held_kb"] - out["rss_before_kb"]) * 1024 / out["opened"])
    else:
        out["rss_per_stream_bytes"] = None

    for c in conns:
        if c.state != "closed":
            try:
                sel.unregister(c.sock)
            except (KeyError, ValueError):
                pass
            c.sock.close()
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
