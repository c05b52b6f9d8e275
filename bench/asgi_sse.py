"""Raw ASGI equivalent of bench/rt_app.py, for uvicorn (bench/realtime.sh).

  /events            200 text/event-stream; first body chunk ": hi\\n\\n"; then
                     every published event, until the client disconnects
  /publish?n=1&seq=K (GET or POST) frame n events whose data is JSON
                     {"t": time.time() at publish, "seq": K, "i": i} and put
                     each on every subscriber's asyncio.Queue
  anything else      "ok"

Each stream is one coroutine awaiting its own queue, plus one task awaiting
``receive()`` for ``http.disconnect`` (what Starlette's StreamingResponse
also runs per stream). No framework, so the comparison is server against
server, not server against framework.
"""

import asyncio
import json
import time
from urllib.parse import parse_qs

SUBSCRIBERS = set()
_next_id = 0

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
]


async def _plain(send, body, status=200):
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


async def _events(receive, send):
    queue = asyncio.Queue()

    async def watch():
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                queue.put_nowait(None)
                return

    SUBSCRIBERS.add(queue)
    watcher = asyncio.get_running_loop().create_task(watch())
    try:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        await send({"type": "http.response.body", "body": b": hi\n\n", "more_body": True})
        while True:
            frame = await queue.get()
            if frame is None:
                break
            await send({"type": "http.response.body", "body": frame, "more_body": True})
    finally:
        SUBSCRIBERS.discard(queue)
        watcher.cancel()


def _publish(query):
    global _next_id
    q = {k: v[0] for k, v in parse_qs(query).items()}
    seq = int(q.get("seq", "0"))
    ids = []
    for i in range(int(q.get("n", "1"))):
        _next_id += 1
        data = json.dumps({"t": time.time(), "seq": seq, "i": i})
        frame = ("id: %d\ndata: %s\n\n" % (_next_id, data)).encode()
        for queue in SUBSCRIBERS:
            queue.put_nowait(frame)
        ids.append(str(_next_id))
    return ",".join(ids).encode()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/events":
        await _events(receive, send)
    elif path == "/publish":
        await _plain(send, _publish(scope.get("query_string", b"").decode("latin-1")))
    else:
        await _plain(send, b"ok")
