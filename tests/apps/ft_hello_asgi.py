"""ft_hello's ASGI twin (tests/e2e/test_freethreaded_build.py): whether the GIL
is on inside an ASGI view, where m0serve's _m0asgi module is imported too,
and which event loop (--threads) and thread ran it."""

import json
import sys
import threading

import m0


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    body = json.dumps({"gil_enabled": gil, "loop": m0.loop_index(), "thread": threading.get_ident(),
                       "modules": sorted(m for m in ("m0", "_m0asgi") if m in sys.modules)})
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body.encode()})
