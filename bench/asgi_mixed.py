"""Raw ASGI equivalent of bench/mixed_app.py for bench/asgi.sh.

  /fast          5-byte text/plain body, no work
  /slow?s=1.5    await asyncio.sleep(s) (default 1.5, capped at 30), then a
                 short body
  anything else  404
"""

import asyncio
from urllib.parse import parse_qs

FAST = b"fast\n"


def _start(status, body):
    return {"type": "http.response.start", "status": status,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]}


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
    if path == "/fast":
        body, status = FAST, 200
    elif path == "/slow":
        try:
            s = float(parse_qs(scope.get("query_string", b"").decode("latin-1")).get("s", ["1.5"])[0])
        except ValueError:
            s = 1.5
        s = min(max(s, 0.0), 30.0)
        await asyncio.sleep(s)
        body, status = b"slept %.3f\n" % s, 200
    else:
        body, status = b"not found\n", 404
    await send(_start(status, body))
    await send({"type": "http.response.body", "body": body})
