"""A raw ASGI 3 application whose lifespan startup raises (issue 27, item
11): it takes lifespan.startup from receive() — it speaks lifespan — and
then raises instead of answering, as a startup whose database is down does.

$LIFESPAN_RAISE says when: "always", or "second" (the first startup of the
process completes with {"ok": True} in scope["state"], every later one
raises: with --threads 2, loop 0's completes and loop 1's raises), or
"before" (it raises before it takes the startup message: an application
that does not speak lifespan), or "second-before" (the first startup
completes, every later one raises before it takes the message).

  /    scope["state"] as JSON
"""

import json
import os

startups = 0


async def app(scope, receive, send):
    global startups
    when = os.environ.get("LIFESPAN_RAISE", "always")
    if scope["type"] == "lifespan":
        startups += 1
        if when == "before" or (when == "second-before" and startups > 1):
            raise RuntimeError("lifespan? not here (test)")
        message = await receive()
        if message["type"] == "lifespan.startup":
            if when == "always" or (when == "second" and startups > 1):
                raise ConnectionError("the database is down (startup %d, test)" % startups)
            scope["state"]["ok"] = True
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = json.dumps(scope.get("state", {})).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
