"""A Starlette application for the ASGI tests (issue 9).

  /json                JSON
  /form                POST a urlencoded or multipart form: its fields, and an
                       uploaded file's name and size
  /stream?gate=P       StreamingResponse: "b1", then "b2" once the file P2 exists
  /sse?n=N             sse-starlette EventSourceResponse: N events
  /items/{item_id}     a path parameter
  /ws                  WebSocketRoute: echoes text, then closes 1000 on "bye"
"""

import asyncio
import os

from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocketDisconnect


async def json_route(request):
    return JSONResponse({"ok": True, "path": request.url.path, "root_path": request.scope.get("root_path")})


async def form(request):
    data = await request.form()
    out = {}
    for key, value in data.items():
        if hasattr(value, "filename"):
            content = await value.read()
            out[key] = {"filename": value.filename, "size": len(content)}
        else:
            out[key] = value
    return JSONResponse(out)


async def stream(request):
    gate = request.query_params["gate"]

    async def body():
        yield b"b1"
        while not os.path.exists(gate + "2"):
            await asyncio.sleep(0.005)
        yield b"b2"
    return StreamingResponse(body(), media_type="text/plain")


async def sse(request):
    n = int(request.query_params.get("n", "3"))

    async def events():
        for i in range(n):
            yield {"event": "tick", "id": str(i), "data": "tick %d" % i}
    return EventSourceResponse(events(), ping=3600)


async def item(request):
    return JSONResponse({"item_id": request.path_params["item_id"]})


async def ws_echo(websocket):
    await websocket.accept()
    try:
        while True:
            text = await websocket.receive_text()
            if text == "bye":
                await websocket.close()
                return
            await websocket.send_text("echo: " + text)
    except WebSocketDisconnect:
        pass


app = Starlette(routes=[Route("/json", json_route), Route("/form", form, methods=["POST"]),
                        Route("/stream", stream), Route("/sse", sse), Route("/items/{item_id}", item),
                        WebSocketRoute("/ws", ws_echo)])
