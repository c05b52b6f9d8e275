#!/usr/bin/env python3
"""Hold N WebSockets on one server and measure it (bench/ws.sh).

One process; the sockets are read by one thread with selectors (epoll), a
second thread publishes through the app's HTTP route. Phases:

1. read the server worker's VmRSS (--rss-pid);
2. open N WebSockets to --path (RFC 6455 handshake, at most --batch
   outstanding); each must answer 101 with the right Sec-WebSocket-Accept;
3. keep reading for --settle seconds, read VmRSS again (optionally GET
   --health-path and keep the JSON): bytes per idle socket;
4. latency (--events E): GET --publish-path?n=1&seq=K every --interval
   seconds; each event is one text frame of JSON {"t": the server's
   time.time() at publish, "seq": K}; every (event, socket) delivery is
   timestamped when its frame is parsed (and with the kernel's receive
   timestamp, SO_TIMESTAMPNS: the server's fan-out without this client's
   reading lag);
5. throughput (--burst E): E more events (counted by their payload's
   '"seq": ' marker, not parsed, so that this client keeps up), published
   in requests of --per events each, as fast as the server delivers them: a new request goes out
   while fewer than --window events are still missing on the slowest
   socket (so no server's buffers, nor m0serve's bus, are overrun by the
   load generator, and every server gets the same flow control). Messages/s
   = frames delivered / (last frame - first publish).

Pings from the server are answered with pongs. Prints one JSON object.
Standard library only.
"""

