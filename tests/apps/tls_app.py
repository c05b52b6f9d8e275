"""The application of the TLS tests (tests/e2e/test_tls.py, issue 31): one
WSGI callable and one ASGI callable, mounted side by side.

WSGI (``tls_app:application``):
  /env                 JSON of the str-valued environ (wsgi.url_scheme too)
  /pid                 the worker's pid
  /big?n=N&chunk=C     N bytes from a generator, C at a time (a streamed body)
  /echo                the request body back (any framing)
  /slow?s=S            "slept" after S seconds (a request in flight across a reload)
  /events?channel=C    an SSE hold on C
  /ws?channel=C        a WebSocket hold on C
  /publish?channel=C&data=D[&size=N]   m0pub.publish(C, D, or N x's): the id

ASGI (``tls_app:asgi_app``, mounted at /a):
  /a/scope             the scope as JSON (extensions["tls"] included)
  /a/stream?n=N        N chunks of 64 KiB, more_body each (credit: the loop's window)
  /a/ws                a websocket: the scope's scheme and tls_version first, then an echo
"""

import json
import os
import time
from urllib.parse import parse_qs

import m0pub


def _q(qs):
    return {k: v[0] for k, v in parse_qs(qs).items()}


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = _q(environ.get("QUERY_STRING", ""))
    if path == "/env":
        body = json.dumps({k: v for k, v in environ.items() if isinstance(v, str)}).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]
    if path == "/pid":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(os.getpid()).encode()]
    if path == "/big":
        n, chunk = int(q.get("n", "1048576")), int(q.get("chunk", "65536"))

        def gen():
            left, i = n, 0
            while left > 0:
                k = min(chunk, left)
                yield bytes([65 + i % 26]) * k
                left -= k
                i += 1

        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return gen()
    if path == "/echo":
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return [body]
    if path == "/slow":
        time.sleep(float(q.get("s", "1")))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"slept"]
    if path == "/events":
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"),
                                  ("M0-Channel", q.get("channel", "news"))])
        return [b": connected\n\n"]
    if path == "/ws":
        start_response("200 OK", [("Content-Type", "text/plain"), ("M0-Hold", "websocket"),
                                  ("M0-Channel", q.get("channel", "news"))])
        return [b"ws approved"]
    if path == "/publish":
        data = "x" * int(q["size"]) if "size" in q else q.get("data", "hello")
        event_id = m0pub.publish(q.get("channel", "news"), data)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(event_id).encode()]
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not here"]


def _jsonable(scope):
    out = {}
    for k, v in scope.items():
        if k == "state":
            continue
        if isinstance(v, bytes):
            v = v.decode("latin-1")
        elif isinstance(v, (list, tuple)):
            v = [list(x) if isinstance(x, tuple) else x for x in v]
            v = [[y.decode("latin-1") if isinstance(y, bytes) else y for y in x] if isinstance(x, list) else x
                 for x in v]
        out[k] = v
    return out


async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif m["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if scope["type"] == "websocket":
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        tls = scope.get("extensions", {}).get("tls", {})
        await send({"type": "websocket.send", "text": json.dumps({"scheme": scope["scheme"],
                                                                   "tls_version": tls.get("tls_version")})})
        while True:
            m = await receive()
            if m["type"] == "websocket.disconnect":
                return
            if m.get("text") is not None:
                await send({"type": "websocket.send", "text": m["text"]})
            else:
                await send({"type": "websocket.send", "bytes": m["bytes"]})
    if path == "/a/scope":
        body = json.dumps(_jsonable(scope)).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    if path == "/a/stream":
        n = int(_q(scope["query_string"].decode()).get("n", "16"))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream")]})
        for i in range(n):
            await send({"type": "http.response.body", "body": bytes([97 + i % 26]) * 65536, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b"not here"})
