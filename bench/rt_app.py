"""WSGI app for bench/realtime.sh (m0serve --realtime).

  /events            hold an SSE stream on channel "news" (the C loop keeps it;
                     the first body chunk is the comment ": hi")
  /publish?n=1&seq=K publish n events on "news"; each event's data is JSON
                     {"t": time.time() at publish, "seq": K, "i": i}
  anything else      "ok" (readiness probe)

The latency client (bench/sse_hold.py) compares its receive time with "t";
client and server run on the same machine, so they share the clock.
"""

import json
import time
from urllib.parse import parse_qs

import m0pub

_EVENTS_HEADERS = [
    ("Content-Type", "text/event-stream"),
    ("M0-Hold", "stream"),
    ("M0-Channel", "news"),
]


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/events":
        start_response("200 OK", list(_EVENTS_HEADERS))
        return [b": hi\n\n"]
    if path == "/publish":
        q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        seq = int(q.get("seq", "0"))
        ids = []
        for i in range(int(q.get("n", "1"))):
            ids.append(m0pub.publish("news", json.dumps({"t": time.time(), "seq": seq, "i": i})))
        body = ",".join(str(x) for x in ids).encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
