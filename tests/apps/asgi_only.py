"""An ASGI application: m0serve refuses it with one clear line until it hosts ASGI."""


async def app(scope, receive, send):  # pragma: no cover - never served
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"asgi"})
