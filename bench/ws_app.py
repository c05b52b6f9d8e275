"""WSGI app for bench/ws.sh (m0serve --realtime).

  /ws                   a WebSocket on channel "news": the view approves it
                        (M0-Hold: websocket), m0serve answers 101 and holds it
  /publish?n=N&seq=K    publish N events on "news", seq K, K+1, ...; each
                        event's data is JSON {"t": time.time() at publish,
                        "seq": ...}, which a socket receives as one text frame
  anything else         "ok" (readiness probe)

The same behaviour as bench/asgi_ws.py, the peers' endpoint.
"""

import json
import time
from urllib.parse import parse_qs

import m0pub


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/ws":
        start_response("200 OK", [("M0-Hold", "websocket"), ("M0-Channel", "news"),
                                  ("Content-Length", "0")])
        return [b""]
    if path == "/publish":
        q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        seq = int(q.get("seq", "0"))
        n = int(q.get("n", "1"))
        for i in range(n):
            m0pub.publish("news", json.dumps({"t": time.time(), "seq": seq + i}))
        body = str(n).encode()
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]
