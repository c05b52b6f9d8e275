"""An ASGI app behind m0serve's GRIP (tests/e2e/test_grip.py): /echo answers
the request headers it got as JSON; /st holds a GRIP stream on channel
"ast" (its body the stream's first bytes)."""
import json


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/st":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"grip-hold", b"stream"),
                                (b"grip-channel", b"ast")]})
        await send({"type": "http.response.body", "body": b"asgi head\n"})
        return
    headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    body = json.dumps(headers).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
