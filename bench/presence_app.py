"""WSGI app for bench/presence.sh (issue 32): held streams with subs, and
channel_info / presence timed from a view.

  /events?sub=auto|none   hold an SSE stream on "news"; auto: counted for
                          the sub "uK", K cycling through PRESENCE_SUBS
                          (default 1000) as streams open (M0-Presence)
  /publish?n=1&seq=K      publish n events on "news", data {"t": time.time(),
                          "seq": K, "i": i} (bench/hold_client times them)
  /info                   m0pub.channel_info("news") as JSON
  /time?what=info|presence|count|list|loop&n=N&limit=L
                          N calls from this view: the time per call (count: the
                          shared table alone; loop: one round trip to the view's
                          event loop, what asking each loop would cost per loop)
  anything else           "ok"
"""

import itertools
import json
import os
import time
from urllib.parse import parse_qs

import m0pub

SUBS = int(os.environ.get("PRESENCE_SUBS", "1000"))
_next = itertools.count()


def _json(start_response, obj):
    body = json.dumps(obj).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/events":
        headers = [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"), ("M0-Channel", "news")]
        if q.get("sub") == "auto":
            headers.append(("M0-Presence", "u%d" % (next(_next) % SUBS)))
        start_response("200 OK", headers)
        return [b": hi\n\n"]
    if path == "/publish":
        seq = int(q.get("seq", "0"))
        ids = [m0pub.publish("news", json.dumps({"t": time.time(), "seq": seq, "i": i}))
               for i in range(int(q.get("n", "1")))]
        body = ",".join(str(x) for x in ids).encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/info":
        return _json(start_response, m0pub.channel_info("news"))
    if path == "/time":
        n = int(q.get("n", "1000"))
        limit = int(q.get("limit", "1000"))
        if q.get("what") == "presence":
            call = lambda: m0pub.presence("news", limit=limit)          # noqa: E731
        elif q.get("what") == "count":                                  # the shared table alone
            import m0
            call = lambda: {"connections": m0._presence_info(b"news")[0]}    # noqa: E731
        elif q.get("what") == "list":                                   # the shared table's listing alone
            import m0
            call = lambda: m0._presence_list(b"news", limit)            # noqa: E731
        elif q.get("what") == "loop":                                   # one round trip to the view's loop
            import m0
            call = lambda: {"connections": len(m0._history(b"news", 0, True, 0)[0])}   # noqa: E731
        else:
            call = lambda: m0pub.channel_info("news")                   # noqa: E731
        last = call()
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            last = call()
            samples.append(time.perf_counter() - t0)
        samples.sort()
        size = last["connections"] if "connections" in last else len(last)
        return _json(start_response, {"calls": n, "size": size,
                                      "mean_us": sum(samples) / n * 1e6,
                                      "p50_us": samples[n // 2] * 1e6,
                                      "p99_us": samples[min(n - 1, n * 99 // 100)] * 1e6})
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
