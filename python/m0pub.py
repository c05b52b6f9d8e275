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
returns ``None`` and logs once -- unless a broker is configured.

With a broker (``m0serve --broker URL``; docs/broker.md) events go through
Redis and reach every m0serve host using it. A process that is not a
worker (a Celery task, cron, ``manage.py shell``) publishes there too when
``M0_BROKER`` is set (``redis://[:PASSWORD@]HOST:PORT[/DB]`` or
``unix:///path/redis.sock``; ``M0_BROKER_PREFIX``, ``M0_BROKER_RETENTION``,
``M0_BROKER_BACKLOG`` as the servers have them): same framing, limits and
return value (the global id), through a minimal RESP client below running
the same script as the server. Such a call blocks for one round trip (at
most about 3 s when the broker is down) and raises ``BrokerError`` when the
event could not be published -- never a silent drop -- or its subclass
``PublishOutcomeUnknown`` when the event was sent and no answer came (it may
have been published). ``publish(..., key="order-42-shipped")`` makes a retry
safe: the broker remembers the key for five minutes and answers a repeat
with the first id, appending nothing.

From a coroutine (FastAPI, Starlette, an async Django view), ``publish`` is
safe to call as is without a broker (about a millisecond at most); with one,
``await m0pub.apublish(...)`` keeps the round trip off the event loop.

