"""A plain WSGI app for the broker tests (tests/e2e/test_broker.py).

  /events?channel=C            hold an SSE stream on C (default "news");
                               its first bytes name the worker pid
  /publish?channel=C&n=N&event=E&data=D&key=K
                               publish N events (with key K: m0pub's
                               idempotency key); answers the ids "1,2,3",
                               or 503 "BrokerError: ..." when the broker
                               could not take them (the exception's class
                               name: PublishOutcomeUnknown when the event
                               was sent and not answered)
  anything else                the worker pid
"""

import os
from urllib.parse import parse_qs

import m0pub


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/events":
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"),
                                  ("M0-Channel", q.get("channel", "news"))])
        return [b": connected worker=%d\n\n" % os.getpid()]
    if path == "/publish":
        ids = []
        try:
            for i in range(int(q.get("n", "1"))):
                ids.append(m0pub.publish(q.get("channel", "news"), q.get("data", "event %d" % i),
                                         event=q.get("event"), key=q.get("key")))
        except m0pub.BrokerError as e:
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [("%s: %s" % (type(e).__name__, e)).encode()]
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [",".join(str(i) for i in ids).encode()]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
