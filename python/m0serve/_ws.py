"""What the Django and Flask WebSocket helpers share (stdlib only).

Under ``m0serve --realtime`` an inbound WebSocket message reaches the view
that approved the socket as an ordinary POST: the payload is the body, and
three headers the server sets say what it is — ``M0-Channel`` (the channel
the socket joined), ``M0-Slot`` (the socket's connection slot in its
worker) and ``M0-Opcode`` (``text`` or ``binary``). The server removes every
``M0-*`` header a client sends, so they cannot be forged under m0serve.
Under any other server these helpers never recognise a message: the
headers could have come from anyone.
"""

import sys
from collections import namedtuple

__all__ = ["WebSocketMessage", "under_m0serve", "under_m0serve_realtime", "message_from_environ",
           "approval_headers", "stream_headers", "DEGRADED_BODY"]

WebSocketMessage = namedtuple("WebSocketMessage", "channel slot opcode payload")
WebSocketMessage.__doc__ = """One inbound WebSocket message: channel (str), slot (int), opcode
("text" or "binary") and payload (str for text, bytes for binary)."""

DEGRADED_BODY = ("This endpoint is a WebSocket: it needs m0serve --realtime "
                 "(see m0serve's README, Realtime).\n")


def under_m0serve():
    """True in an m0serve worker: its built-in ``m0`` module is there (an
    importable ``m0`` from elsewhere does not count), and the server reads
    and removes every ``M0-*`` response header — no client sees one."""
    return "m0" in sys.builtin_module_names


def under_m0serve_realtime():
    """True when this process is an m0serve worker with --realtime (where
    M0-* request headers can only come from the server itself)."""
    try:
        import m0                       # the server's built-in module
    except ImportError:
        return False
    return bool(m0.enabled())


def message_from_environ(environ, body):
    """A WebSocketMessage when environ is an inbound-message POST made by
    m0serve, else None. body: the request body (bytes)."""
    if environ.get("REQUEST_METHOD") != "POST":
        return None
    channel = environ.get("HTTP_M0_CHANNEL")
    opcode = environ.get("HTTP_M0_OPCODE")
    slot = environ.get("HTTP_M0_SLOT")
    if channel is None or opcode not in ("text", "binary") or slot is None:
        return None
    if not under_m0serve_realtime():
        return None
    payload = body.decode("utf-8") if opcode == "text" else bytes(body)
    return WebSocketMessage(channel, int(slot), opcode, payload)


def approval_headers(channel, protocol=None):
    """The response headers that approve a WebSocket upgrade on channel,
    with the chosen subprotocol (one the client offered) if any. Under any
    other server none: they are instructions to m0serve, which keeps them
    from the client, and another server would send them on."""
    if not isinstance(channel, str) or not channel:
        raise ValueError("channel must be a non-empty str")
    if not under_m0serve():
        return {}
    headers = {"M0-Hold": "websocket", "M0-Channel": channel}
    if protocol is not None:
        headers["M0-WebSocket-Protocol"] = protocol
    return headers


def stream_headers(channel):
    """The response headers that ask m0serve to hold an SSE stream on
    channel; under any other server none (see approval_headers)."""
    if not under_m0serve():
        return {}
    return {"M0-Hold": "stream", "M0-Channel": channel}
