"""The metrics tests' application (plain WSGI, realtime).

  /hello          200 "ok"
  /missing        404 from the view
  /fail           500 from the view
  /events         holds an SSE stream on channel "m" (M0-Hold)
  /publish        publishes one event on "m"
  /pid            the worker's pid
  /block          waits (at most 20 s) until the file $METRICS_APP_RELEASE exists

Every call appends one line to the file $METRICS_APP_CALLS (when set), so
a test can tell whether the server called into Python.
"""

import os
import time

import m0pub


def _note():
    calls = os.environ.get("METRICS_APP_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write("%d\n" % os.getpid())


def application(environ, start_response):
    _note()
    path = environ["PATH_INFO"]
    if path == "/events":
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"),
                                  ("M0-Channel", "m")])
        return [b": connected worker=%d\n\n" % os.getpid()]
    if path == "/publish":
        m0pub.publish("m", "hello")
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"published"]
    if path == "/block":
        release = os.environ["METRICS_APP_RELEASE"]
        deadline = time.monotonic() + 20
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.02)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"released"]
    if path == "/missing":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"no"]
    if path == "/fail":
        start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
        return [b"failed"]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode() if path == "/pid" else b"ok"]
