"""WSGI app for bench/stream.sh: responses produced by a generator, with no
Content-Length (PEP 3333 "Buffering and Streaming": every block must go out
as it is yielded).

  /mb?kb=1024&block=4096   KB kibibytes in BLOCK-byte blocks, yielded as fast
                           as the server takes them (default 1 MiB in 4 KiB)
  /sse?n=20&interval=0.1   n Server-Sent Events, one every INTERVAL seconds
                           (the first at once); each event's data is JSON
                           {"t": time.time() when yielded, "i": i}
  anything else            "ok" (readiness probe)

Every server under test (m0serve, gunicorn gthread, uWSGI threads) loads
this same ``application``.
"""

import json
import time
from urllib.parse import parse_qs

BLOCK = b"x" * 65536


def _query(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _mb(kb, block):
    total = kb * 1024
    piece = BLOCK[:block]
    while total >= block:
        yield piece
        total -= block
    if total:
        yield BLOCK[:total]


def _sse(n, interval):
    for i in range(n):
        if i:
            time.sleep(interval)
        yield ("data: %s\n\n" % json.dumps({"t": time.time(), "i": i})).encode()


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/mb":
        q = _query(environ)
        kb = min(max(int(q.get("kb", "1024")), 1), 1 << 20)
        block = min(max(int(q.get("block", "4096")), 1), len(BLOCK))
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return _mb(kb, block)
    if path == "/sse":
        q = _query(environ)
        n = min(max(int(q.get("n", "20")), 1), 100000)
        interval = min(max(float(q.get("interval", "0.1")), 0.0), 60.0)
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])
        return _sse(n, interval)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
