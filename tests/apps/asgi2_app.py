"""An ASGI 2 (double-callable) application: detected and wrapped."""


class App:
    def __init__(self, scope):
        self.scope = scope

    async def __call__(self, receive, send):
        if self.scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"asgi2 " + self.scope["path"].encode()})


app = App
