"""ASGI app for bench/realtime.sh (m0serve --realtime, the executor): the
same routes as bench/rt_app.py, from async code.

  /events            answer M0-Hold: stream, M0-Channel: news (the C loop
                     holds the stream: no coroutine, no queue per client;
                     the first body chunk is the comment ": hi")
  /publish?n=1&seq=K publish n events on "news" with m0pub (it never waits
                     on a busy worker for more than about a millisecond, so
                     it is called from the coroutine directly); each event's
                     data is JSON {"t": time.time() at publish, "seq": K, "i": i}
  anything else      "ok" (readiness probe)
"""

import json
import time
from urllib.parse import parse_qs

import m0pub

_HOLD = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/event-stream"), (b"m0-hold", b"stream"), (b"m0-channel", b"news")],
}


async def _plain(send, body):
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


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
        await send(_HOLD)
        await send({"type": "http.response.body", "body": b": hi\n\n"})
    elif path == "/publish":
        q = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode("latin-1")).items()}
        seq = int(q.get("seq", "0"))
        ids = [m0pub.publish("news", json.dumps({"t": time.time(), "seq": seq, "i": i}))
               for i in range(int(q.get("n", "1")))]
        await _plain(send, ",".join(str(x) for x in ids).encode())
    else:
        await _plain(send, b"ok")
