"""A raw ASGI 3 application for the ASGI WebSocket tests (issue 9).

  /ws/echo?tag=T       accepts (subprotocol "chat" when offered), echoes text
                       as text and bytes as bytes; the text "close:CODE" closes
                       with CODE and reason "bye"; logs "asgi-ws: disconnect
                       tag=T code=C reason=R" to stderr when the socket ends
  /ws/scope            accepts and sends the scope as JSON text
  /ws/headers          accepts with a Set-Cookie header and an M0-free extra field
  /ws/deny             returns without accepting                 -> 403
  /ws/close-first      websocket.close before accept              -> 403
  /ws/raise-before     raises before accepting                    -> 403
  /ws/raise-after      accepts, sends "x", raises                 -> close 1011
  /ws/return           accepts, sends "bye", returns              -> close 1000
  /ws/http-deny        a denial response (401 "no", extension)
  /ws/big?mb=N         accepts, sends N MiB in 64 KiB binary messages, then "end"
  /ws/hold?channel=C   accepts with M0-Channel: C (events from m0pub.publish)
  /ws/count?tag=T&delay=S  accepts, waits S seconds, then counts messages until the
                       socket ends: logs "asgi-ws: count tag=T n=N code=C"
  /ws/deny-late        awaits receive() again before accepting; logs what it gets
  /ws/hold-blast?channel=C&n=N&s=S  accepts with M0-Channel: C, sends N binary
                       messages of S bytes, then "end"
  /ws/one?s=S          accepts, sends one binary message of S bytes, then "end"
  /ws/proto-header     accepts with a Sec-WebSocket-Protocol header (no subprotocol
                       key) and an Upgrade header of its own
  /ws/receive-first    Quart's shape: a task awaits receive() (connect, then the
                       messages) before the route accepts; the route echoes what
                       that task queues, as "got: TEXT"
  /publish?channel=C   m0pub.publish(C, "to-sockets") -> the id
  anything else        HTTP "plain"
"""

import asyncio
import json
import sys

import m0pub
from asgi_raw import _jsonable, _q


async def echo(scope, receive, send):
    tag = _q(scope).get("tag", "-")
    assert (await receive())["type"] == "websocket.connect"
    proto = "chat" if "chat" in scope["subprotocols"] else None
    await send({"type": "websocket.accept", "subprotocol": proto})
    while True:
        m = await receive()
        if m["type"] == "websocket.disconnect":
            sys.stderr.write("asgi-ws: disconnect tag=%s code=%s reason=%r\n" % (tag, m["code"], m.get("reason")))
            sys.stderr.flush()
            return
        if m.get("text") is not None:
            if m["text"].startswith("close:"):
                await send({"type": "websocket.close", "code": int(m["text"][6:]), "reason": "bye"})
                continue
            await send({"type": "websocket.send", "text": m["text"]})
        else:
            await send({"type": "websocket.send", "bytes": m["bytes"]})


async def receive_first(receive, send):
    """A receive() already pending when websocket.accept is sent (Quart's
    ASGIWebsocketConnection starts its message task before the route runs,
    and the route accepts lazily): the messages that arrive after the
    accept must reach it."""
    connected = asyncio.Event()
    inbox = asyncio.Queue()

    async def pump():
        while True:
            m = await receive()
            if m["type"] == "websocket.connect":
                connected.set()              # and straight back into receive(), before the accept
                continue
            await inbox.put(m)
            if m["type"] == "websocket.disconnect":
                return

    task = asyncio.ensure_future(pump())
    await connected.wait()                   # pump() is inside receive() again by now
    await send({"type": "websocket.accept"})
    try:
        while True:
            m = await inbox.get()
            if m["type"] == "websocket.disconnect":
                return
            await send({"type": "websocket.send", "text": "got: %s" % m["text"]})
    finally:
        task.cancel()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if scope["type"] == "http":
        if path == "/publish":
            body = str(m0pub.publish(_q(scope)["channel"], "to-sockets")).encode()
        else:
            body = b"plain"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": body})
        return
    if path == "/ws/echo":
        return await echo(scope, receive, send)
    if path == "/ws/receive-first":
        return await receive_first(receive, send)
    await receive()                                   # websocket.connect
    if path == "/ws/scope":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": json.dumps(_jsonable({k: v for k, v in scope.items()
                                                                          if k != "state"}))})
        await receive()
    elif path == "/ws/headers":
        await send({"type": "websocket.accept", "headers": [(b"set-cookie", b"a=1; Path=/"), (b"x-extra", b"yes")]})
        await send({"type": "websocket.send", "text": "hi"})
        await receive()
    elif path == "/ws/deny":
        return
    elif path == "/ws/close-first":
        await send({"type": "websocket.close"})
    elif path == "/ws/raise-before":
        raise RuntimeError("refusing this socket by raising")
    elif path == "/ws/raise-after":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": "x"})
        raise RuntimeError("failing after accept")
    elif path == "/ws/return":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "text": "bye"})
    elif path == "/ws/http-deny":
        await send({"type": "websocket.http.response.start", "status": 401,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"2")]})
        await send({"type": "websocket.http.response.body", "body": b"no"})
    elif path == "/ws/big":
        await send({"type": "websocket.accept"})
        block = b"\x07" * 65536
        for _ in range(int(_q(scope).get("mb", "1")) * 16):
            await send({"type": "websocket.send", "bytes": block})
        await send({"type": "websocket.send", "text": "end"})
        await receive()
    elif path == "/ws/deny-late":
        m = await receive()               # nothing comes before the 101 but the client leaving
        sys.stderr.write("asgi-ws: deny-late saw %s code=%s\n" % (m["type"], m.get("code")))
        sys.stderr.flush()
    elif path == "/ws/count":
        q = _q(scope)
        await send({"type": "websocket.accept"})
        await asyncio.sleep(float(q.get("delay", "0")))
        n = 0
        while True:
            m = await receive()
            if m["type"] == "websocket.disconnect":
                break
            n += 1
        sys.stderr.write("asgi-ws: count tag=%s n=%d code=%s\n" % (q.get("tag", "-"), n, m["code"]))
        sys.stderr.flush()
    elif path == "/ws/hold-blast":
        q = _q(scope)
        await send({"type": "websocket.accept", "headers": [(b"m0-channel", q["channel"].encode())]})
        block = b"\x05" * int(q["s"])
        for _ in range(int(q["n"])):
            await send({"type": "websocket.send", "bytes": block})
        await send({"type": "websocket.send", "text": "end"})
        await receive()
    elif path == "/ws/one":
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "bytes": b"\x09" * int(_q(scope)["s"])})
        await send({"type": "websocket.send", "text": "end"})
        await receive()
    elif path == "/ws/proto-header":
        await send({"type": "websocket.accept", "headers": [(b"Sec-WebSocket-Protocol", b"chat"),
                                                            (b"upgrade", b"websocket"), (b"x-kept", b"1")]})
        await send({"type": "websocket.send", "text": "ok"})
        await receive()
    elif path == "/ws/hold":
        channel = _q(scope)["channel"].encode()
        await send({"type": "websocket.accept", "headers": [(b"m0-channel", channel)]})
        await send({"type": "websocket.send", "text": "held"})
        while (await receive())["type"] != "websocket.disconnect":
            pass
