"""A plain WSGI app for the occupancy, presence and history tests
(tests/e2e/test_presence.py, issue 32).

  /events?channel=C&sub=S&since=N   hold an SSE stream on C (a comma list
                                    for several), counted for sub S
                                    (M0-Presence) when given, starting after
                                    event N when the request has no
                                    Last-Event-ID; its first bytes name the
                                    worker pid
  /info?channel=C                   m0pub.channel_info(C) as JSON
  /presence?channel=C&limit=N       m0pub.presence(C, limit=N) as JSON
  /history?channel=C&since=N&limit=L  m0pub.history(...) as JSON (no since:
                                    None)
  /publish?channel=C&data=D&event=E&n=K  publish; answers the ids "1,2"
  /url?channels=a,b&sub=S           m0pub.grant_url(channels, sub=S)
  /time?what=info|presence&channel=C&n=N&limit=L
                                    N calls from this view: the seconds per
                                    call, as JSON {"per_call": s, "last": ...}
  anything else                     the worker pid

When the file PRESENCE_APP_SLOW_BOOT names exists, importing the app takes
3 s (a replacement worker that is slow to come).
"""

import json
import os
import time
from urllib.parse import parse_qs

import m0pub
from m0serve._ws import stream_headers

if os.environ.get("PRESENCE_APP_SLOW_BOOT") and os.path.exists(os.environ["PRESENCE_APP_SLOW_BOOT"]):
    time.sleep(3)


def _json(start_response, obj, status="200 OK"):
    start_response(status, [("Content-Type", "application/json")])
    return [json.dumps(obj).encode()]


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    channel = q.get("channel", "news")
    if path == "/events":
        since = int(q["since"]) if "since" in q else None
        headers = [("Content-Type", "text/event-stream")]
        headers += list(stream_headers(channel, q.get("sub"), since).items())
        start_response("200 OK", headers)
        return [b": connected worker=%d\n\n" % os.getpid()]
    if path == "/info":
        return _json(start_response, m0pub.channel_info(channel))
    if path == "/presence":
        return _json(start_response, m0pub.presence(channel, limit=int(q.get("limit", "1000"))))
    if path == "/history":
        since = int(q["since"]) if "since" in q else None
        return _json(start_response, m0pub.history(channel, since=since, limit=int(q.get("limit", "100"))))
    if path == "/publish":
        ids = [m0pub.publish(channel, q.get("data", "event %d" % i), event=q.get("event"))
               for i in range(int(q.get("n", "1")))]
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [",".join(str(i) for i in ids).encode()]
    if path == "/url":
        body = m0pub.grant_url(q.get("channels", "news").split(","), sub=q.get("sub"))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [body.encode()]
    if path == "/time":
        n = int(q.get("n", "100"))
        limit = int(q.get("limit", "1000"))
        call = (lambda: m0pub.channel_info(channel)) if q.get("what") == "info" else \
            (lambda: m0pub.presence(channel, limit=limit))
        last = call()
        t0 = time.perf_counter()
        for _ in range(n):
            last = call()
        per = (time.perf_counter() - t0) / n
        size = last["connections"] if isinstance(last, dict) and "connections" in last else len(last)
        return _json(start_response, {"per_call": per, "size": size})
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
