"""An ASGI app whose lifespan startup never completes (it awaits forever);
HTTP is never reached. The cancellation a timeout brings is recorded in the
file named by $LIFESPAN_CANCELLED_LOG, when set."""

import asyncio
import os


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await receive()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            path = os.environ.get("LIFESPAN_CANCELLED_LOG")
            if path:
                with open(path, "w") as f:
                    f.write("cancelled")
            raise
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"never"})
