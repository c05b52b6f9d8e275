"""A raw ASGI 3 application whose lifespan owns a background task (issue 27,
item 7), as Litestar's event emitter or a FastAPI lifespan's consumer does:
startup starts it, shutdown stops it and waits for it. A server that waits
for every task before lifespan shutdown waits for this one for ever.

  /               "hello"
  /slow?s=S       logs "lifespan-task: slow started", sleeps S s (default 1),
                  logs "lifespan-task: slow done", then answers "slow"
  /orphan         starts a task nobody stops (it logs nothing until it is
                  cancelled, then "lifespan-task: orphan cancelled"), answers "orphan"

Lifespan: startup logs "lifespan-task: startup"; shutdown logs
"lifespan-task: shutdown", stops the ticker task and logs
"lifespan-task: ticker stopped".
"""

import asyncio
import sys
from urllib.parse import parse_qs


def _log(line):
    sys.stderr.write("lifespan-task: %s\n" % line)
    sys.stderr.flush()


async def _ticker(stop):
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 0.05)
        except asyncio.TimeoutError:
            pass


async def orphan_forever():
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        _log("orphan cancelled")
        raise


async def _text(send, body):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


_orphans = set()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        stop = asyncio.Event()
        ticker = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                ticker = asyncio.ensure_future(_ticker(stop))
                _log("startup")
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                _log("shutdown")
                stop.set()
                await ticker
                _log("ticker stopped")
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if path == "/slow":
        q = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        _log("slow started")
        await asyncio.sleep(float(q.get("s", "1")))
        _log("slow done")
        return await _text(send, b"slow")
    if path == "/orphan":
        task = asyncio.ensure_future(orphan_forever())
        _orphans.add(task)
        return await _text(send, b"orphan")
    await _text(send, b"hello")
