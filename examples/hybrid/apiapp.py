"""The Starlette application of the hybrid example, mounted at /api.

``--mount /api=apiapp`` finds ``apiapp:app`` by discovery and runs it on the
worker's asyncio executor (ASGI), beside Django and Flask on the thread pool.
Under the mount, scope["root_path"] is /api and scope["path"] the whole path
(the ASGI spec's rule), so url_for() builds /api/... links.
"""
import asyncio
import os

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


async def paths(request):
    name = request.path_params["name"]
    return JSONResponse({"app": "starlette", "path": request.url.path, "root_path": request.scope["root_path"],
                         "scope_path": request.scope["path"], "url_for": str(request.url_for("paths", name=name)),
                         "worker": os.getpid()})


async def ping(request):
    return Response(b"pong", media_type="text/plain")


async def sleep(request):
    await asyncio.sleep(float(request.query_params.get("s", "1")))
    return Response(b"slept", media_type="text/plain")


async def events(request):
    channel = request.query_params.get("channel", "hybrid")
    return Response(b": starlette pid=%d\n\n" % os.getpid(), media_type="text/event-stream",
                    headers={"M0-Hold": "stream", "M0-Channel": channel})


app = Starlette(routes=[Route("/paths/{name}", paths, name="paths"), Route("/ping", ping),
                        Route("/sleep", sleep), Route("/events", events)])
