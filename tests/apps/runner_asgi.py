"""ASGI applications for the runner tests (tests/e2e/test_runners.py).

`app` (raw ASGI 3):
  /overlong?parts=N    declares Content-Length 5 and sends "hello world" in N
                       body messages (default 1)
  /pid                 the worker pid

`starlette_app` (Starlette):
  /stream              StreamingResponse: 64 KiB blocks, one every 10 ms, for
                       up to 30 s (the client leaves mid-stream); when its
                       generator is closed it writes "closed" to $STREAM_MARK
  /boom                StreamingResponse whose generator raises
                       RuntimeError("boom (test)") after its first block
  /boom-before         raises RuntimeError("boom-before (test)") in the endpoint
                       (Starlette answers 500, then re-raises)
  /mark?text=T         writes "runner: T" to stderr (a point in the log to wait
                       for), answers "ok"
"""

import asyncio
import os
import sys

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"]
    if path == "/overlong":
        parts = int(dict(p.split("=") for p in scope["query_string"].decode().split("&") if p).get("parts", 1))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"5")]})
        body = b"hello world"
        step = max(1, -(-len(body) // parts))
        pieces = [body[i:i + step] for i in range(0, len(body), step)]
        for i, piece in enumerate(pieces):
            await send({"type": "http.response.body", "body": piece, "more_body": i < len(pieces) - 1})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": str(os.getpid()).encode()})


async def _blocks():
    try:
        for _ in range(3000):
            yield b"x" * 65536
            await asyncio.sleep(0.01)
    finally:
        mark = os.environ.get("STREAM_MARK")
        if mark:
            with open(mark, "w") as f:
                f.write("closed")


async def stream(request):
    return StreamingResponse(_blocks(), media_type="application/octet-stream")


async def _boom():
    yield b"first"
    raise RuntimeError("boom (test)")


async def boom(request):
    return StreamingResponse(_boom(), media_type="text/plain")


async def boom_before(request):
    raise RuntimeError("boom-before (test)")


async def mark(request):
    print("runner: %s" % request.query_params["text"], file=sys.stderr, flush=True)
    return PlainTextResponse("ok")


starlette_app = Starlette(routes=[Route("/stream", stream), Route("/boom", boom), Route("/boom-before", boom_before),
                                  Route("/mark", mark)])
