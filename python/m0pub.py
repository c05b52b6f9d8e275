"""Publish Server-Sent Events to every stream m0serve holds, from any view.

    import m0pub
    m0pub.publish("news", "hello", event="message")   # -> the event id

Under ``m0serve --realtime`` a call frames one SSE event (WHATWG HTML
§9.2.5) and the server writes one datagram to every worker's bus: streams
held by any worker receive it, numbered with a global id (``id:`` line) that
``Last-Event-ID`` resume understands, in id order on every worker. A call
returns within about a millisecond (it never waits for a busy worker: one
that misses the event tells its streams with an ``m0-gap`` event). Outside
m0serve (gunicorn, a management command, tests) ``publish`` is a no-op that
returns ``None`` and logs once.

Standard library only; safe to call from any thread, and from async code
(it does not wait long enough to need an executor).
"""

import logging

__all__ = ["publish", "MAX_FRAME", "enabled"]

MAX_FRAME = 65536          # bytes of one framed event (the bus datagram cap)
CHANNEL_MAX = 200          # bytes of a channel name
_log = logging.getLogger("m0pub")
_warned = False
_m0 = None


def _setup():
    """The server's built-in module when it runs with --realtime, else None."""
    global _m0
    if _m0 is None:
        try:
            import m0                       # the server's built-in module
            _m0 = m0
        except ImportError:
            _m0 = False
    return _m0 if _m0 and _m0.enabled() else None


def enabled():
    """True when publish() reaches held streams (running under m0serve --realtime)."""
    return _setup() is not None


def _check_channel(channel):
    if not isinstance(channel, str):
        raise TypeError("channel must be str, not %s" % type(channel).__name__)
    raw = channel.encode("utf-8")
    if not raw or len(raw) > CHANNEL_MAX:
        raise ValueError("channel name must be 1..%d bytes" % CHANNEL_MAX)
    if any(b < 0x20 or b >= 0x7F for b in raw):
        raise ValueError("channel names are printable ASCII: %r" % channel)
    if raw.startswith(b"m0."):
        raise ValueError("the m0. channel namespace is reserved")
    return raw


def frame(data, event=None, event_id=None):
    """One SSE event as bytes: ``id:``, ``event:``, one ``data:`` line per line
    of data (split on CRLF, LF and CR, as EventSource splits them), blank line."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    elif not isinstance(data, str):
        raise TypeError("data must be str or bytes, not %s" % type(data).__name__)
    parts = []
    if event_id is not None:
        parts.append("id: %d\n" % event_id)
    if event is not None:
        if not isinstance(event, str) or "\n" in event or "\r" in event:
            raise ValueError("event must be a str without line breaks")
        parts.append("event: %s\n" % event)
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    parts.extend("data: %s\n" % line for line in lines)
    parts.append("\n")
    return "".join(parts).encode("utf-8")


def publish(channel, data, event=None):
    """Send data (str or bytes, UTF-8) as one event on channel to every held
    stream of every worker. Returns the event's global id (int), or None
    outside m0serve --realtime.

    Raises TypeError/ValueError for a bad channel, event or data, and
    ValueError when the framed event exceeds 64 KB. Delivery is best effort:
    a worker whose bus is full misses the event (its clients see the gap on
    their next resume)."""
    global _warned
    name = _check_channel(channel)
    size = len(frame(data, event, 2 ** 63))   # validates data and event too
    if size > MAX_FRAME:
        raise ValueError("event of %d bytes exceeds the %d-byte frame limit" % (size, MAX_FRAME))
    m0 = _setup()
    if m0 is None:
        if not _warned:
            _warned = True
            _log.warning("m0pub.publish(%r): not running under m0serve --realtime; events are dropped",
                         channel)
        return None
    # Framing, numbering and the writes happen in the server (m0.publish):
    # it never waits for a full bus (that worker misses the event and tells
    # its streams: m0-gap), so a call returns within about a millisecond.
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return m0.publish(name, event, raw)
