"""An ASGI application that does not speak lifespan (it answers every scope
as an HTTP request): m0serve detects it as ASGI and serves it anyway."""


async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"asgi"})
