"""A plain WSGI app for the realtime tests that do not need Django.

  /events?channel=C           hold an SSE stream on C (default "news")
  /publish?channel=C&n=N&size=B&event=E
                              publish N events of B bytes (default 1, short);
                              answers the ids as "1,2,3"
  /ws?channel=C                approves a WebSocket on C for any method, body
                              "ws approved" (what a degraded answer shows)
  /wsclient                   approves a WebSocket on "clients"; each message is
                              answered with "METHOD REMOTE_ADDR scheme"
  /pid                        the worker pid
"""

import os
from urllib.parse import parse_qs

import m0pub


def _q(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = _q(environ)
    if path == "/events":
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"),
                                  ("M0-Channel", q.get("channel", "news"))])
        return [b": connected worker=%d\n\n" % os.getpid()]
    if path == "/ws":
        start_response("200 OK", [("Content-Type", "text/plain"), ("M0-Hold", "websocket"),
                                  ("M0-Channel", q.get("channel", "news"))])
        return [b"ws approved"]
    if path == "/wsclient":
        # A message's request (POST to the socket's path) answers with the
        # client it speaks for: the handshake's, once the socket was idle.
        start_response("200 OK", [("Content-Type", "text/plain"), ("M0-Hold", "websocket"),
                                  ("M0-Channel", "clients")])
        return [("%s %s %s" % (environ["REQUEST_METHOD"], environ.get("REMOTE_ADDR"),
                               environ["wsgi.url_scheme"])).encode()]
    if path == "/publish":
        size = int(q.get("size", "0"))
        ids = []
        for i in range(int(q.get("n", "1"))):
            data = ("x" * size) if size else "event %d" % i
            ids.append(m0pub.publish(q.get("channel", "news"), data, event=q.get("event")))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [",".join(str(i) for i in ids).encode()]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
