"""Applications that misbehave in ways a server must survive.

  /endless              yields b"x" forever, no Content-Length
  /endless-declared     declares Content-Length: 5 and yields forever
  /no-reason            status "200" without a reason phrase
  /connection-list      sends "Connection: Close, foo"
  /informational        start_response("103 Early Hints") (refused: 1xx are the server's)
  /status?s=LINE        start_response(LINE): the status string as the application gives it
  /environ              the str-valued environ as JSON
"""

import itertools
import json
from urllib.parse import unquote


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/endless":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (b"x" for _ in itertools.count())
    if path == "/endless-declared":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
        return (b"xy" for _ in itertools.count())
    if path == "/no-reason":
        start_response("200", [("Content-Length", "2")])
        return [b"ok"]
    if path == "/connection-list":
        start_response("200 OK", [("Content-Length", "2"), ("Connection", "Close, foo")])
        return [b"ok"]
    if path == "/status":
        start_response(unquote(environ["QUERY_STRING"][2:]), [("Content-Length", "2")])
        return [b"ok"]
    if path == "/informational":
        start_response("103 Early Hints", [])
        return [b""]
    body = json.dumps({k: v for k, v in environ.items() if isinstance(v, str)}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
