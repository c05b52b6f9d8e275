"""Flask helpers for m0serve's realtime mode.

    from m0serve.flask import hold_stream_response

    @app.get("/events")
    def events():
        return hold_stream_response("news")

Under ``m0serve --realtime`` the response becomes a Server-Sent-Events
stream held by the server's event loop and subscribed to the channel;
``m0pub.publish(channel, ...)`` reaches it. Under any other server it is an
ordinary short response.
"""

from flask import Response

__all__ = ["hold_stream_response"]


def hold_stream_response(channel, head=": connected\n\n"):
    """A flask.Response asking m0serve to hold the connection as an SSE
    stream on channel; head (str) is sent first."""
    return Response(head, mimetype="text/event-stream",
                    headers={"Cache-Control": "no-cache", "M0-Hold": "stream", "M0-Channel": channel})
