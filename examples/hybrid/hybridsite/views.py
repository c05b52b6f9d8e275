"""The Django views of the hybrid example: plain synchronous Django.

/paths/NAME/ reports what Django sees of the URL (the smoke compares it
byte for byte), /slow/ blocks like a slow API call, /events/ holds an SSE
stream, /publish/ broadcasts to every held stream, whichever mount held it.
"""
import json
import os
import threading
import time

import m0pub
from django.http import HttpResponse, JsonResponse
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from m0serve.django import hold_stream_response

PAGE = """<!doctype html>
<title>m0serve hybrid example</title>
<link rel="stylesheet" href="{css}">
<h1>One process, three mounts</h1>
<ul>
  <li>Django at <code>/</code> (this page, worker {pid}): <a href="{paths}">what Django sees</a></li>
  <li>Flask at <code>/flask</code>: <a href="/flask/">its page</a></li>
  <li>Static files at <code>/static</code>, served by the event loop: <a href="{css}">app.css</a>,
      <a href="{js}">app.js</a> (precompressed: app.js.gz)</li>
  <li><a href="/health">/health</a> lists the mounts</li>
</ul>
<p>Live events (held by the server, published from Django): <span id="events">waiting</span></p>
<script src="{js}"></script>
"""


def index(request):
    return HttpResponse(PAGE.format(css=static("css/app.css"), js=static("js/app.js"), pid=os.getpid(),
                                    paths=reverse("paths", args=["example"])))


def paths(request, name):
    return JsonResponse({
        "app": "django",
        "path": request.path,
        "path_info": request.path_info,
        "script_name": request.META.get("SCRIPT_NAME"),
        "reverse": reverse("paths", args=[name]),
        "absolute": request.build_absolute_uri(reverse("paths", args=[name])),
        "static": static("css/app.css"),
    })


def slow(request):
    """Blocks its handler thread for ?s= seconds (default 2)."""
    seconds = float(request.GET.get("s", "2"))
    began = time.monotonic()
    time.sleep(seconds)
    return JsonResponse({"slept": time.monotonic() - began, "thread": threading.get_ident(),
                         "pid": os.getpid()})


def events(request):
    return hold_stream_response(request.GET.get("channel", "hybrid"), head=": django pid=%d\n\n" % os.getpid())


@csrf_exempt
def publish(request):
    channel = request.GET.get("channel", "hybrid")
    data = request.GET.get("data", "hello")
    event_id = m0pub.publish(channel, json.dumps({"data": data, "from": "django"}), event="message")
    return JsonResponse({"id": event_id, "enabled": m0pub.enabled()})


def anything(request, rest):
    """Every other path is Django's too: the root mount claims everything
    no deeper mount does (/flaskx is not /flask)."""
    return JsonResponse({"app": "django", "path": request.path}, status=404)
