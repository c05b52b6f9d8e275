"""The realtime demo's views: all plain synchronous Django.

/events holds an SSE stream (no thread is kept for it); /publish broadcasts
to every stream held by every worker with one call.

/chat is a second page whose browser talks over a WebSocket to /ws/chat: a
plain view approves the socket (the server speaks RFC 6455 and holds it in
its loop), and every message the browser sends comes back to that same
view as a POST on a pool thread, which publishes it — to every socket and
every EventSource on the channel, on every worker. /ws/echo answers each
message to its sender only (the view's body is the reply frame).
"""
import json
import os
import time

import m0pub
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from m0serve.django import hold_stream_response, hold_websocket_response, websocket_message, websocket_view

CHANNEL_DEFAULT = "news"


def index(request):
    return render(request, "index.html", {"pid": os.getpid(), "realtime": m0pub.enabled()})


def events(request):
    """Subscribe: the stream opens with a comment naming the worker that holds it."""
    channel = request.GET.get("channel", CHANNEL_DEFAULT)
    return hold_stream_response(channel, head=": connected worker=%d\n\n" % os.getpid())


@require_POST
def publish(request):
    text = request.POST.get("text", "").strip()
    if not text:
        return HttpResponseBadRequest("text is required")
    channel = request.POST.get("channel", CHANNEL_DEFAULT)
    payload = json.dumps({"text": text, "from_worker": os.getpid(), "at": time.time()})
    if request.POST.get("raw"):
        payload = text            # the text itself, line breaks and all (the WebSocket tests)
    event_id = m0pub.publish(channel, payload, event="message")
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"id": event_id, "worker": os.getpid()})
    return redirect("/")


def chat(request):
    """The chat page: a WebSocket to /ws/chat, gated by the view below."""
    return render(request, "chat.html", {"pid": os.getpid(), "realtime": m0pub.enabled()})


@websocket_view
def ws_chat(request):
    """GET: approve the socket on ?channel= (default "chat"); a deployment
    would check request.user here first. POST: one message from a socket,
    published as {"text", "from_worker", "at"} JSON like /publish does."""
    message = websocket_message(request)
    if message is None:
        channel = request.GET.get("channel", "chat")
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        response = hold_websocket_response(channel, protocol="chat.v1" if "chat.v1" in offered else None)
        response["X-Worker"] = str(os.getpid())      # headers of the approval go out on the 101
        return response
    text = message.payload if message.opcode == "text" else message.payload.decode("latin-1")
    payload = json.dumps({"text": text, "from_worker": os.getpid(), "at": time.time()})
    m0pub.publish(message.channel, payload, event="message")
    return HttpResponse("")


@websocket_view
def ws_echo(request):
    """GET: approve a socket on a channel of its own; POST: the message back
    to its sender (text as text, binary as binary), nothing published.
    ?delay=S sleeps first, like a view waiting on a database."""
    message = websocket_message(request)
    if message is None:
        response = hold_websocket_response(request.GET.get("channel", "echo-%d" % os.getpid()))
        response["X-Worker"] = str(os.getpid())
        return response
    time.sleep(float(request.GET.get("delay", "0")))
    if message.opcode == "binary":
        response = HttpResponse(message.payload, content_type="application/octet-stream")
        response["M0-Opcode"] = "binary"
        return response
    return HttpResponse(message.payload, content_type="text/plain; charset=utf-8")


def pid(request):
    return HttpResponse(str(os.getpid()), content_type="text/plain")


def client(request):
    """Who the server says the client is: behind a proxy m0serve trusts
    (--forwarded-allow-ips), the address and scheme it forwarded."""
    return JsonResponse({
        "remote_addr": request.META.get("REMOTE_ADDR"),
        "remote_port": request.META.get("REMOTE_PORT"),
        "scheme": request.scheme,
        "secure": request.is_secure(),
        "x_forwarded_for": request.META.get("HTTP_X_FORWARDED_FOR"),
    })


def slow(request):
    """A view that waits like an API call would (for the pool phase of the smoke)."""
    time.sleep(float(request.GET.get("s", "1.5")))
    return HttpResponse("slept", content_type="text/plain")
