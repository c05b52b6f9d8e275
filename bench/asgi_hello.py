"""Raw ASGI 3 hello world for bench/asgi.sh: the 13-byte text/plain body of
bench/hello.py, with Content-Length, and lifespan answered (so no server
logs "lifespan unsupported").  No framework: server against server.
"""

BODY = b"Hello, World!"
START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"text/plain"), (b"content-length", b"%d" % len(BODY))],
}
RESPONSE_BODY = {"type": "http.response.body", "body": BODY}


async def app(scope, receive, send):
    if scope["type"] == "http":
        await send(START)
        await send(RESPONSE_BODY)
    elif scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
