"""Django helpers for m0serve's realtime mode.

    from m0serve.django import hold_stream_response

    def events(request):
        return hold_stream_response(f"user_{request.user.id}")

Under ``m0serve --realtime`` the response becomes a Server-Sent-Events
stream held by the server's event loop (no Python thread per stream) and
subscribed to the channel; ``m0pub.publish(channel, ...)`` from any view
reaches it. Under any other server it is an ordinary short response.
"""

from django.http import HttpResponse

__all__ = ["hold_stream_response"]


def hold_stream_response(channel, head=": connected\n\n"):
    """An HttpResponse asking m0serve to hold the connection as an SSE stream
    on channel. head (str) is sent first. The server checks the channel name
    (1..200 bytes, no control characters, not ``m0.``-prefixed)."""
    response = HttpResponse(head, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["M0-Hold"] = "stream"
    response["M0-Channel"] = channel
    return response
