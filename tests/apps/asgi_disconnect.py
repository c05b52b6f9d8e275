"""Each http.disconnect an application receives is its own dict: this app
changes every one it gets, and /seen lists them as they arrived."""

import json

seen = []


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    if scope["path"] == "/seen":
        body = json.dumps(seen).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})
    message = await receive()            # the response is complete: http.disconnect at once
    seen.append(dict(message))
    message["changed_by"] = scope["path"]     # the application's to change
