"""The realtime demo's views: all plain synchronous Django.

/events holds an SSE stream (no thread is kept for it); /publish broadcasts
to every stream held by every worker with one call.
"""
import json
import os
import time

import m0pub
from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from m0serve.django import hold_stream_response

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
    event_id = m0pub.publish(channel, payload, event="message")
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"id": event_id, "worker": os.getpid()})
    return redirect("/")


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
