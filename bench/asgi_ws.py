"""Raw ASGI broadcast endpoint for bench/ws.sh: what bench/ws_app.py does on
m0serve, in the shape an ASGI application does it (uvicorn --ws websockets,
granian --interface asgi --ws).

  websocket /ws         accept, join the set of sockets, read until it closes
  /publish?n=N&seq=K    send N events to every socket, seq K, K+1, ...: each
                        is JSON {"t": time.time() at publish, "seq": ...} as
                        one text message; answered when all sends returned
  anything else         "ok"

One worker, one process: the set is that worker's (the benchmark runs one).
"""

import json
import time
from urllib.parse import parse_qs

SOCKETS = set()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "websocket":
        msg = await receive()
        if msg["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        SOCKETS.add(send)
        try:
            while True:
                msg = await receive()
                if msg["type"] == "websocket.disconnect":
                    break
        finally:
            SOCKETS.discard(send)
        return
    if scope["path"] == "/publish":
        q = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
        seq = int(q.get("seq", "0"))
        n = int(q.get("n", "1"))
        for i in range(n):
            message = {"type": "websocket.send", "text": json.dumps({"t": time.time(), "seq": seq + i})}
            for s in list(SOCKETS):
                try:
                    await s(message)
                except Exception:          # the socket went away meanwhile
                    SOCKETS.discard(s)
        body = str(n).encode()
    else:
        body = b"ok"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
