"""A FastAPI application served by m0serve's ASGI executor.

    make demo-fastapi        # http://127.0.0.1:8001

  /                 a page that uses everything below from the browser
  /api/hello        JSON (a pydantic model)
  /api/count?n=N    a StreamingResponse: one line every 200 ms
  /api/events       a held SSE stream (M0-Hold: the C loop keeps it; no coroutine per client)
  /api/publish      POST {"text": ...}: m0pub.publish to every held stream of every worker
  /ws/echo          a WebSocket that echoes text messages
"""

import asyncio
import os

import m0pub
from fastapi import FastAPI, WebSocket, WebSocketDisconnect
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from pydantic import BaseModel

app = FastAPI(title="m0serve FastAPI example")


class Hello(BaseModel):
    message: str
    worker: int


class Note(BaseModel):
    text: str


@app.get("/api/hello")
async def hello() -> Hello:
    return Hello(message="hello from FastAPI on m0serve", worker=os.getpid())


@app.get("/api/count")
async def count(n: int = 5):
    async def lines():
        for i in range(1, n + 1):
            yield "line %d of %d\n" % (i, n)
            await asyncio.sleep(0.2)
    return StreamingResponse(lines(), media_type="text/plain")


@app.get("/api/events")
async def events(channel: str = "notes"):
    # Two headers hand the connection to the C loop: it stays open as an SSE
    # stream with no coroutine, task or thread kept for it.
    return Response(": connected\n\n", media_type="text/event-stream",
                    headers={"M0-Hold": "stream", "M0-Channel": channel})


@app.post("/api/publish")
async def publish(note: Note, channel: str = "notes"):
    return {"id": m0pub.publish(channel, note.text, event="note")}


@app.websocket("/ws/echo")
async def echo(ws: WebSocket):
    await ws.accept()
    try:
        while True:
            await ws.send_text("echo: " + await ws.receive_text())
    except WebSocketDisconnect:
        pass


PAGE = """<!doctype html>
<meta charset="utf-8"><title>FastAPI on m0serve</title>
<style>body{font:15px system-ui;max-width:44em;margin:2em auto} pre{background:#f4f4f4;padding:.6em}</style>
<h1>FastAPI on m0serve</h1>
<h2>JSON</h2><pre id="hello"></pre>
<h2>A stream</h2><pre id="count"></pre>
<h2>Held SSE stream</h2>
<form id="f"><input id="t" placeholder="a note" autofocus> <button>publish</button></form><pre id="notes"></pre>
<h2>WebSocket echo</h2>
<form id="w"><input id="m" placeholder="a message"> <button>send</button></form><pre id="echo"></pre>
<script>
fetch("/api/hello").then(r => r.json()).then(j => hello.textContent = JSON.stringify(j));
fetch("/api/count?n=5").then(async r => {
  const rd = r.body.getReader(), dec = new TextDecoder();
  for (;;) { const {value, done} = await rd.read(); if (done) break; count.textContent += dec.decode(value); }
});
const es = new EventSource("/api/events");
es.addEventListener("note", e => notes.textContent += e.lastEventId + ": " + e.data + "\\n");
f.onsubmit = e => { e.preventDefault();
  fetch("/api/publish", {method: "POST", headers: {"Content-Type": "application/json"},
                         body: JSON.stringify({text: t.value})}); t.value = ""; };
const ws = new WebSocket((location.protocol == "https:" ? "wss://" : "ws://") + location.host + "/ws/echo");
ws.onmessage = e => echo.textContent += e.data + "\\n";
w.onsubmit = e => { e.preventDefault(); ws.send(m.value); m.value = ""; };
</script>
"""


@app.get("/", response_class=HTMLResponse)
async def page():
    return PAGE
