import json

import django_grip
from django.http import HttpResponse
from django_eventstream import send_event


def send(request):
    """send_event from a view, as django-eventstream documents it."""
    text = request.GET.get("text", "hello")
    skip = request.GET.getlist("skip")       # send_event's skip_user_ids (the skip-users filter)
    channel = request.GET.get("channel", "test")
    send_event(channel, "message", {"text": text}, skip_user_ids=skip or None, async_publish=False)
    return HttpResponse("sent\n", content_type="text/plain")


def echo(request):
    """What reached the application: its Grip-* request fields and whether
    django-grip believes a GRIP proxy is in front."""
    meta = {k: v for k, v in request.META.items() if k.startswith("HTTP_GRIP")}
    return HttpResponse(json.dumps({"meta": meta, "proxied": request.grip.proxied}),
                        content_type="application/json")


def _grip_status(request, response):
    """?status=CODE: the client's status through Grip-Status."""
    if "status" in request.GET:
        response["Grip-Status"] = request.GET["status"]
    return response


def longpoll(request):
    django_grip.set_hold_longpoll(request, request.GET.get("channel", "lp"), timeout=5)
    return _grip_status(request, HttpResponse("timeout body\n", content_type="text/plain"))


def stream(request):
    channel = request.GET.get("channel", "st")
    django_grip.set_hold_stream(request, channel, keep_alive_data="ka\n", keep_alive_timeout=1)
    return _grip_status(request, HttpResponse("stream head\n", content_type="text/plain"))


def ws(request):
    """A WebSocket held on ?channel= (M0-Hold: websocket): what EPCP
    ws-message items reach. Its messages are answered with nothing.
    (m0serve.django is the server's: imported here, not by migrate.)"""
    from m0serve.django import hold_websocket_response, websocket_message

    if websocket_message(request) is None:
        return hold_websocket_response(request.GET.get("channel", "ws"))
    return HttpResponse("")


def sse(request):
    """An m0serve SSE hold on ?channel= (M0-Hold: stream), not a GRIP one."""
    from m0serve.django import hold_stream_response

    return hold_stream_response(request.GET.get("channel", "sse"))


def m0publish(request):
    """m0pub.publish (the server's own events, SSE-framed) to ?channel=."""
    import m0pub

    m0pub.publish(request.GET["channel"], request.GET.get("data", ""))
    return HttpResponse("published\n", content_type="text/plain")


PAGE = """<!doctype html><title>events</title><pre id="log"></pre>
<script>
var es = new EventSource("/events/");
es.addEventListener("message", function (e) {
  document.getElementById("log").textContent += e.lastEventId + " " + e.data + "\\n";
});
</script>"""


def page(request):
    return HttpResponse(PAGE, content_type="text/html")


def bad(request):
    """Instructions a GRIP proxy cannot follow: Pushpin answers 502."""
    response = HttpResponse("the view's body\n", content_type="text/plain")
    response["Grip-Hold"] = "forever"
    return response
