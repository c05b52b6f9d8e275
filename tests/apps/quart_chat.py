"""Quart's chat example (examples/chat in pallets/quart) as Quart ships it,
reproduced for the ASGI WebSocket tests (issue 27, item 6): its shape is
the point, so nothing here is adapted to the server.

  /      the chat page (the example renders a template; here a string)
  /ws    each socket subscribes to an in-process broker; a task of its own
         publishes every message the socket receives to every subscriber,
         the sender included

Quart starts its message task (ASGIWebsocketConnection.handle_messages)
before the route runs, and the route accepts lazily, on its first
websocket.receive() or send(): the application's receive() is already
waiting when websocket.accept goes out.
"""

import asyncio

from quart import Quart, render_template_string, websocket

app = Quart(__name__)

PAGE = """<!doctype html>
<title>chat</title>
<ul id="log"></ul>
<form id="say"><input name="line" minlength="1"><button>Send</button></form>
<script>
  const sock = new WebSocket(`ws://${location.host}/ws`);
  sock.onmessage = (e) => {
    const item = document.createElement("li");
    item.textContent = e.data;
    document.getElementById("log").append(item);
  };
  document.getElementById("say").onsubmit = (e) => {
    const line = new FormData(e.target).get("line");
    if (line) sock.send(line);
    e.target.reset();
    return false;
  };
</script>
"""


class Broker:
    """Every subscriber's queue; a publish puts the message on each."""

    def __init__(self):
        self.queues = set()

    async def publish(self, message):
        for queue in self.queues:
            await queue.put(message)

    async def subscribe(self):
        queue = asyncio.Queue()
        self.queues.add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self.queues.remove(queue)


broker = Broker()


@app.get("/")
async def index():
    return await render_template_string(PAGE)


async def _relay():
    """What this socket receives goes to everyone (its first receive()
    accepts the socket)."""
    while True:
        await broker.publish(await websocket.receive())


@app.websocket("/ws")
async def ws():
    try:
        relay = asyncio.ensure_future(_relay())
        async for message in broker.subscribe():
            await websocket.send(message)
    finally:
        relay.cancel()
        await relay
