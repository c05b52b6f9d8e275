"""Views written as django-grip's documentation writes them (its README's
WebSocket echo service with a broadcast endpoint; a chat room as Pushpin's
examples make one), run unchanged behind m0serve's WebSocket-over-HTTP.
A few more exercise one part of the protocol each; the tests read what
they noted in GRIPWS_LOG."""
import json
import os

from django.http import HttpResponse, HttpResponseNotAllowed
from django_grip import publish, websocket_only
from gripcontrol import Channel, WebSocketMessageFormat, websocket_control_message


def note(*parts):
    """One line in GRIPWS_LOG (O_APPEND: whole lines from any worker)."""
    path = os.environ.get("GRIPWS_LOG")
    if path:
        with open(path, "a") as f:
            f.write(" ".join(str(p) for p in parts) + "\n")


# --- django-grip's README: an echo service with a broadcast endpoint ------

@websocket_only
def echo(request):
    # With the decorator, wscontext is always there.
    ws = request.wscontext

    # A new connection: accept it and put it on a channel.
    if ws.is_opening():
        ws.accept()
        ws.subscribe("test")

    # The messages of this batch (often one).
    while ws.can_recv():
        message = ws.recv()

        # None: the client closed.
        if message is None:
            ws.close()
            break

        ws.send(message)


def broadcast(request):
    if request.method == "POST":
        # To every client on the echo endpoint.
        data = request.POST["data"]
        publish("test", WebSocketMessageFormat(data), blocking=True)
        return HttpResponse("Ok\n")
    return HttpResponseNotAllowed(["POST"])


# --- a chat room: what one member says, every member hears -----------------

@websocket_only
def chat(request, room):
    ws = request.wscontext
    if ws.is_opening():
        ws.accept()
        ws.subscribe("room-" + room)
    while ws.can_recv():
        message = ws.recv()
        if message is None:
            ws.close()
            break
        publish("room-" + room, WebSocketMessageFormat(message), blocking=True)


def say(request, room):
    """The room hears a message from outside (a plain POST)."""
    publish("room-" + room, WebSocketMessageFormat(request.POST["text"]), blocking=True)
    return HttpResponse("Ok\n")


# --- one part of the protocol each -----------------------------------------

@websocket_only
def closer(request):
    """'bye' is answered with a close of code 4001; anything else echoed."""
    ws = request.wscontext
    if ws.is_opening():
        ws.accept()
    while ws.can_recv():
        message = ws.recv()
        if message is None:
            note("closer", ws.id, "CLOSE", ws.close_code)
            ws.close()
            break
        if message == "bye":
            ws.close(4001)
            break
        ws.send(message)


@websocket_only
def notes(request):
    """Notes every event it is given (type, content) with the connection id."""
    ws = request.wscontext
    if ws.is_opening():
        note("notes", ws.id, "META", json.dumps(ws.meta, sort_keys=True), "proxied=%s" % request.grip.proxied)
    for e in ws.in_events:
        content = e.content.decode("utf-8", "replace") if e.content is not None else ""
        if e.type == "CLOSE" and e.content and len(e.content) >= 2:
            content = str(int.from_bytes(e.content[:2], "big"))
        note("notes", ws.id, e.type, content)
    if ws.is_opening():
        ws.accept()
        ws.send("id " + ws.id)
    while ws.can_recv():
        try:
            message = ws.recv()
        except IOError:          # DISCONNECT
            break
        if message is None:
            ws.close()
            break
        ws.send("got " + message)


@websocket_only
def meta(request):
    """Set-Meta at the open; each message answered with what came back."""
    ws = request.wscontext
    if ws.is_opening():
        ws.accept()
        ws.meta["user"] = "alice"
        ws.meta["room"] = request.GET.get("room", "lobby")
    while ws.can_recv():
        message = ws.recv()
        if message is None:
            ws.close()
            break
        if message == "forget":
            del ws.meta["room"]
        ws.send(json.dumps(ws.meta, sort_keys=True))


@websocket_only
def noaccept(request):
    """Never accepts: its answer has no OPEN."""


def refuse(request):
    """Not a websocket_only view: the OPEN gets a 403 of its own."""
    return HttpResponse("not for you\n", status=403, content_type="text/plain")


@websocket_only
def detach(request):
    """Accepts, subscribes, lets go: publishes still reach the socket, its
    messages reach nobody."""
    ws = request.wscontext
    note("detach", ws.id, ",".join(e.type for e in ws.in_events))
    if ws.is_opening():
        ws.accept()
        ws.subscribe("detached")
        ws.detach()


@websocket_only
def keepalive(request):
    """A keep-alive text every second of silence."""
    ws = request.wscontext
    if ws.is_opening():
        ws.accept()
        ws.send_control(websocket_control_message("keep-alive", {"content": "ka", "timeout": 1}))
    while ws.can_recv():
        if ws.recv() is None:
            ws.close()
            break


@websocket_only
def binary(request):
    """Binary messages back as binary."""
    ws = request.wscontext
    if ws.is_opening():
        ws.accept()
    while ws.can_recv():
        message = ws.recv()
        if message is None:
            ws.close()
            break
        ws.send_binary(message if isinstance(message, bytes) else message.encode())


PAGE = """<!doctype html><title>chat</title><pre id="log"></pre>
<script>
var log = document.getElementById("log");
var ws = new WebSocket("ws://" + location.host + "/ws/chat/browser/");
ws.onopen = function () { log.textContent += "open\\n"; ws.send("hello from the page"); };
ws.onmessage = function (e) { log.textContent += "msg " + e.data + "\\n"; };
ws.onclose = function (e) { log.textContent += "close " + e.code + "\\n"; };
</script>"""


def page(request):
    return HttpResponse(PAGE, content_type="text/html")


def plain(request):
    return HttpResponse("plain\n", content_type="text/plain")


# --- GRIP recovery: a stream with prev-id and its next link -----------------

def _feed(name, after):
    """The items of feed `name` after id `after`: lines "ID TEXT" of
    GRIPWS_FEEDS/name, the application's storage."""
    out = []
    path = os.path.join(os.environ.get("GRIPWS_FEEDS", "/nonexistent"), name)
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                ident, _, text = line.rstrip("\n").partition(" ")
                if int(ident) > int(after or "0"):
                    out.append((ident, text))
    return out


def _hold(request, name, last, body, timeout):
    instruct = request.grip.start_instruct()
    instruct.add_channel(Channel("feed-" + name, prev_id=last))
    instruct.set_hold_stream()
    instruct.set_next_link("/next/?feed=%s&timeout=%d" % (name, timeout), timeout=timeout)
    return HttpResponse(body, content_type="text/plain")


def events(request):
    """A stream of feed ?feed= from ?last= on (the items after it first)."""
    name, last = request.GET["feed"], request.GET.get("last", "0")
    timeout = int(request.GET.get("timeout", "120"))
    items = _feed(name, last)
    body = "open %s\n" % last + "".join("item %s %s\n" % i for i in items)
    return _hold(request, name, items[-1][0] if items else last, body, timeout)


def next_link(request):
    """The next link: Grip-Last names the last item the stream has; what the
    storage has after it, and the hold again."""
    name = request.GET["feed"]
    last = request.grip.last.get("feed-" + name, "")
    note("next", name, last, "proxied=%s" % request.grip.proxied)
    items = _feed(name, last)
    body = "".join("item %s %s\n" % i for i in items)
    return _hold(request, name, items[-1][0] if items else last, body, int(request.GET.get("timeout", "120")))
