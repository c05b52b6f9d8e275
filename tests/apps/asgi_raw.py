"""A raw ASGI 3 application for the ASGI tests (issue 9).

  /                    "hello" (Content-Length)
  /echo                the request body, read in pieces (http.request with more_body);
                       logs "asgi: echo got http.disconnect after N bytes" if the client leaves
  /scope               the scope as JSON (bytes as latin-1 strings)
  /gated?gate=P        streams "b1", then "b2" once the file P2 exists (no length)
  /sleep?s=S           asyncio.sleep(S), then "slept"
  /wait-disconnect[/ANY]?tag=T  never answers; logs "asgi: left before the answer tag=T" on http.disconnect
  /after?tag=T         answers, then works 0.5 s more and logs "asgi: after-work done tag=T"
  /ticks?tag=T         a block every 0.2 s until http.disconnect, which it logs
                       to stderr as "asgi: disconnect tag=T"
  /big?mb=N            N MiB in 64 KiB blocks (credit)
  /raise-before        raises before http.response.start         -> 500
  /raise-after         raises after the first body block         -> aborted
  /no-response         returns without sending anything          -> 500
  /hold?channel=C      an M0-Hold: stream response
  /publish?channel=C   m0pub.publish(C, "from-asgi") -> the id
  /apublish?channel=C  await m0pub.apublish(C, "from-asgi") -> the id, or
                       "BrokerError: ..." when the broker could not take it
  /pathsend?path=P     http.response.pathsend of P
  /status?code=N       "ok" with status N
  /pid                 the worker pid

Lifespan: startup puts {"started": pid} in scope["state"]; shutdown appends
a line to the file named by $ASGI_SHUTDOWN_LOG, if set.
"""

import asyncio
import json
import os
import sys
from urllib.parse import parse_qs

import m0pub


def _q(scope):
    return {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}


async def _text(send, body, status=200, headers=()):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain")] + list(headers)})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(scope, receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            scope["state"]["started"] = os.getpid()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            log = os.environ.get("ASGI_SHUTDOWN_LOG")
            if log:
                with open(log, "a") as f:
                    f.write("shutdown %d\n" % os.getpid())
            await send({"type": "lifespan.shutdown.complete"})
            return


def _jsonable(v):
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        return await _lifespan(scope, receive, send)
    path = scope["path"]
    q = _q(scope)
    if path == "/":
        return await _text(send, b"hello")
    if path == "/echo":
        pieces = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                sys.stderr.write("asgi: echo got http.disconnect after %d bytes\n" % len(b"".join(pieces)))
                return
            pieces.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        return await _text(send, b"".join(pieces), headers=[(b"x-pieces", str(len(pieces)).encode())])
    if path == "/status":
        return await _text(send, b"ok", status=int(q["code"]))
    if path == "/scope":
        return await _text(send, json.dumps(_jsonable(dict(scope))).encode())
    if path == "/gated":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"b1", "more_body": True})
        while not os.path.exists(q["gate"] + "2"):
            await asyncio.sleep(0.005)
        await send({"type": "http.response.body", "body": b"b2"})
        return
    if path == "/wait-disconnect" or path.startswith("/wait-disconnect/"):
        # Never answers: waits for the client to leave.
        while (await receive())["type"] != "http.disconnect":
            pass
        sys.stderr.write("asgi: left before the answer tag=%s\n" % _q(scope).get("tag", "-"))
        sys.stderr.flush()
        return
    if path == "/after":
        # Work after the response is complete (as Django's response.close()
        # in a thread): a stopping worker lets it finish.
        await _text(send, b"answered")
        await asyncio.sleep(0.5)
        sys.stderr.write("asgi: after-work done tag=%s\n" % _q(scope).get("tag", "-"))
        sys.stderr.flush()
        return
    if path == "/sleep":
        await asyncio.sleep(float(q.get("s", "1.5")))
        return await _text(send, b"slept")
    if path == "/ticks":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})

        async def watch():
            while (await receive())["type"] != "http.disconnect":
                pass
            print("asgi: disconnect tag=%s" % q.get("tag", "-"), file=sys.stderr, flush=True)
        watcher = asyncio.ensure_future(watch())
        n = 0
        try:
            while not watcher.done():
                n += 1
                await send({"type": "http.response.body", "body": b"tick %d\n" % n, "more_body": True})
                await asyncio.sleep(0.2)
        except OSError:
            pass
        await watcher
        return
    if path == "/big":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream")]})
        block = b"z" * 65536
        for _ in range(int(q.get("mb", "100")) * 16):
            await send({"type": "http.response.body", "body": block, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/raise-before":
        raise RuntimeError("asgi app raised before the head")
    if path == "/raise-after":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        raise RuntimeError("asgi app raised after the head")
    if path == "/no-response":
        return
    if path == "/hold":
        return await _text(send, b": connected worker=%d\n\n" % os.getpid(), headers=[
            (b"m0-hold", b"stream"), (b"m0-channel", q.get("channel", "news").encode())])
    if path == "/publish":
        return await _text(send, str(m0pub.publish(q.get("channel", "news"), "from-asgi")).encode())
    if path == "/apublish":
        try:
            got = await m0pub.apublish(q.get("channel", "news"), "from-asgi")
        except m0pub.BrokerError as e:
            got = "BrokerError: %s" % e
        return await _text(send, str(got).encode())
    if path == "/pathsend":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.pathsend", "path": q["path"]})
        return
    return await _text(send, str(os.getpid()).encode())
