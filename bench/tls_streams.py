#!/usr/bin/env python3
"""Hold N idle SSE streams, plain or over TLS, and print the worker's RSS
per stream (bench/tls.sh). Blocking sockets, opened one after another (the
C hold client, bench/hold_client.c, speaks no TLS).

    tls_streams.py --port P --pid WORKER_PID -n 2000 [--tls] [--path /events]

Prints one JSON object: n, rss_before_kb, rss_after_kb, kib_per_stream.
"""
import argparse
import json
import socket
import ssl


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def open_stream(port, path, ctx):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if ctx is not None:
        s = ctx.wrap_socket(s, server_hostname="localhost")
    s.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n" % path.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            raise ConnectionError("closed before the head")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise ConnectionError(head[:200])
    return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--tls", action="store_true")
    ap.add_argument("--path", default="/events")
    a = ap.parse_args()
    ctx = None
    if a.tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    warm = [open_stream(a.port, a.path, ctx) for _ in range(50)]     # one-off allocations first
    before = rss_kb(a.pid)
    held = [open_stream(a.port, a.path, ctx) for _ in range(a.n)]
    after = rss_kb(a.pid)
    print(json.dumps({"n": a.n, "rss_before_kb": before, "rss_after_kb": after,
                      "kib_per_stream": round((after - before) / a.n, 2)}))
    for s in warm + held:
        s.close()


if __name__ == "__main__":
    main()
