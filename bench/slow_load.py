#!/usr/bin/env python3
"""Keep C requests to a slow URL in flight until stopped (bench/mixed.sh).

Each of C threads loops: open a connection, GET the URL (Connection: close),
read the whole response, and immediately issue the next one.  Runs until
SIGTERM/SIGINT or --max-seconds, then writes a JSON summary to --out:

  started, completed, ok (status 200), errors {kind: count}, in_flight_at_stop,
  latency_ms {p50, max} of completed requests, first_all_in_flight_s

--ready FILE is created once all C threads have sent their first request
(the requests are in flight: on the wire, or queued in the server's backlog).

Standard library only.
"""

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from urllib.parse import urlsplit


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url")
    ap.add_argument("-c", "--concurrency", type=int, default=6)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--timeout", type=float, default=60.0, help="per-request socket timeout")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ready")
    a = ap.parse_args()

    u = urlsplit(a.url)
    host, port = u.hostname, u.port or 80
    target = (u.path or "/") + ("?" + u.query if u.query else "")
    request = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\nUser-Agent: slow_load\r\n\r\n"
               % (target, host, port)).encode()

    lock = threading.Lock()
    st = {"started": 0, "completed": 0, "ok": 0, "errors": {}, "in_flight": 0, "lat": []}
    first_sent = threading.Barrier(a.concurrency + 1)
    stop = threading.Event()
    t0 = time.monotonic()

    def one():
        s = socket.create_connection((host, port), timeout=a.timeout)
        try:
            s.sendall(request)
            return s
        except BaseException:
            s.close()
            raise

    def worker(first):
        while not stop.is_set():
            with lock:
                st["started"] += 1
                st["in_flight"] += 1
            begin = time.monotonic()
            kind = None
            status = None
            try:
                s = one()
                if first:
                    first = False
                    try:
                        first_sent.wait(timeout=a.timeout)
                    except threading.BrokenBarrierError:
                        pass
                with s:
                    data = b""
                    while True:
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                line = data.split(b"\r\n", 1)[0].split()
                if len(line) >= 2 and line[1].isdigit():
                    status = int(line[1])
                else:
                    kind = "no status line (%d bytes)" % len(data)
            except socket.timeout:
                kind = "timeout"
            except OSError as e:
                kind = type(e).__name__
            if first:              # failed before the barrier: do not hold the others
                first = False
                try:
                    first_sent.wait(timeout=0.01)
                except threading.BrokenBarrierError:
                    pass
            with lock:
                st["in_flight"] -= 1
                if stop.is_set():
                    break
                st["completed"] += 1
                if status == 200:
                    st["ok"] += 1
                    st["lat"].append((time.monotonic() - begin) * 1000.0)
                else:
                    kind = kind or "status %s" % status
                if kind:
                    st["errors"][kind] = st["errors"].get(kind, 0) + 1
            if kind and not stop.is_set():
                time.sleep(0.05)   # do not spin on a refusing server

    def finish(*_):
        stop.set()
        with lock:
            lat = sorted(st["lat"])
            out = {
                "url": a.url,
                "concurrency": a.concurrency,
                "seconds": round(time.monotonic() - t0, 3),
                "started": st["started"],
                "completed": st["completed"],
                "ok": st["ok"],
                "errors": st["errors"],
                "in_flight_at_stop": st["in_flight"],
                "latency_ms": {
                    "p50": round(lat[len(lat) // 2], 1) if lat else None,
                    "max": round(lat[-1], 1) if lat else None,
                },
                "first_all_in_flight_s": st.get("ready_s"),
            }
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, a.out)
        sys.stdout.flush()
        os._exit(0)           # threads may sit in recv(); do not wait for them

    signal.signal(signal.SIGTERM, finish)
    signal.signal(signal.SIGINT, finish)
    for _ in range(a.concurrency):
        threading.Thread(target=worker, args=(True,), daemon=True).start()
    try:
        first_sent.wait(timeout=a.timeout)
    except threading.BrokenBarrierError:
        pass
    st["ready_s"] = round(time.monotonic() - t0, 3)
    if a.ready:
        with open(a.ready, "w") as f:
            f.write("ready\n")
    deadline = t0 + a.max_seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)
    finish()


if __name__ == "__main__":
    main()