Standard library only; safe to call from any thread (each thread keeps its
own broker connection; a forked child makes its own).
"""

import hashlib
import logging
import os
import select
import socket
import threading

__all__ = ["publish", "apublish", "MAX_FRAME", "enabled", "BrokerError", "PublishOutcomeUnknown"]

MAX_FRAME = 65536          # bytes of one framed event (the bus datagram cap)
CHANNEL_MAX = 200          # bytes of a channel name
_log = logging.getLogger("m0pub")
_warned = False
_m0 = None


class BrokerError(ConnectionError):
    """The broker could not take the event. Raised as BrokerError itself: it
    could not be reached or refused the event, which was not published."""


class PublishOutcomeUnknown(BrokerError):
    """The event was sent to the broker and no answer came (a timeout, a
    connection that dropped): the broker may have published it or not.
    Retrying with the same ``key=`` publishes it at most once (within
    KEY_TTL_MS of the first try); retrying without a key may publish it
    twice."""


# Keep these equal to the server's (include/m0/broker.h, src/broker_url.c):
# tests/e2e/test_broker.py checks the script text against the C source.
PREFIX_DEFAULT = "m0:"
RETENTION_DEFAULT = 1000
BACKLOG_DEFAULT = 100000
CHANNEL_TTL_MS = 86400000
TIMEOUT = 1.0              # seconds: connect, and each reply
KEY_TTL_MS = 300000        # a publish key is remembered for five minutes
KEY_MAX = 200              # bytes of a publish key
PUBLISH_LUA = (
    "if KEYS[4] then\n"
    "  local first = redis.call('GET', KEYS[4])\n"
    "  if first then return tonumber(first) end\n"
    "end\n"
    "local id = redis.call('INCR', KEYS[1])\n"
    "local seeded = '0'\n"
    "if id == 1 then\n"
    "  local t = redis.call('TIME')\n"
    "  id = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "  redis.call('SET', KEYS[1], string.format('%d', id))\n"
    "  seeded = '1'\n"
    "end\n"
    "local sid = string.format('%d-0', id)\n"
    "redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], sid, 'c', ARGV[1], 'f', ARGV[2], 's', seeded)\n"
    "redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], sid, 'f', ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[3], ARGV[5])\n"
    "if KEYS[4] then redis.call('SET', KEYS[4], string.format('%d', id), 'PX', ARGV[6]) end\n"
    "return id\n"
)
_PUBLISH_SHA = hashlib.sha1(PUBLISH_LUA.encode()).hexdigest()


class _ReplyError(Exception):
    """An error reply (-ERR ...) from the broker."""


def parse_broker_url(url):
    """``redis://[:PASSWORD@]HOST[:PORT][/DB]`` or ``unix:///path[?db=N]`` ->
    dict(host, port, path, password, db, shown). Raises ValueError."""
    cfg = {"host": None, "port": 6379, "path": None, "password": None, "db": 0}
    if url.startswith("unix://"):
        path, _, query = url[7:].partition("?")
        if not path.startswith("/"):
            raise ValueError("M0_BROKER: want unix:///absolute/path/redis.sock")
        if query:
            if not query.startswith("db=") or not query[3:].isdigit():
                raise ValueError("M0_BROKER: the only query is ?db=N")
            cfg["db"] = int(query[3:])
        cfg["path"] = path
        cfg["shown"] = url
        return cfg
    if not url.startswith("redis://"):
        raise ValueError("M0_BROKER: want redis://[:PASSWORD@]HOST:PORT[/DB] or unix:///path/redis.sock")
    rest = url[8:]
    if "@" in rest:
        userinfo, rest = rest.rsplit("@", 1)
        cfg["password"] = userinfo.split(":", 1)[1] if ":" in userinfo else userinfo
        if not cfg["password"]:
            raise ValueError("M0_BROKER: empty password")
    hostport, _, db = rest.partition("/")
    if hostport.startswith("["):
        host, _, port = hostport[1:].partition("]")
        port = port[1:] if port.startswith(":") else ("" if not port else None)
        if port is None:
            raise ValueError("M0_BROKER: want [ADDR]:PORT")
    else:
        host, _, port = hostport.partition(":")
    if not host:
        raise ValueError("M0_BROKER: missing host")
    if port:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("M0_BROKER: port must be 1..65535")
        cfg["port"] = int(port)
    if db:
        if not db.isdigit():
            raise ValueError("M0_BROKER: database must be a number")
        cfg["db"] = int(db)
    cfg["host"] = host
    cfg["shown"] = "redis://%s%s:%d/%d" % (":***@" if cfg["password"] else "", host, cfg["port"], cfg["db"])
    return cfg


class _Resp:
    """One blocking RESP2 connection (the few replies the script returns)."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.pid = os.getpid()
        self.buf = bytearray()           # received, not parsed yet
        try:
            if cfg["path"]:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(TIMEOUT)
                sock.connect(cfg["path"])
            else:
                sock = socket.create_connection((cfg["host"], cfg["port"]), timeout=TIMEOUT)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:
            raise BrokerError("broker %s unreachable: %s" % (cfg["shown"], e.strerror or e)) from None
        self.sock = sock
        try:
            if cfg["password"]:
                self.command(b"AUTH", cfg["password"].encode())
            if cfg["db"]:
                self.command(b"SELECT", str(cfg["db"]).encode())
        except _ReplyError as e:
            self.close()
            raise BrokerError("broker %s refused the connection: %s" % (cfg["shown"], e)) from None
        except (OSError, EOFError) as e:     # nothing of the event was sent yet
            self.close()
            raise BrokerError("broker %s unreachable: %s" % (cfg["shown"], e)) from None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def stale(self):
        """Something to read before anything was asked: the broker closed the
        connection, or sent a reply nobody asked for (it would be taken as
        the next command's answer). Not to be used again."""
        if self.buf:
            return True
        try:
            return bool(select.select([self.sock], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    def send(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(out))

    def command(self, *args):
        self.send(*args)
        return self.reply()

    def _more(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed by the broker")
        self.buf += chunk

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[:end + 2]
                return line
            self._more()

    def reply(self):
        line = self._line()
        kind, body = line[:1], line[1:]
        if kind == b"+":
            return body
        if kind == b"-":
            raise _ReplyError(body.decode("utf-8", "replace"))
        if kind == b":":
            return int(body)
        if kind == b"$":
            n = int(body)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._more()
            data = bytes(self.buf[:n])
            del self.buf[:n + 2]
            return data
        if kind == b"*":
            n = int(body)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise _ReplyError("unexpected reply %r" % line[:20])


_local = threading.local()


def _broker_settings():
    """(cfg, prefix, retention, backlog) from M0_BROKER*, or None when unset."""
    url = os.environ.get("M0_BROKER")
    if not url:
        return None
    cfg = parse_broker_url(url)
    prefix = os.environ.get("M0_BROKER_PREFIX") or PREFIX_DEFAULT
    retention = int(os.environ.get("M0_BROKER_RETENTION") or RETENTION_DEFAULT)
    backlog = int(os.environ.get("M0_BROKER_BACKLOG") or BACKLOG_DEFAULT)
    return cfg, prefix, retention, backlog


def _broker_publish(settings, name, event, data, key=None):
    """Run the publish script; the id. Raises BrokerError (not published) or
    PublishOutcomeUnknown (sent, not answered)."""
    cfg, prefix, retention, backlog = settings
    body = frame(data, event)
    p = prefix.encode()
    keys = [p + b"seq", p + b"log", p + b"ch:" + name] + ([p + b"key:" + key] if key is not None else [])
    args = [_PUBLISH_SHA.encode(), str(len(keys)).encode()] + keys + [
        name, body, str(retention).encode(), str(backlog).encode(), str(CHANNEL_TTL_MS).encode(),
        str(KEY_TTL_MS).encode()]
    sent = False                         # a command left: the broker may have run it
    why = "unreachable"
    for attempt in range(2):
        conn = getattr(_local, "conn", None)
        if conn is not None and (conn.pid != os.getpid() or conn.cfg != cfg or conn.stale()):
            if conn.pid == os.getpid():
                conn.close()
            conn = None                  # inherited through fork, another broker, or closed
        fresh = conn is None
        try:
            if fresh:
                conn = _local.conn = _Resp(cfg)
        except BrokerError as e:
            if not sent:
                raise
            why = str(e)
            break
        left = False
        try:
            conn.send(b"EVALSHA", *args)
            left = True
            try:
                reply = conn.reply()
            except _ReplyError as e:
                if not str(e).startswith("NOSCRIPT"):
                    raise
                left = False             # NOSCRIPT: it did not run; EVAL loads it
                conn.send(b"EVAL", PUBLISH_LUA.encode(), *args[1:])
                left = True
                reply = conn.reply()
        except _ReplyError as e:
            raise BrokerError("broker %s refused the event: %s" % (cfg["shown"], e)) from None
        except (OSError, EOFError, ValueError) as e:   # timeouts included: the script may have run
            sent = sent or left
            conn.close()
            _local.conn = None
            why = str(e) or type(e).__name__
            if not fresh and attempt == 0 and isinstance(e, (EOFError, ConnectionResetError, BrokenPipeError)):
                continue                 # the broker closed a kept connection: once more
            if not sent:
                raise BrokerError("broker %s: %s" % (cfg["shown"], why)) from None
            break
        if conn.buf:                     # more than the one reply: out of step, not used again
            conn.close()
            _local.conn = None
        if not isinstance(reply, int) or reply <= 0:
            raise BrokerError("broker %s answered %r" % (cfg["shown"], reply))
        return reply
    if not sent:
        raise BrokerError("broker %s %s" % (cfg["shown"], why))
    raise PublishOutcomeUnknown(
        "broker %s: %s, after the event was sent: it may have been published (outcome unknown; a retry with "
        "the same key publishes it at most once)" % (cfg["shown"], why))


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
    """True when publish() reaches held streams: running under m0serve
    --realtime or --broker, or M0_BROKER is set."""
    return _setup() is not None or bool(os.environ.get("M0_BROKER"))


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


def _check_key(key):
    if key is None:
        return None
    if not isinstance(key, str):
        raise TypeError("key must be str, not %s" % type(key).__name__)
    raw = key.encode("utf-8")
    if not raw or len(raw) > KEY_MAX or any(b < 0x20 or b >= 0x7F for b in raw):
        raise ValueError("key must be 1..%d bytes of printable ASCII: %r" % (KEY_MAX, key))
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


def publish(channel, data, event=None, key=None):
    """Send data (str or bytes, UTF-8) as one event on channel to every held
    stream of every worker (with a broker: of every host). Returns the
    event's global id (int), or None outside m0serve --realtime without
    M0_BROKER.

    Raises TypeError/ValueError for a bad channel, event, data or key, and
    ValueError when the framed event exceeds 64 KB; with a broker,
    BrokerError (a ConnectionError) when it could not be published, or its
    subclass PublishOutcomeUnknown when it was sent and no answer came (it
    may have been published).

    key (str, 1..200 printable ASCII bytes; with a broker) makes a retry
    safe: the broker remembers it for KEY_TTL_MS (five minutes), and a
    publish with a key it remembers returns the id of the first one and
    appends nothing -- so after PublishOutcomeUnknown, publish again with
    the same key. Keys are shared by every channel of the broker (the same
    prefix): make them unique per event ("order-42-shipped", a UUID).
    Without a broker a publish never has an unknown outcome and the key is
    not used.

    Delivery is best effort: a worker whose bus is full (or that could not
    read the broker's log in time) misses the event and tells its clients
    (m0-gap)."""
    global _warned
    name = _check_channel(channel)
    rawkey = _check_key(key)
    size = len(frame(data, event, 2 ** 63))   # validates data and event too
    if size > MAX_FRAME:
        raise ValueError("event of %d bytes exceeds the %d-byte frame limit" % (size, MAX_FRAME))
    m0 = _setup()
    if m0 is None:
        settings = _broker_settings()
        if settings is not None:
            return _broker_publish(settings, name, event, data, rawkey)
        if not _warned:
            _warned = True
            _log.warning("m0pub.publish(%r): not running under m0serve --realtime; events are dropped",
                         channel)
        return None
    # Framing, numbering and the writes happen in the server (m0.publish):
    # it never waits for a full bus (that worker misses the event and tells
    # its streams: m0-gap), so a call returns within about a millisecond.
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        return m0.publish(name, event, raw, rawkey)
    except TimeoutError as e:            # --broker: sent, not answered
        raise PublishOutcomeUnknown(str(e)) from None
    except ConnectionError as e:         # --broker: the server could not publish it
        raise BrokerError(str(e)) from None


def _brokered():
    """True when a publish from this process goes through the broker."""
    m0 = _setup()
    if m0 is not None:
        return m0._brokered()
    return _broker_settings() is not None


async def apublish(channel, data, event=None, key=None):
    """publish() for coroutines: same arguments, return value and errors.

    Without a broker the event is published directly: the call never waits
    for a worker (about a millisecond at most), so it needs no thread. With
    a broker (--broker, or M0_BROKER outside the server) the call takes one
    Redis round trip, up to about 3 s when the broker is down; it runs in
    the running loop's default executor so the event loop serves on
    meanwhile."""
    if not _brokered():
        return publish(channel, data, event, key)
    import asyncio
    return await asyncio.get_running_loop().run_in_executor(None, publish, channel, data, event, key)
