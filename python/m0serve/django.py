"""Django helpers for m0serve's realtime mode.

    from m0serve.django import hold_stream_response

    def events(request):
        return hold_stream_response(f"user_{request.user.id}")

Under ``m0serve --realtime`` the response becomes a Server-Sent-Events
stream held by the server's event loop (no Python thread per stream) and
subscribed to the channel; ``m0pub.publish(channel, ...)`` from any view
reaches it. Under any other server it is an ordinary short response.

WebSockets, from the same plain synchronous views:

    from m0serve.django import hold_websocket_response, websocket_message, websocket_view

    @websocket_view
    def chat(request):
        message = websocket_message(request)
        if message is None:                      # the handshake (a GET)
            if not request.user.is_authenticated:
                return HttpResponseForbidden()
            return hold_websocket_response("room-1")
        m0pub.publish(message.channel, message.payload)   # every socket and stream
        return HttpResponse("")                  # a non-empty body goes back to this socket

The server checks the handshake (RFC 6455), answers 101 and holds the
socket in its loop; one publish reaches EventSource and WebSocket
subscribers alike (a socket receives the event's data as one text frame).
Each message the client sends comes back to the same view as a POST on a
pool thread, with the request's cookies, so ``request.user`` works.

Signed stream grants (``m0serve --grant-path /rt --grant-key-file keys``):
the view decides who may listen once, and hands the page a URL the server
itself verifies and holds, with no Python call per subscribe or reconnect:

    from m0serve.django import grant_url

    def page(request):
        url = grant_url([f"user_{request.user.id}", "news"], request=request,
                        sub=str(request.user.id))
        return render(request, "page.html", {"events_url": url})
    # page.html: new EventSource("{{ events_url }}")
"""

import functools

from django.http import HttpResponse

import m0pub
from m0serve._grant import absolute

from m0serve._ws import DEGRADED_BODY, WebSocketMessage, approval_headers, message_from_environ, stream_headers

__all__ = ["grant_url", "hold_stream_response", "hold_websocket_response", "is_websocket_message",
           "websocket_message", "websocket_view", "WebSocketMessage"]


def hold_stream_response(channel, head=": connected\n\n", presence=None, last_event_id=None):
    """An HttpResponse asking m0serve to hold the connection as an SSE stream
    on channel. head (str) is sent first. The server checks the channel name
    (1..200 bytes, no control characters, not ``m0.``-prefixed). presence:
    whom the stream is for in m0pub.presence (e.g. ``str(request.user.id)``;
    sent as M0-Presence). last_event_id: the stream starts after that event
    when the browser sent no Last-Event-ID (the last event of the
    m0pub.history the page rendered). Under any other server it is a short
    event stream of head alone (the client reconnects), without the M0-*
    headers."""
    response = HttpResponse(head, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    for name, value in stream_headers(channel, presence, last_event_id).items():
        response[name] = value
    return response


def hold_websocket_response(channel, protocol=None, presence=None):
    """An HttpResponse approving a WebSocket upgrade on channel: under
    ``m0serve --realtime`` the server answers the handshake (101, or 400/426
    when the request is not a valid one) and holds the socket subscribed to
    channel. protocol: the subprotocol chosen, one the client offered in
    Sec-WebSocket-Protocol (the server refuses with 500 otherwise). Other
    headers set on the response (cookies) go out on the 101; its body never
    does. Under any other server (or without --realtime) it is an ordinary
    200 explaining that the endpoint needs m0serve. presence: whom the
    socket is for in m0pub.presence (M0-Presence)."""
    response = HttpResponse(DEGRADED_BODY, content_type="text/plain; charset=utf-8")
    for name, value in approval_headers(channel, protocol, presence).items():
        response[name] = value
    return response


def websocket_message(request):
    """The WebSocketMessage (channel, slot, opcode, payload) this request
    carries when it is an inbound message m0serve delivered, else None (a
    handshake, any other request, or any request under another server)."""
    if request.method != "POST" or "HTTP_M0_CHANNEL" not in request.META:
        return None
    return message_from_environ(request.META, request.body)


def is_websocket_message(request):
    """True when request is an inbound WebSocket message (see websocket_message)."""
    return websocket_message(request) is not None


def websocket_view(view):
    """Decorate a view that gates a WebSocket and handles its messages.
    Messages carry no CSRF token (the server made them; a client cannot
    forge one), so the view is csrf_exempt — and a POST that is not a
    message is refused with 403 before the view runs, so exempting it opens
    nothing to cross-site forms."""
    from django.http import HttpResponseForbidden
    from django.views.decorators.csrf import csrf_exempt

    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method == "POST" and not is_websocket_message(request):
            return HttpResponseForbidden("only WebSocket messages are posted here\n")
        return view(request, *args, **kwargs)

    return csrf_exempt(wrapper)


def grant_url(channels, request=None, ws=False, **kwargs):
    """The URL of a granted stream on channels: ``PREFIX/sse?token=GRANT``
    (``PREFIX/ws?token=...`` with ws=True), GRANT from m0pub.grant(channels,
    **kwargs) (ttl, sub, kid, key_file, prefix: see there). With request
    (an HttpRequest) the URL is absolute on the request's host
    (``request.build_absolute_uri``; ws:// or wss:// for a WebSocket);
    without, a path the page resolves. Raises what m0pub.grant raises."""
    path = m0pub.grant_url(channels, ws=ws, **kwargs)
    if request is None:
        return path
    return absolute(request.scheme, request.get_host(), path, ws)
