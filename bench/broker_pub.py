#!/usr/bin/env python3
"""Sustained publishes per second through one Redis (bench/broker.sh).

Two publishers, measured separately, each as fast as it can for --seconds:

  --mode m0pub    --procs P processes outside any server, each calling
                  m0pub.publish in a loop (the stdlib RESP client; M0_BROKER
                  from --url): what a Celery worker or cron job gets;
  --mode server   --concurrency C clients calling GET --port/publish?n=K in
                  a loop on an m0serve host with --broker: each request
                  publishes K events from a view (m0.publish: hiredis, one
                  blocking round trip per event on the pool thread).

Prints one JSON object: events, seconds, rate (events/s), errors, and for
m0pub the per-call latency p50/p99 in ms. Standard library only.
"""

import argparse
import json
import multiprocessing
import os
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def pctl(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def m0pub_worker(url, seconds, channel, queue):
    os.environ["M0_BROKER"] = url
    import m0pub
    lat, n, errors = [], 0, 0
    data = json.dumps({"t": 0, "pad": "x" * 40})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        try:
            m0pub.publish(channel, data)
            n += 1
        except m0pub.BrokerError:
            errors += 1
        if n % 16 == 0:
            lat.append((time.perf_counter() - t0) * 1000)
    queue.put((n, errors, lat))


def http_get(port, target):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data.partition(b"\r\n\r\n")[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["m0pub", "server"], required=True)
    ap.add_argument("--url", default="")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--n", type=int, default=200, help="events per /publish request")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--channel", default="bench")
    a = ap.parse_args()
    out = {"mode": a.mode}
    if a.mode == "m0pub":
        q = multiprocessing.Queue()
        procs = [multiprocessing.Process(target=m0pub_worker, args=(a.url, a.seconds, a.channel, q))
                 for _ in range(a.procs)]
        t0 = time.monotonic()
        for p in procs:
            p.start()
        results = [q.get(timeout=a.seconds + 60) for _ in procs]
        for p in procs:
            p.join(30)
        elapsed = time.monotonic() - t0
        events = sum(r[0] for r in results)
        lat = [x for r in results for x in r[2]]
        out.update(procs=a.procs, events=events, errors=sum(r[1] for r in results), seconds=round(elapsed, 3),
                   rate=round(events / a.seconds), p50_ms=pctl(lat, 0.5), p99_ms=pctl(lat, 0.99))
    else:
        counts, errors = [0], [0]
        lock = threading.Lock()
        end = time.monotonic() + a.seconds

        def client():
            while time.monotonic() < end:
                try:
                    st, body = http_get(a.port, "/publish?n=%d&seq=0" % a.n)
                except OSError:
                    st, body = 0, b""
                with lock:
                    if st == 200:
                        counts[0] += body.count(b",") + 1
                    else:
                        errors[0] += 1

        t0 = time.monotonic()
        threads = [threading.Thread(target=client) for _ in range(a.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        out.update(concurrency=a.concurrency, per_request=a.n, events=counts[0], errors=errors[0],
                   seconds=round(elapsed, 3), rate=round(counts[0] / elapsed))
    for k in ("p50_ms", "p99_ms"):
        if out.get(k) is not None:
            out[k] = round(out[k], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
