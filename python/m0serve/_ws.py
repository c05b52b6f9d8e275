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


def _presence_header(presence):
    """M0-Presence's value: who the held connection is for in
    m0pub.presence (1..128 bytes of a header value; ASCII ids are safest)."""
    if not isinstance(presence, str) or not presence or len(presence.encode("latin-1", "replace")) > 128:
        raise ValueError("presence must be a non-empty str of at most 128 characters")
    if any(c in presence for c in "\r\n\0"):
        raise ValueError("presence must not hold CR, LF or NUL")
    return presence


def approval_headers(channel, protocol=None, presence=None):
    """The response headers that approve a WebSocket upgrade on channel,
    with the chosen subprotocol (one the client offered) if any, and the
    sub the socket counts for in m0pub.presence (presence). Under any other
    server none: they are instructions to m0serve, which keeps them from
    the client, and another server would send them on."""
    if not isinstance(channel, str) or not channel:
        raise ValueError("channel must be a non-empty str")
    if presence is not None:
        _presence_header(presence)
    if not under_m0serve():
        return {}
    headers = {"M0-Hold": "websocket", "M0-Channel": channel}
    if protocol is not None:
        headers["M0-WebSocket-Protocol"] = protocol
    if presence is not None:
        headers["M0-Presence"] = presence
    return headers


def stream_headers(channel, presence=None, last_event_id=None):
    """The response headers that ask m0serve to hold an SSE stream on
    channel (counted for the sub presence in m0pub.presence; starting after
    event last_event_id when the request sent no Last-Event-ID, e.g. the
    last event of the m0pub.history the page rendered); under any other
    server none (see approval_headers)."""
    if presence is not None:
        _presence_header(presence)
    if last_event_id is not None and (isinstance(last_event_id, bool) or not isinstance(last_event_id, int) or
                                      last_event_id < 0):
        raise ValueError("last_event_id must be an event id (an int >= 0)")
    if not under_m0serve():
        return {}
    headers = {"M0-Hold": "stream", "M0-Channel": channel}
    if presence is not None:
        headers["M0-Presence"] = presence
    if last_event_id is not None:
        headers["M0-Last-Event-ID"] = str(last_event_id)
    return headers
