"""WSGI app for bench/mixed.sh: a fast route next to a slow (sleeping) one.

  /fast          5-byte text/plain body, no work
  /slow?s=1.5    time.sleep(s) (default 1.5, capped at 30), then a short body
  anything else  404

Every server under test (m0serve, gunicorn sync/gthread, uWSGI) loads this
same ``application``.
"""

import time
from urllib.parse import parse_qs

FAST = b"fast\n"
FAST_HEADERS = [("Content-Type", "text/plain"), ("Content-Length", str(len(FAST)))]


def application(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/fast":
        start_response("200 OK", list(FAST_HEADERS))
        return [FAST]
    if path == "/slow":
        try:
            s = float(parse_qs(environ.get("QUERY_STRING", "")).get("s", ["1.5"])[0])
        except ValueError:
            s = 1.5
        s = min(max(s, 0.0), 30.0)
        time.sleep(s)
        body = b"slept %.3f\n" % s
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "10")])
    return [b"not found\n"]
