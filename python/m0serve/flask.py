"""Flask helpers for m0serve's realtime mode.

    from m0serve.flask import hold_stream_response

    @app.get("/events")
    def events():
        return hold_stream_response("news")

Under ``m0serve --realtime`` the response becomes a Server-Sent-Events
stream held by the server's event loop and subscribed to the channel;
``m0pub.publish(channel, ...)`` reaches it. Under any other server it is an
ordinary short response.

WebSockets: a view approves the upgrade with hold_websocket_response, and
each message the client sends comes back to the same URL as a POST.
Werkzeug routes an upgrade request only to a rule marked websocket=True,
and a POST never to one, so the view needs both rules: websocket_route
registers them.

    @websocket_route(app, "/chat")
    def chat():
        message = websocket_message()
        if message is None:
            return hold_websocket_response("room-1")
        m0pub.publish(message.channel, message.payload)
        return ""

Signed stream grants (``m0serve --grant-path /rt --grant-key-file keys``):
a view hands the page a URL the server verifies and holds by itself.

    @app.get("/")
    def page():
        return render_template("page.html", events_url=grant_url(["news"], sub=current_user.id))
"""

import functools

from flask import Response, request

import m0pub
from m0serve._grant import absolute

from m0serve._ws import DEGRADED_BODY, WebSocketMessage, approval_headers, message_from_environ, stream_headers

__all__ = ["grant_url", "hold_stream_response", "hold_websocket_response", "is_websocket_message",
           "websocket_message", "websocket_route", "WebSocketMessage"]


def hold_stream_response(channel, head=": connected\n\n", presence=None, last_event_id=None):
    """A flask.Response asking m0serve to hold the connection as an SSE
    stream on channel; head (str) is sent first (under any other server:
    that alone, without the M0-* headers). presence and last_event_id: as
    m0serve.django.hold_stream_response's."""
    return Response(head, mimetype="text/event-stream",
                    headers=dict({"Cache-Control": "no-cache"}, **stream_headers(channel, presence, last_event_id)))


def hold_websocket_response(channel, protocol=None, presence=None):
    """A flask.Response approving a WebSocket upgrade on channel (see
    m0serve.django.hold_websocket_response): the server answers 101 and
    holds the socket; elsewhere an ordinary 200 explaining why not."""
    return Response(DEGRADED_BODY, mimetype="text/plain", headers=approval_headers(channel, protocol, presence))


def websocket_message():
    """The WebSocketMessage of the current request when it is an inbound
    message m0serve delivered, else None."""
    if request.method != "POST" or "HTTP_M0_CHANNEL" not in request.environ:
        return None
    return message_from_environ(request.environ, request.get_data())


def is_websocket_message():
    """True when the current request is an inbound WebSocket message."""
    return websocket_message() is not None


def websocket_route(app, rule, **options):
    """Register the decorated view on app (a Flask app or blueprint) for rule
    twice: for the WebSocket handshake (websocket=True, GET) and for the
    messages m0serve posts to it (POST). options go to both rules. A POST
    that is not a message (a client cannot forge one: the server drops M0-*
    request headers) is refused with 403 before the view runs."""
    def decorator(view):
        @functools.wraps(view)
        def gate(*args, **kwargs):
            if request.method == "POST" and not is_websocket_message():
                return Response("only WebSocket messages are posted here\n", status=403, mimetype="text/plain")
            return view(*args, **kwargs)

        app.add_url_rule(rule, view_func=gate, websocket=True, **options)
        app.add_url_rule(rule, view_func=gate, methods=["POST"], **options)
        return view
    return decorator


def grant_url(channels, ws=False, external=False, **kwargs):
    """The URL of a granted stream on channels (see
    m0serve.django.grant_url; kwargs go to m0pub.grant: ttl, sub, kid,
    key_file, prefix): a path, or with external=True an absolute URL on the
    current request's host (ws:// or wss:// for a WebSocket)."""
    path = m0pub.grant_url(channels, ws=ws, **kwargs)
    if not external:
        return path
    return absolute(request.scheme, request.host, path, ws)
