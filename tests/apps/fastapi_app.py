"""A FastAPI application for the ASGI tests (issue 9).

  /json                 JSON from a pydantic model
  /items/{n}            a typed path parameter (422 when not an int)
  /upload               POST multipart: the file's name and size
  /events?channel=C     a held SSE stream (M0-Hold: stream), no coroutine kept
  /publish?channel=C    m0pub.publish from async code -> {"id": n}
  /sync                 a plain `def` endpoint (FastAPI runs it on its threadpool)
  /pid                  the worker pid
"""

import os

import m0pub
from fastapi import FastAPI, File, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel

app = FastAPI()


class Greeting(BaseModel):
    message: str
    pid: int


@app.get("/json")
async def json_route() -> Greeting:
    return Greeting(message="hello", pid=os.getpid())


@app.get("/items/{n}")
async def item(n: int):
    return {"n": n, "double": n * 2}


@app.post("/upload")
async def upload(file: UploadFile = File(...)):
    content = await file.read()
    return {"filename": file.filename, "size": len(content)}


@app.get("/events")
async def events(channel: str = "news"):
    return Response(b": connected worker=%d\n\n" % os.getpid(), media_type="text/event-stream",
                    headers={"M0-Hold": "stream", "M0-Channel": channel})


@app.get("/publish")
async def publish(channel: str = "news", text: str = "from-fastapi"):
    return {"id": m0pub.publish(channel, text)}


@app.get("/sync")
def sync_route():
    return {"sync": True}


@app.get("/pid")
async def pid():
    return {"pid": os.getpid()}