import argparse
import base64
import errno
import hashlib
import json
import os
import selectors
import socket
import struct
import sys
import threading
import time

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
PONG_EMPTY = bytes([0x8A, 0x80, 0, 0, 0, 0])    # masked (key 0), no payload


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


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of pid, all its threads (seconds), or None."""
    if not pid:
        return None
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def http_get(host, port, target, timeout=30.0):
    """Blocking HTTP/1.1 GET with Connection: close -> (status, body)."""
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
    return (int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0), body


MARK = b'"seq": '              # once per event payload (both apps format it so)


class Sock:
    __slots__ = ("sock", "state", "buf", "key", "frames", "t_last", "carry")

    def __init__(self, sock):
        self.sock = sock
        self.state = "connect"      # connect -> head -> open -> closed
        self.buf = b""
        self.key = base64.b64encode(os.urandom(16))
        self.frames = 0             # text frames received
        self.t_last = 0.0
        self.carry = b""            # throughput: the bytes a marker may straddle


def pct(xs, p):
    if not xs:
        return None
    i = min(len(xs) - 1, max(0, -(-p * len(xs) // 100) - 1))
    return round(xs[i] * 1000, 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-n", "--sockets", type=int, default=1000)
    ap.add_argument("--path", default="/ws")
    ap.add_argument("--rss-pid", type=int, default=0)
    ap.add_argument("--health-path", default="")
    ap.add_argument("--publish-path", default="/publish")
    ap.add_argument("--events", type=int, default=0, help="paced events for the latency phase")
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--burst", type=int, default=0, help="events for the throughput phase")
    ap.add_argument("--per", type=int, default=10, help="events per publish request (throughput)")
    ap.add_argument("--window", type=int, default=100, help="events in flight (throughput)")
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--drain", type=float, default=10.0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--open-timeout", type=float, default=120.0)
    a = ap.parse_args()

    out = {"requested": a.sockets, "errors": {}}

    def err(kind):
        out["errors"][kind] = out["errors"].get(kind, 0) + 1

    sel = selectors.EpollSelector()
    conns, open_conns = [], []
    phase = {"name": "idle"}
    lat, lat_k = [], []

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

    def frames(c, now, kts):
        buf = c.buf
        i, n = 0, len(buf)
        latency = phase["name"] == "latency"
        while n - i >= 2:
            b0, b1 = buf[i], buf[i + 1]
            ln = b1 & 0x7F
            h = 2
            if ln == 126:
                if n - i < 4:
                    break
                ln = (buf[i + 2] << 8) | buf[i + 3]
                h = 4
            elif ln == 127:
                if n - i < 10:
                    break
                ln = struct.unpack_from(">Q", buf, i + 2)[0]
                h = 10
            if n - i < h + ln:
                break
            op = b0 & 0x0F
            if op == 1 or op == 2:
                c.frames += 1
                if latency:
                    try:
                        t = float(json.loads(buf[i + h:i + h + ln])["t"])
                        lat.append(now - t)
                        if kts is not None:
                            lat_k.append(kts - t)
                    except (ValueError, KeyError, TypeError):
                        err("unparsable event")
            elif op == 9:
                # Pong with the ping's payload (masked with key 0: unchanged).
                payload = buf[i + h:i + h + ln]
                try:
                    c.sock.send(bytes([0x8A, 0x80 | len(payload), 0, 0, 0, 0]) + payload)
                except OSError:
                    pass
            elif op == 8:
                close(c, "closed by server (close frame)")
                return
            i += h + ln
        c.buf = buf[i:]
        c.t_last = now

    def on_readable(c):
        kts = None
        try:
            if phase["name"] == "latency":
                data, anc, _f, _a = c.sock.recvmsg(262144, 256)
                for level, kind, blob in anc:
                    if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(blob) >= 16:
                        sec, nsec = struct.unpack_from("qq", blob)
                        kts = sec + nsec * 1e-9
            else:
                data = c.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            close(c, "recv: " + errno.errorcode.get(e.errno, str(e.errno)))
            return
        now = time.time()
        if not data:
            close(c, "closed by server before head" if c.state == "head" else "closed by server while open")
            return
        if phase["name"] == "burst" and c.state == "open":
            # Count events by their payload's marker (C speed: the client must
            # not be what limits the measured rate); frames are not parsed.
            chunk = c.carry + data
            c.frames += chunk.count(MARK)
            c.carry = chunk[-(len(MARK) - 1):]
            c.t_last = now
            # A ping (0x89: no payload byte or text-frame length is that) is
            # still answered, or a peer that pings would close us meanwhile.
            k = data.find(b"\x89")
            while 0 <= k < len(data) - 1:
                ln = data[k + 1] & 0x7F
                payload = data[k + 2:k + 2 + ln]
                if len(payload) == ln:
                    try:
                        c.sock.send(bytes([0x8A, 0x80 | ln, 0, 0, 0, 0]) + payload)
                    except OSError:
                        pass
                k = data.find(b"\x89", k + 2)
            return
        c.buf += data
        if c.state == "head":
            end = c.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head, c.buf = c.buf[:end], c.buf[end + 4:]
            lines = head.split(b"\r\n")
            parts = lines[0].split()
            status = parts[1].decode() if len(parts) >= 2 else "?"
            if status != "101":
                close(c, "status " + status)
                return
            want = base64.b64encode(hashlib.sha1(c.key + GUID).digest())
            hdrs = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(b":") for ln in lines[1:])}
            if hdrs.get(b"sec-websocket-accept") != want:
                close(c, "bad Sec-WebSocket-Accept")
                return
            c.state = "open"
            open_conns.append(c)
        frames(c, now, kts)

    request_tpl = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %%s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (a.path, a.host, a.port))

    def on_writable(c):
        e = c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if e:
            close(c, "connect: " + errno.errorcode.get(e, str(e)))
            return
        try:
            c.sock.send((request_tpl % c.key.decode()).encode())
        except OSError as ex:
            close(c, "send: " + errno.errorcode.get(ex.errno, str(ex.errno)))
            return
        c.state = "head"
        sel.modify(c.sock, selectors.EVENT_READ, c)

    def poll(timeout):
        for key, _mask in sel.select(timeout):
            c = key.data
            if c.state == "connect":
                on_writable(c)
            elif c.state != "closed":
                on_readable(c)

    # ---- 1-2: baseline, open
    out["rss_before_kb"] = rss_kb(a.rss_pid)
    t0 = time.monotonic()
    started, pending = 0, []
    while True:
        pending = [c for c in pending if c.state in ("connect", "head")]
        while started < a.sockets and len(pending) < a.batch:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            c = Sock(s)
            conns.append(c)
            started += 1
            rc = s.connect_ex((a.host, a.port))
            if rc not in (0, errno.EINPROGRESS):
                s.close()
                c.state = "closed"
                err("connect: " + errno.errorcode.get(rc, str(rc)))
                continue
            sel.register(s, selectors.EVENT_WRITE, c)
            pending.append(c)
        if started >= a.sockets and not pending:
            break
        if time.monotonic() - t0 > a.open_timeout:
            for c in pending:
                close(c, "timeout opening (%s)" % c.state)
            break
        poll(0.05)
    out["open_seconds"] = round(time.monotonic() - t0, 3)
    out["opened"] = len(open_conns)

    # ---- 3: settle, RSS held
    end = time.monotonic() + a.settle
    while time.monotonic() < end:
        poll(0.05)
    out["rss_held_kb"] = rss_kb(a.rss_pid)
    if a.rss_pid and out["rss_before_kb"] and out["rss_held_kb"] and out["opened"]:
        out["rss_per_socket_bytes"] = round((out["rss_held_kb"] - out["rss_before_kb"]) * 1024 / out["opened"])
    if a.health_path:
        try:
            st, body = http_get(a.host, a.port, a.health_path)
            out["health"] = json.loads(body) if st == 200 else {"status": st}
        except (OSError, ValueError) as e:
            out["health"] = {"error": repr(e)}

    def live():
        return [c for c in open_conns if c.state == "open"]

    # ---- 4: paced latency
    if a.events > 0 and open_conns:
        phase["name"] = "latency"
        base = [c.frames for c in open_conns]
        pub = {"sent": 0, "errors": []}
        done = threading.Event()

        def paced():
            for k in range(a.events):
                t_start = time.time()
                try:
                    st, _ = http_get(a.host, a.port, "%s?n=1&seq=%d" % (a.publish_path, k))
                    if st == 200:
                        pub["sent"] += 1
                    else:
                        pub["errors"].append("status %d" % st)
                except OSError as e:
                    pub["errors"].append(repr(e))
                delay = a.interval - (time.time() - t_start)
                if delay > 0:
                    time.sleep(delay)
            done.set()

        th = threading.Thread(target=paced, daemon=True)
        th.start()
        drain_end = None
        while True:
            poll(0.02)
            if done.is_set():
                drain_end = drain_end or time.monotonic() + a.drain
                got = [c.frames - b for c, b in zip(open_conns, base) if c.state == "open"]
                if all(g >= pub["sent"] for g in got) or time.monotonic() > drain_end:
                    break
        th.join(1)
        lat.sort()
        lat_k.sort()
        out["latency"] = {"events": pub["sent"], "deliveries": len(lat),
                          "expected": pub["sent"] * len(live()), "errors": pub["errors"][:5],
                          "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99),
                          "max_ms": round(lat[-1] * 1000, 3) if lat else None,
                          "kernel_p50_ms": pct(lat_k, 50), "kernel_p99_ms": pct(lat_k, 99)}

    # ---- 5: throughput under flow control
    if a.burst > 0 and open_conns:
        phase["name"] = "burst"
        sockets = live()
        base = {id(c): c.frames for c in sockets}
        state = {"published": 0, "min_done": 0, "errors": [], "t_first": None}
        lock = threading.Condition()
        done = threading.Event()

        def flood():
            seq = 100000
            while state["published"] < a.burst:
                with lock:
                    while state["published"] - state["min_done"] >= a.window:
                        if not lock.wait(10):
                            state["errors"].append("no progress for 10 s")
                            done.set()
                            return
                n = min(a.per, a.burst - state["published"])
                if state["t_first"] is None:
                    state["t_first"] = time.time()
                try:
                    st, _ = http_get(a.host, a.port, "%s?n=%d&seq=%d" % (a.publish_path, n, seq))
                    if st != 200:
                        state["errors"].append("status %d" % st)
                except OSError as e:
                    state["errors"].append(repr(e))
                seq += n
                with lock:
                    state["published"] += n
            done.set()

        cpu0, wall0 = cpu_seconds(a.rss_pid), time.monotonic()
        th = threading.Thread(target=flood, daemon=True)
        th.start()
        last_progress = time.monotonic()
        prev = -1
        while True:
            poll(0.005)
            alive = [c for c in sockets if c.state == "open"]
            m = min((c.frames - base[id(c)] for c in alive), default=0)
            with lock:
                state["min_done"] = m
                lock.notify()
            if m != prev:
                prev, last_progress = m, time.monotonic()
            if done.is_set() and m >= state["published"]:
                break
            if time.monotonic() - last_progress > a.drain:
                err("throughput: no progress for %.0f s" % a.drain)
                break
        th.join(1)
        cpu1, wall1 = cpu_seconds(a.rss_pid), time.monotonic()
        delivered = sum(c.frames - base[id(c)] for c in sockets)
        t_end = max((c.t_last for c in sockets), default=0.0)
        elapsed = t_end - state["t_first"] if state["t_first"] else None
        out["throughput"] = {"events": state["published"], "sockets": len(sockets),
                             "delivered": delivered, "expected": state["published"] * len(sockets),
                             "seconds": round(elapsed, 3) if elapsed else None,
                             "messages_per_s": round(delivered / elapsed) if elapsed else None,
                             "errors": state["errors"][:5]}
        if cpu0 is not None and cpu1 is not None and wall1 > wall0:
            # What the server's worker spent on the burst: its CPU share (if
            # it is under 100% this client or the window limited the rate)
            # and CPU time per message delivered (independent of both).
            out["throughput"]["server_cpu_pct"] = round(100 * (cpu1 - cpu0) / (wall1 - wall0))
            out["throughput"]["server_us_per_msg"] = round(1e6 * (cpu1 - cpu0) / delivered, 2) if delivered else None

    out["rss_end_kb"] = rss_kb(a.rss_pid)
    out["alive_at_end"] = len(live())
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
