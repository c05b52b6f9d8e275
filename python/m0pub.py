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
returns ``None`` and logs once -- unless a broker is configured or a
server's publish socket is there (below).

With a broker (``m0serve --broker URL``; docs/broker.md) events go through
Redis or NATS JetStream and reach every m0serve host using it. A process
that is not a worker (a Celery task, cron, ``manage.py shell``) publishes
there too when ``M0_BROKER`` is set (``redis://[[USER]:PASSWORD@]HOST:PORT[/DB]``,
``rediss://...`` over TLS, ``redis+sentinel://HOST:PORT,.../MASTER[/DB]``
through Sentinel, ``unix:///path/redis.sock``, or
``nats://HOST:PORT[,HOST:PORT...]``; ``M0_BROKER_PREFIX``,
``M0_BROKER_RETENTION``, ``M0_BROKER_BACKLOG``, ``M0_BROKER_MIN_REPLICAS``,
``M0_BROKER_REPLICAS``, ``M0_BROKER_CA_CERTS``, ``M0_BROKER_CERTFILE``,
``M0_BROKER_KEYFILE`` as the servers have them): same framing, limits and
return value (the global id), through a minimal RESP client below running
the same script as the server, or a minimal NATS client publishing to the
same JetStream stream. Such a call blocks for one round trip (at
most about 3 s when the broker is down) and raises ``BrokerError`` when the
event could not be published -- never a silent drop -- or its subclass
``PublishOutcomeUnknown`` when the event was sent and no answer came (it may
have been published). ``publish(..., key="order-42-shipped")`` makes a retry
safe: the broker remembers the key for five minutes and answers a repeat
with the first id, appending nothing.

Without a broker, a process on the same host publishes through the server's
local publish socket (``m0serve --realtime`` makes one; docs/realtime.md):
``M0_PUBLISH_SOCKET`` names it (``""``: none), else the server's default
path is used when a server made it there (``default_socket()``:
``$XDG_RUNTIME_DIR/m0serve/publish.sock`` and its fallbacks). The server
publishes the event exactly as a view's publish (the same ids, every
worker's streams; through its broker when it has one) and answers with the
id. Such a call blocks for one local round trip (at most SOCKET_TIMEOUT
seconds for the answer) and raises ``PublishError`` when the event could
not be published -- no server at the socket, or it refused -- never a
silent drop; ``PublishOutcomeUnknown`` when it was sent and no answer came.
``M0_BROKER`` wins when both are there.

From a coroutine (FastAPI, Starlette, an async Django view), ``publish`` is
safe to call as is without a broker (about a millisecond at most); with one,
``await m0pub.apublish(...)`` keeps the round trip off the event loop.

Signed stream grants (``m0serve --grant-path``): ``grant(channels)`` mints
the token a browser subscribes with -- an HS256 JWT (RFC 7519) any JWT
library reads -- and ``grant_url(channels)`` the URL of the stream; the
server verifies it in C, with no Python call. See ``grant``.

Standard library only; safe to call from any thread (each thread keeps its
own broker connection; a forked child makes its own).
"""

import base64
import hashlib
import hmac
import json
import logging
import os
import select
import socket
import ssl
import stat
import threading
import time

__all__ = ["publish", "apublish", "MAX_FRAME", "enabled", "PublishError", "BrokerError", "PublishOutcomeUnknown",
           "default_socket", "grant", "grant_url", "verify_grant", "GrantError", "channel_info", "presence",
           "history"]

MAX_FRAME = 65536          # bytes of one framed event (the bus datagram cap)
CHANNEL_MAX = 200          # bytes of a channel name
_log = logging.getLogger("m0pub")
_warned = False
_m0 = None


class PublishError(ConnectionError):
    """The event was not published: outside a server, no server answers at
    the publish socket, or it refused the event (docs/realtime.md)."""


class BrokerError(PublishError):
    """The broker could not take the event. Raised as BrokerError itself: it
    could not be reached or refused the event, which was not published."""


class PublishOutcomeUnknown(BrokerError):
    """The event was sent (to the broker, or to a server's publish socket)
    and no answer came (a timeout, a connection that dropped): it may have
    been published or not. Retrying with the same ``key=`` publishes it at
    most once through a broker (within KEY_TTL_MS of the first try);
    retrying without a key, or without a broker, may publish it twice."""


# Keep these equal to the server's (include/m0/broker.h, src/realtime/broker_url.c):
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
    "  if first then\n"
    "    redis.call('SET', KEYS[4], first, 'KEEPTTL')\n"
    "    return tonumber(first)\n"
    "  end\n"
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


# The URL schemes and the engine each names (src/realtime/broker_url.c's
# table): (engine, tls, sentinel, default port, several hosts allowed, a
# path after the hosts).
_SCHEMES = {"redis": ("redis", False, False, 6379, False, True), "rediss": ("redis", True, False, 6379, False, True),
            "redis+sentinel": ("redis", False, True, 26379, True, True),
            "rediss+sentinel": ("redis", True, True, 26379, True, True),
            "nats": ("nats", False, False, 4222, True, False)}
WAIT_MS = 500              # WAIT: how long a publish waits for its replicas (M0_BROKER_WAIT_MS)


def _parse_host(text, default_port):
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port[1:] if port.startswith(":") else ("" if not port else None)
        if port is None:
            raise ValueError("M0_BROKER: want [ADDR]:PORT")
    else:
        host, _, port = text.partition(":")
    if not host:
        raise ValueError("M0_BROKER: missing host")
    if port:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("M0_BROKER: port must be 1..65535")
        return host, int(port)
    return host, default_port


def _show_host(host, port):
    return ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)


def parse_broker_url(url):
    """A broker URL -> dict(engine, tls, sentinel, hosts, master, host, port,
    path, username, password, db, shown), as the server parses it:
    ``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`` (USER: an ACL user),
    ``rediss://...`` (TLS),
    ``redis+sentinel://[:PASSWORD@]HOST[:PORT],.../MASTER[/DB]`` (sentinels,
    default port 26379; ``rediss+sentinel://`` with TLS),
    ``unix:///path[?db=N]`` or ``nats://[[USER:]PASSWORD@]HOST[:PORT],...``
    (NATS JetStream servers, default port 4222; a password alone is a
    token). Raises ValueError."""
    cfg = {"engine": "redis", "tls": False, "sentinel": False, "hosts": [], "master": None, "host": None,
           "port": 6379, "path": None, "username": None, "password": None, "db": 0}
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
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in _SCHEMES:
        raise ValueError("M0_BROKER: want redis://[:PASSWORD@]HOST:PORT[/DB], rediss://..., "
                         "redis+sentinel://HOST:PORT,.../MASTER[/DB], unix:///path/redis.sock "
                         "or nats://HOST:PORT[,HOST:PORT...]")
    cfg["engine"], cfg["tls"], cfg["sentinel"], default_port, multi, has_path = _SCHEMES[scheme]
    if "@" in rest:
        userinfo, rest = rest.rsplit("@", 1)
        user, colon, password = userinfo.partition(":")
        cfg["password"] = password if colon else userinfo
        cfg["username"] = user if colon and user else None
        if not cfg["password"]:
            raise ValueError("M0_BROKER: empty password")
    hostlist, slash, path = rest.partition("/")
    if slash and not has_path:
        raise ValueError("M0_BROKER: no path after the hosts (nats://HOST:PORT,HOST:PORT,...)")
    cfg["hosts"] = [_parse_host(h, default_port) for h in hostlist.split(",")]
    if not multi and len(cfg["hosts"]) > 1:
        raise ValueError("M0_BROKER: one HOST:PORT (several are sentinels: redis+sentinel://)")
    cfg["host"], cfg["port"] = cfg["hosts"][0]
    db = path
    if cfg["sentinel"]:
        master, _, db = path.partition("/")
        if not master:
            raise ValueError("M0_BROKER: want redis+sentinel://HOST:PORT,.../MASTER[/DB]")
        cfg["master"] = master
    if db:
        if not db.isdigit():
            raise ValueError("M0_BROKER: database must be a number")
        cfg["db"] = int(db)
    cfg["shown"] = "%s://%s%s%s%s" % (scheme, cfg["username"] or "", ":***@" if cfg["password"] else "",
                                      ",".join(_show_host(h, p) for h, p in cfg["hosts"]),
                                      ("%s/%d" % ("/" + cfg["master"] if cfg["sentinel"] else "", cfg["db"]))
                                      if has_path else "")
    return cfg


class _Resp:
    """One blocking RESP2 connection (the few replies the script returns) to
    the node at (host, port) or path, over TLS with ssl_ctx (the host is the
    name checked and sent as SNI). hello: authenticate and select the
    database (a data node; a sentinel is asked without)."""

    def __init__(self, cfg, host=None, port=None, ssl_ctx=None, hello=True):
        self.cfg = cfg
        self.pid = os.getpid()
        self.buf = bytearray()           # received, not parsed yet
        where = cfg["shown"] if host is None else _show_host(host, port)
        try:
            if cfg["path"] and host is None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(TIMEOUT)
                sock.connect(cfg["path"])
            else:
                host = host or cfg["host"]
                port = port or cfg["port"]
                sock = socket.create_connection((host, port), timeout=TIMEOUT)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if ssl_ctx is not None:
                    try:
                        sock = ssl_ctx.wrap_socket(sock, server_hostname=host)
                    except BaseException:
                        sock.close()
                        raise
        except OSError as e:
            raise BrokerError("broker %s unreachable: %s%s" % (
                cfg["shown"], "" if host is None or not cfg["sentinel"] else where + ": ", _os_reason(e))) from None
        self.sock = sock
        try:
            if hello and cfg["password"]:
                user = [cfg["username"].encode()] if cfg.get("username") else []
                self.command(b"AUTH", *user, cfg["password"].encode())
            if hello and cfg["db"]:
                self.command(b"SELECT", str(cfg["db"]).encode())
            if hello and ssl_ctx is not None and not cfg["sentinel"]:
                # TLS 1.3: a refused client certificate shows at the first
                # read; here it is a refusal, before the event is sent.
                self.command(b"PING")
        except _ReplyError as e:
            self.close()
            raise BrokerError("broker %s refused the connection: %s" % (cfg["shown"], e)) from None
        except (OSError, EOFError) as e:     # nothing of the event was sent yet
            self.close()
            raise BrokerError("broker %s unreachable: %s" % (cfg["shown"], _os_reason(e))) from None

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def stale(self):
        """Something to read before anything was asked: the broker closed the
        connection, or sent a reply nobody asked for (it would be taken as
        the next command's answer). Not to be used again. (TLS's records
        after the handshake, session tickets, are not something.)"""
        if self.buf:
            return True
        try:
            if not select.select([self.sock], [], [], 0)[0] and not getattr(self.sock, "pending", lambda: 0)():
                return False
            self.sock.setblocking(False)
            try:
                self.sock.recv(64)       # bytes, or b"" (closed): either way not to be used
                return True
            except (ssl.SSLWantReadError, BlockingIOError):
                return False
            finally:
                self.sock.settimeout(TIMEOUT)
        except (OSError, ValueError):
            return True

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def send(self, *args):
        self.sock.sendall(self.encode(*args))

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


def _os_reason(e):
    """An OSError's reason, one line (a certificate's verdict by name)."""
    if isinstance(e, ssl.SSLCertVerificationError):
        return "TLS: certificate verify failed: %s" % (e.verify_message or e.reason)
    if isinstance(e, ssl.SSLError):
        return "TLS handshake failed: %s" % (e.reason or e)
    return str(e.strerror or e)


_local = threading.local()
_ssl_contexts = {}         # (ca, cert, key) -> ssl.SSLContext, made once
_sentinel_first = [0]      # which sentinel a dial asks first


def _ssl_context(ca, cert, key):
    k = (ca, cert, key)
    ctx = _ssl_contexts.get(k)
    if ctx is None:
        try:
            ctx = ssl.create_default_context(cafile=ca)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            if cert:
                ctx.load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as e:
            raise BrokerError("broker TLS: cannot load %s: %s" % (ca or cert, e)) from None
        _ssl_contexts[k] = ctx
    return ctx


def _broker_settings():
    """The broker's settings from M0_BROKER* (a dict), or None when unset."""
    url = os.environ.get("M0_BROKER")
    if not url:
        return None
    cfg = parse_broker_url(url)
    env = os.environ.get
    n = env("M0_BROKER_MIN_REPLICAS")
    tls = (env("M0_BROKER_CA_CERTS") or None, env("M0_BROKER_CERTFILE") or None, env("M0_BROKER_KEYFILE") or None)
    return {"cfg": cfg, "prefix": env("M0_BROKER_PREFIX") or PREFIX_DEFAULT,
            "retention": int(env("M0_BROKER_RETENTION") or RETENTION_DEFAULT),
            "backlog": int(env("M0_BROKER_BACKLOG") or BACKLOG_DEFAULT),
            "min_replicas": int(n) if n else (1 if cfg["sentinel"] else 0),
            "replicas": int(env("M0_BROKER_REPLICAS")) if env("M0_BROKER_REPLICAS") else None,
            "ssl": _ssl_context(*tls) if cfg["tls"] else None}


def _ask_sentinels(cfg, ssl_ctx):
    """(host, port) of the primary, as the first sentinel that answers says.
    Raises BrokerError (nothing was sent that could publish)."""
    last = "no sentinel"
    hosts = cfg["hosts"]
    for k in range(len(hosts)):
        i = (_sentinel_first[0] + k) % len(hosts)
        host, port = hosts[i]
        try:
            conn = _Resp(cfg, host, port, ssl_ctx, hello=False)
        except BrokerError as e:
            last = "sentinel %s: %s" % (_show_host(host, port), str(e).rsplit(": ", 1)[-1])
            continue
        try:
            r = conn.command(b"SENTINEL", b"get-master-addr-by-name", cfg["master"].encode())
            if r is None:
                last = "sentinel %s does not know master %s" % (_show_host(host, port), cfg["master"])
                continue
            if not (isinstance(r, list) and len(r) == 2 and all(isinstance(x, bytes) for x in r) and r[1].isdigit()):
                last = "sentinel %s: an unexpected reply" % _show_host(host, port)
                continue
            _sentinel_first[0] = i
            return r[0].decode("ascii", "replace"), int(r[1])
        except (_ReplyError, OSError, EOFError, ValueError) as e:
            last = "sentinel %s: %s" % (_show_host(host, port), e)
        finally:
            conn.close()
    raise BrokerError("broker %s unreachable: %s" % (cfg["shown"], last))


def _dial(settings):
    """A connection to the primary (with Sentinel: where the sentinels say,
    checked with ROLE). Raises BrokerError: nothing was sent that could
    publish."""
    cfg, ssl_ctx = settings["cfg"], settings["ssl"]
    if not cfg["sentinel"]:
        return _Resp(cfg, None if cfg["path"] else cfg["host"], cfg["port"], ssl_ctx)
    host, port = _ask_sentinels(cfg, ssl_ctx)
    conn = _Resp(cfg, host, port, ssl_ctx)
    try:
        role = conn.command(b"ROLE")
    except (_ReplyError, OSError, EOFError, ValueError) as e:
        conn.close()
        raise BrokerError("broker %s unreachable (ROLE): %s" % (cfg["shown"], e)) from None
    if not (isinstance(role, list) and role and role[0] == b"master"):
        conn.close()
        raise BrokerError("broker %s: %s, named by the sentinels, is not the primary now (a failover in progress): "
                          "not published" % (cfg["shown"], _show_host(host, port)))
    return conn


def _kept_conn(attr, cfg, make):
    """This thread's connection to the broker cfg, kept at _local.<attr>
    ("conn": Redis, "nats"), and whether it is new: the kept one, or one
    make() dials (and keeps) when there is none -- or the kept one was
    inherited through fork, is to another broker, or was closed. make's
    BrokerError passes through."""
    conn = getattr(_local, attr, None)
    if conn is not None and (conn.pid != os.getpid() or conn.cfg != cfg or conn.stale()):
        if conn.pid == os.getpid():
            conn.close()
        conn = None
    if conn is not None:
        return conn, False
    conn = make()
    setattr(_local, attr, conn)
    return conn, True


def _redis_publish(settings, name, event, data, key=None):
    """Run the publish script (and WAIT for the replicas asked for); the id.
    Raises BrokerError (not published) or PublishOutcomeUnknown (sent, not
    answered, or not on enough replicas)."""
    cfg, prefix = settings["cfg"], settings["prefix"]
    want = settings["min_replicas"]
    body = frame(data, event)
    p = prefix.encode()
    keys = [p + b"seq", p + b"log", p + b"ch:" + name] + ([p + b"key:" + key] if key is not None else [])
    args = [_PUBLISH_SHA.encode(), str(len(keys)).encode()] + keys + [
        name, body, str(settings["retention"]).encode(), str(settings["backlog"]).encode(),
        str(CHANNEL_TTL_MS).encode(), str(KEY_TTL_MS).encode()]
    wait = _Resp.encode(b"WAIT", str(want).encode(), str(WAIT_MS).encode()) if want > 0 else b""
    hint = "a retry with the same key publishes it at most once"
    sent = False                         # a command left: the broker may have run it
    why = "unreachable"
    for attempt in range(2):
        try:
            conn, fresh = _kept_conn("conn", cfg, lambda: _dial(settings))
        except BrokerError as e:
            if not sent:
                raise
            why = str(e)
            break
        left = False
        replicas = None
        try:
            conn.sock.sendall(_Resp.encode(b"EVALSHA", *args) + wait)
            left = True
            try:
                reply = conn.reply()
            except _ReplyError as e:
                if not str(e).startswith("NOSCRIPT"):
                    raise
                if want > 0:
                    conn.reply()         # the WAIT after it: counted nothing new
                left = False             # NOSCRIPT: it did not run; EVAL loads it
                conn.sock.sendall(_Resp.encode(b"EVAL", PUBLISH_LUA.encode(), *args[1:]) + wait)
                left = True
                reply = conn.reply()
            if want > 0:
                conn.sock.settimeout(TIMEOUT + WAIT_MS / 1000.0)
                try:
                    replicas = conn.reply()
                finally:
                    conn.sock.settimeout(TIMEOUT)
        except _ReplyError as e:
            conn.close()
            _local.conn = None
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
        if conn.buf:                     # more than the replies asked for: out of step, not used again
            conn.close()
            _local.conn = None
        if not isinstance(reply, int) or reply <= 0:
            raise BrokerError("broker %s answered %r" % (cfg["shown"], reply))
        if want > 0 and (not isinstance(replicas, int) or replicas < want):
            conn.close()
            _local.conn = None
            raise PublishOutcomeUnknown(
                "broker %s: event %d is on the primary but WAIT counted %s of %d replicas within %d ms: a failover "
                "could lose it (outcome unknown; %s)" % (cfg["shown"], reply, replicas, want, WAIT_MS, hint))
        return reply
    if not sent:
        raise BrokerError("broker %s %s" % (cfg["shown"], why))
    raise PublishOutcomeUnknown(
        "broker %s: %s, after the event was sent: it may have been published (outcome unknown; %s)"
        % (cfg["shown"], why, hint))


# ------------------------------------------------------------- NATS JetStream
# The NATS engine's publisher (docs/broker.md, "NATS JetStream"): the client
# protocol spoken here, minimally (standard library only, any thread, a
# forked child makes its own, like the RESP client above). A publish is one
# request: HPUB of the frame on PREFIX.TOKEN with Nats-Expected-Stream and,
# with a key, Nats-Msg-Id, answered by the stream's acknowledgement
# {"stream": ..., "seq": N} once its quorum stored it: N is the event's id.
# The names are the server's (include/m0/natsjs.h): keep them equal.

REPLICAS_DEFAULT = 3        # the stream's replicas (--broker-replicas; 1 on a server that is not clustered)
DUPLICATE_WINDOW_NS = KEY_TTL_MS * 1000000  # JetStream's de-duplication window: the key's five minutes
_NATS_LINE_MAX = 64 * 1024  # bytes of a protocol line (an INFO with many URLs is a few KB)
_NATS_PAYLOAD_MAX = 64 * 1024 * 1024    # bytes of a message the reader takes
_NATS_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _nats_token(raw):
    """A channel name (or prefix, or key) as one subject token: bytes of
    [A-Za-z0-9_-] as they are, every other byte %XX (natsjs.h)."""
    return b"".join(bytes([c]) if c in _NATS_PLAIN else b"%%%02X" % c for c in raw)


def _nats_names(prefix):
    """(subject prefix, stream name) of a broker prefix: "m0:" gives
    (b"m0", b"m0-events")."""
    raw = prefix.encode()
    if len(raw) > 1 and raw.endswith(b":"):
        raw = raw[:-1]
    token = _nats_token(raw)
    return token, token + b"-events"


class _NatsProtocolError(Exception):
    """The server sent something the client protocol does not have."""


def _nats_int(b, what):
    if not b or len(b) > 10 or not b.isdigit():
        raise _NatsProtocolError("a bad %s: %r" % (what, b[:20]))
    return int(b)


class _NatsReader:
    """The server's side of the NATS client protocol, parsed from the bytes
    fed to it: next() gives ("INFO", dict), ("MSG", subject, sid, reply,
    headers or None, payload), ("PING",), ("PONG",), ("OK",), ("ERR", text),
    or None when it needs more bytes; anything else raises
    _NatsProtocolError (a line or a message over the limits included), never
    another exception. Pure: tests feed it hostile bytes."""

    def __init__(self):
        self.buf = bytearray()
        self.scanned = 0             # bytes of buf known to hold no CRLF (but maybe a CR at the end)

    def feed(self, data):
        self.buf += data

    def next(self):
        end = self.buf.find(b"\r\n", max(self.scanned - 1, 0))
        if end < 0:
            self.scanned = len(self.buf)
            if len(self.buf) > _NATS_LINE_MAX:
                raise _NatsProtocolError("a protocol line longer than %d bytes" % _NATS_LINE_MAX)
            return None
        self.scanned = 0
        if end > _NATS_LINE_MAX:
            raise _NatsProtocolError("a protocol line longer than %d bytes" % _NATS_LINE_MAX)
        line = bytes(self.buf[:end])
        args = line.split()
        op = args[0].upper() if args else b""
        if op in (b"PING", b"PONG", b"+OK") and len(args) == 1:
            del self.buf[:end + 2]
            return ({b"PING": "PING", b"PONG": "PONG", b"+OK": "OK"}[op],)
        if op == b"-ERR":
            del self.buf[:end + 2]
            return ("ERR", line[4:].strip().strip(b"'").decode("utf-8", "replace"))
        if op == b"INFO":
            try:
                info = json.loads(line[4:].decode("utf-8"))
            except ValueError:
                raise _NatsProtocolError("an INFO that is not JSON") from None
            if not isinstance(info, dict):
                raise _NatsProtocolError("an INFO that is not an object")
            del self.buf[:end + 2]
            return ("INFO", info)
        if op == b"MSG" and len(args) in (4, 5):
            hlen, total = 0, _nats_int(args[-1], "size")
        elif op == b"HMSG" and len(args) in (5, 6):
            hlen, total = _nats_int(args[-2], "header size"), _nats_int(args[-1], "size")
            if hlen > total:
                raise _NatsProtocolError("headers larger than the message")
        else:
            raise _NatsProtocolError("not a NATS protocol line: %r" % line[:40])
        if total > _NATS_PAYLOAD_MAX:
            raise _NatsProtocolError("a message of %d bytes" % total)
        if len(self.buf) < end + 2 + total + 2:
            return None
        body = bytes(self.buf[end + 2:end + 2 + total])
        if self.buf[end + 2 + total:end + 4 + total] != b"\r\n":
            raise _NatsProtocolError("a message not followed by CRLF")
        del self.buf[:end + 4 + total]
        n = 3 if op == b"MSG" else 4
        reply = args[3] if len(args) == n + 2 else None
        headers = body[:hlen] if op == b"HMSG" else None
        if headers is not None and not headers.startswith(b"NATS/1.0"):
            raise _NatsProtocolError("a header block that is not NATS/1.0")
        return ("MSG", args[1], args[2], reply, headers, body[hlen:])


def _nats_status(headers):
    """The status of a header block (b"NATS/1.0 503\\r\\n..." -> 503), or None."""
    if not headers:
        return None
    first = headers.split(b"\r\n", 1)[0].split()
    return int(first[1]) if len(first) > 1 and len(first[1]) == 3 and first[1].isdigit() else None


_nats_first = [0]           # which server a dial tries first (moves on after one fails)


class _Nats:
    """One blocking connection to a NATS server of the URL (the first that
    answers, starting after the last that failed), with an inbox for
    replies. Raises BrokerError when none can be reached (nothing sent)."""

    def __init__(self, settings):
        cfg = settings["cfg"]
        self.cfg = cfg
        self.pid = os.getpid()
        self.reader = _NatsReader()
        self.inbox = b"_INBOX.%s" % os.urandom(8).hex().encode()
        self.n = 0
        self.left = False            # the current request left in full: the server may act on it
        self.sock = None
        hosts = cfg["hosts"]
        last = "no server"
        for k in range(len(hosts)):
            i = (_nats_first[0] + k) % len(hosts)
            host, port = hosts[i]
            try:
                self._open(host, port)
                _nats_first[0] = i
                return
            except _ReplyError as e:
                self.close()
                raise BrokerError("broker %s refused the connection: %s" % (cfg["shown"], e)) from None
            except (OSError, EOFError, _NatsProtocolError) as e:
                self.close()
                last = "%s: %s" % (_show_host(host, port), _os_reason(e) if isinstance(e, OSError) else e)
        raise BrokerError("broker %s unreachable: %s" % (cfg["shown"], last))

    def _open(self, host, port):
        cfg = self.cfg
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        op = self._op()
        if op[0] != "INFO":
            raise _NatsProtocolError("the server did not begin with INFO")
        if not op[1].get("headers", False):
            raise _NatsProtocolError("the server does not take headers (NATS 2.2 or later is needed)")
        hello = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True, "protocol": 1,
                 "lang": "python-m0pub", "version": "1", "name": "m0pub"}
        if cfg["username"]:
            hello["user"], hello["pass"] = cfg["username"], cfg["password"]
        elif cfg["password"]:
            hello["auth_token"] = cfg["password"]
        self.sock.sendall(b"CONNECT %s\r\nPING\r\nSUB %s.* 1\r\n" % (json.dumps(hello).encode(), self.inbox))
        while True:
            op = self._op()
            if op[0] == "PONG":
                return
            if op[0] == "ERR":
                raise _ReplyError(op[1])

    def close(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def stale(self):
        """Something came before anything was asked (the server closed the
        connection, or sent an error): not to be used again. A PING is
        answered, and an INFO (the cluster's servers) read."""
        try:
            while select.select([self.sock], [], [], 0)[0]:
                self.sock.setblocking(False)
                try:
                    data = self.sock.recv(65536)
                except BlockingIOError:
                    return False
                finally:
                    self.sock.settimeout(TIMEOUT)
                if not data:
                    return True
                self.reader.feed(data)
                while True:
                    op = self.reader.next()
                    if op is None:
                        break
                    if op[0] == "PING":
                        self.sock.sendall(b"PONG\r\n")
                    elif op[0] not in ("INFO", "PONG", "OK"):
                        return True
            return False
        except (OSError, ValueError, _NatsProtocolError):
            return True

    def _op(self):
        """The next protocol operation (PINGs answered on the way)."""
        while True:
            op = self.reader.next()
            if op is not None:
                if op[0] == "PING":
                    self.sock.sendall(b"PONG\r\n")
                    continue
                return op
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("connection closed by the broker")
            self.reader.feed(data)

    def request(self, subject, payload, headers=()):
        """Send payload on subject (with headers, a list of (name, value)
        bytes) and wait for the reply: (status or None, payload). Raises
        OSError/EOFError (socket.timeout: no reply within TIMEOUT),
        _ReplyError (the server's -ERR) or _NatsProtocolError; self.left says
        whether the request had left in full."""
        self.n += 1
        reply = b"%s.%d" % (self.inbox, self.n)
        if headers:
            h = b"NATS/1.0\r\n" + b"".join(b"%s: %s\r\n" % kv for kv in headers) + b"\r\n"
            out = b"HPUB %s %s %d %d\r\n%s%s\r\n" % (subject, reply, len(h), len(h) + len(payload), h, payload)
        else:
            out = b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, len(payload), payload)
        self.left = False
        self.sock.sendall(out)
        self.left = True
        while True:
            op = self._op()
            if op[0] == "ERR":
                raise _ReplyError(op[1])
            if op[0] == "MSG" and op[1] == reply:
                return _nats_status(op[4]), op[5]


def _nats_json(payload, what):
    """A JetStream API answer as a dict; raises _NatsProtocolError."""
    try:
        v = json.loads(payload.decode("utf-8"))
    except ValueError:
        raise _NatsProtocolError("%s: not JSON" % what) from None
    if not isinstance(v, dict):
        raise _NatsProtocolError("%s: not an object" % what)
    return v


def _nats_api_error(v):
    """(err_code, description) of an API answer's error, or None."""
    e = v.get("error")
    if e is None:
        return None
    if not isinstance(e, dict):
        return (0, "an error")
    code = e.get("err_code")
    return (code if isinstance(code, int) else 0, str(e.get("description", "an error"))[:200])


def _nats_make_stream(conn, settings, stream, sprefix):
    """Nobody took a publish: when the stream exists (it has no leader now:
    an election after a server was lost), BrokerError; else make it, with
    the server's settings (broker_nats_pub.c). Raises BrokerError."""
    cfg = settings["cfg"]
    want = settings["replicas"]
    try:
        status, payload = conn.request(b"$JS.API.STREAM.INFO." + stream, b"")
        err = None if status == 503 else _nats_api_error(_nats_json(payload, "stream info"))
    except (OSError, EOFError, _NatsProtocolError, _ReplyError) as e:
        raise BrokerError("broker %s: stream %s: %s: not published" % (
            cfg["shown"], stream.decode(), e or type(e).__name__)) from None
    if status == 503:
        raise BrokerError("broker %s: JetStream does not answer (not enabled?): not published" % cfg["shown"])
    if err is None:
        raise BrokerError("broker %s: stream %s took no event (no leader now: an election?): not published" % (
            cfg["shown"], stream.decode()))
    if err[0] != 10059:                        # anything but "stream not found"
        raise BrokerError("broker %s: stream %s: %s: not published" % (cfg["shown"], stream.decode(), err[1]))
    config = {"name": stream.decode(), "subjects": [sprefix.decode() + ".>"], "retention": "limits",
              "max_consumers": -1, "max_msgs": settings["backlog"], "max_bytes": -1, "max_age": 0,
              "max_msgs_per_subject": settings["retention"], "max_msg_size": -1, "discard": "old",
              "storage": "file", "num_replicas": want or REPLICAS_DEFAULT, "duplicate_window": DUPLICATE_WINDOW_NS}
    for _ in range(2):
        try:
            status, payload = conn.request(b"$JS.API.STREAM.CREATE." + stream, json.dumps(config).encode())
            if status == 503:
                raise BrokerError("broker %s: JetStream does not answer (not enabled?): not published" % cfg["shown"])
            err = _nats_api_error(_nats_json(payload, "stream create"))
        except (OSError, EOFError, _NatsProtocolError, _ReplyError) as e:
            raise BrokerError("broker %s: stream %s could not be made: %s" % (
                cfg["shown"], stream.decode(), e or type(e).__name__)) from None
        if err is None or err[0] == 10058:        # made, or made by another publisher meanwhile
            return
        if err[0] == 10074 and want is None:      # one server, not a cluster: R1 is all there is
            config["num_replicas"] = 1
            continue
        raise BrokerError("broker %s: stream %s could not be made: %s" % (cfg["shown"], stream.decode(), err[1]))


def _nats_publish(settings, name, event, data, key=None):
    """Publish through NATS JetStream; the id (the stream sequence). Raises
    BrokerError (not published) or PublishOutcomeUnknown (sent, not
    acknowledged)."""
    cfg = settings["cfg"]
    sprefix, stream = _nats_names(settings["prefix"])
    subject = sprefix + b"." + _nats_token(name)
    body = frame(data, event)
    headers = [(b"Nats-Expected-Stream", stream)] + ([(b"Nats-Msg-Id", _nats_token(key))] if key is not None else [])
    hint = "a retry with the same key publishes it at most once"
    sent = False                         # a request left: the stream may store it
    made = False
    why = "unreachable"
    for attempt in range(3):
        try:
            conn, _ = _kept_conn("nats", cfg, lambda: _Nats(settings))
        except BrokerError as e:
            if not sent:
                raise
            why = str(e)
            break
        try:
            status, payload = conn.request(subject, body, headers)
        except _ReplyError as e:
            conn.close()
            _local.nats = None
            if conn.left and not any(w in str(e) for w in ("Permissions", "Payload")):
                sent = True              # an error not about this message, after it left
                why = "the server's error '%s'" % e
                break
            raise BrokerError("broker %s refused the event: %s" % (cfg["shown"], e)) from None
        except (OSError, EOFError, _NatsProtocolError) as e:   # timeouts included: the stream may store it
            left = conn.left
            sent = sent or left
            conn.close()
            _local.nats = None
            why = "no acknowledgement within %g s" % TIMEOUT if isinstance(e, socket.timeout) else \
                (str(e) or type(e).__name__)
            if attempt < 2 and not isinstance(e, socket.timeout) and (not left or key is not None):
                continue                 # the server went: once more on another (with a key, appended once)
            if not sent:
                raise BrokerError("broker %s: %s" % (cfg["shown"], why)) from None
            break
        if status == 503:                # no responders: no leader now, or no stream
            if made:
                raise BrokerError("broker %s: no JetStream stream takes %s: not published" % (
                    cfg["shown"], subject.decode()))
            _nats_make_stream(conn, settings, stream, sprefix)
            made = True
            continue
        try:
            ack = _nats_json(payload, "the acknowledgement")
        except _NatsProtocolError as e:
            conn.close()
            _local.nats = None
            raise PublishOutcomeUnknown("broker %s: %s: it may have been published (outcome unknown; %s)"
                                        % (cfg["shown"], e, hint)) from None
        err = _nats_api_error(ack)
        if err is not None:
            raise BrokerError("broker %s refused the event: %s" % (cfg["shown"], err[1]))
        seq = ack.get("seq")
        if ack.get("stream") != stream.decode() or not isinstance(seq, int) or isinstance(seq, bool) or seq <= 0:
            raise PublishOutcomeUnknown("broker %s answered %r: it may have been published (outcome unknown; %s)"
                                        % (cfg["shown"], payload[:100], hint))
        return seq
    if not sent:
        raise BrokerError("broker %s %s" % (cfg["shown"], why))
    raise PublishOutcomeUnknown(
        "broker %s: %s, after the event was sent: it may have been published (outcome unknown; %s)"
        % (cfg["shown"], why, hint))


# Every engine a URL can name (broker_engine.h's table): a new engine adds
# its publisher here.
_ENGINES = {"redis": _redis_publish, "nats": _nats_publish}


def _broker_publish(settings, name, event, data, key=None):
    """Publish through the engine the URL names; the id."""
    return _ENGINES[settings["cfg"]["engine"]](settings, name, event, data, key)


SOCKET_TIMEOUT = 5.0       # seconds: a publish socket's answer


def default_socket(uid=None):
    """The path of the publish socket an ``m0serve --realtime`` running as
    uid (default: this process's user) makes when not told otherwise --
    the rule of include/m0/pubpath.h: ``$XDG_RUNTIME_DIR/m0serve/publish.sock``
    (this user's environment only), else ``/run/user/UID/m0serve/publish.sock``
    when that runtime directory is the user's, else
    ``/run/m0serve/publish.sock`` for root and ``/tmp/m0serve-UID/publish.sock``
    for others."""
    me = os.getuid()
    uid = me if uid is None else uid
    xdg = os.environ.get("XDG_RUNTIME_DIR") if uid == me else None
    if xdg and xdg.startswith("/"):
        return xdg + "/m0serve/publish.sock"
    run = "/run/user/%d" % uid
    try:
        st = os.lstat(run)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid:
            return run + "/m0serve/publish.sock"
    except OSError:
        pass
    return "/run/m0serve/publish.sock" if uid == 0 else "/tmp/m0serve-%d/publish.sock" % uid


def _socket_path():
    """(path, is_default) of the publish socket to use outside a server, or
    None: M0_PUBLISH_SOCKET ("" is none), else the default path when a
    socket is there."""
    path = os.environ.get("M0_PUBLISH_SOCKET")
    if path is not None:
        return (path, False) if path else None
    path = default_socket()
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            return path, True
    except OSError:
        pass
    return None


def _read_answer(sock):
    """(status, body bytes) of the socket's answer, read to the end; raises
    OSError (a timeout included) or ValueError (not an answer)."""
    buf = bytearray()
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        if len(buf) > 65536:
            break
    head, sep, body = bytes(buf).partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not sep or not lines[0].startswith(b"HTTP/1.") or len(lines[0]) < 12 or not lines[0][9:12].isdigit():
        raise ValueError("not an HTTP answer")
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            n = int(value.strip())
            if n > len(body):
                raise ValueError("a short answer")
            body = body[:n]
    return int(lines[0][9:12]), body


def _socket_publish(where, name, event, data, key):
    """Publish through a server's publish socket (pubsock.h): the id. Raises
    PublishError (not published), BrokerError (the server's broker refused
    it), PublishOutcomeUnknown (sent, not answered) or ValueError (the
    server refused the arguments)."""
    path, is_default = where
    if is_default:
        # Only a directory of this user's that no one else may write: a
        # socket put there by someone else could read the events.
        d = os.path.dirname(path)
        try:
            st = os.lstat(d)
        except OSError as e:
            raise PublishError("publish socket %s: %s" % (path, e.strerror)) from None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise PublishError("the default publish socket %s is not used: its directory is not this user's alone "
                               "(set M0_PUBLISH_SOCKET)" % path)
    msg = {"channel": name.decode("ascii"), "data": data.decode("utf-8") if isinstance(data, bytes) else data}
    if event is not None:
        msg["event"] = event
    if key is not None:
        msg["key"] = key.decode("ascii")
    body = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    req = (b"POST /publish HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)) + body
    for attempt in range(2):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(SOCKET_TIMEOUT)
        try:
            try:
                sock.connect(path)
            except OSError as e:
                stale = " (a socket left by a server that is gone)" if isinstance(e, ConnectionRefusedError) else ""
                raise PublishError("no m0serve at unix:%s: %s%s; nothing was published"
                                   % (path, e.strerror or e, stale)) from None
            try:
                sock.sendall(req)
            except OSError as e:
                raise PublishError("unix:%s: the event could not be sent (%s); nothing was published"
                                   % (path, e.strerror or e)) from None
            try:
                status, text = _read_answer(sock)
            except (OSError, ValueError) as e:
                why = "no answer within %g s" % SOCKET_TIMEOUT if isinstance(e, socket.timeout) else \
                    "no complete answer (%s)" % (getattr(e, "strerror", None) or e)
                raise PublishOutcomeUnknown("unix:%s: %s after the event was sent: it may have been published "
                                            "(outcome unknown)" % (path, why)) from None
        finally:
            sock.close()
        text = text.decode("utf-8", "replace").strip()
        if status == 200:
            try:
                return int(json.loads(text)["id"])
            except (ValueError, KeyError, TypeError):
                raise PublishOutcomeUnknown("unix:%s answered %r: it may have been published" % (path, text)) from None
        if status == 503 and text.startswith("Draining") and attempt == 0:
            continue                     # a worker being replaced published nothing: a new connection
        if status in (400, 413):
            raise ValueError("unix:%s: %s" % (path, text))
        if status == 504:
            raise PublishOutcomeUnknown("unix:%s: %s" % (path, text))
        if status == 503 and text.startswith("Not published:"):
            raise BrokerError("unix:%s: %s" % (path, text))
        raise PublishError("unix:%s answered %d: %s" % (path, status, text))
    raise PublishError("unix:%s: every worker is draining; nothing was published" % path)


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
    --realtime or --broker, or M0_BROKER is set, or a server's publish
    socket is there (M0_PUBLISH_SOCKET, or the default path)."""
    return _setup() is not None or bool(os.environ.get("M0_BROKER")) or _socket_path() is not None


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
    M0_BROKER or a server's publish socket.

    Raises TypeError/ValueError for a bad channel, event, data or key, and
    ValueError when the framed event exceeds 64 KB; with a broker,
    BrokerError (a ConnectionError) when it could not be published, or its
    subclass PublishOutcomeUnknown when it was sent and no answer came (it
    may have been published); through a publish socket, PublishError when
    no server answers there or it refused the event (not published).

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
        where = _socket_path()
        if where is not None:
            return _socket_publish(where, name, event, data, rawkey)
        if not _warned:
            _warned = True
            _log.warning("m0pub.publish(%r): not running under m0serve --realtime, no M0_BROKER and no publish "
                         "socket at %s (M0_PUBLISH_SOCKET); events are dropped", channel, default_socket())
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
    """True when a publish from this process takes a round trip: through the
    broker, or (outside a server) to a publish socket."""
    m0 = _setup()
    if m0 is not None:
        return m0._brokered()
    return _broker_settings() is not None or _socket_path() is not None


async def apublish(channel, data, event=None, key=None):
    """publish() for coroutines: same arguments, return value and errors.

    Without a broker the event is published directly: the call never waits
    for a worker (about a millisecond at most), so it needs no thread. With
    a broker (--broker, or M0_BROKER outside the server) the call takes one
    Redis round trip, up to about 3 s when the broker is down; so does one
    through a server's publish socket outside the server (a local round
    trip, up to SOCKET_TIMEOUT when the server is stalled): it runs in the
    running loop's default executor so the event loop serves on
    meanwhile."""
    if not _brokered():
        return publish(channel, data, event, key)
    import asyncio
    return await asyncio.get_running_loop().run_in_executor(None, publish, channel, data, event, key)


# --------------------------------------------------- occupancy, presence, history
# Issue 32 (docs/realtime.md, "Who is listening, and what they missed").
# On one host the counts come from the workers' shared table (m0._presence_*),
# the history from the calling view's own event loop (m0._history); with a
# broker the other hosts' parts and the channel's stream are read from Redis
# with the scripts below (src/realtime/presence_broker.c writes the keys).
HISTORY_LIMIT = 100        # events history() returns by default
HISTORY_MAX = 10000        # the most it returns in one call
PRESENCE_LIMIT = 1000      # subs presence() lists by default
PRESENCE_MAX = 100000      # the most it lists
PRESENCE_SUB_MAX = 128     # bytes of a sub that is listed (longer ones: counted, not listed)

_NOW_LUA = (
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local parts = {}\n"
    "for _, p in ipairs(redis.call('ZRANGEBYSCORE', pfx .. 'pr:live', now, '+inf')) do\n"
    "  if own == '' or string.sub(p, 1, #own + 1) ~= own .. '.' then parts[#parts + 1] = p end\n"
    "end\n"
)
# ARGV: prefix, own host ('' none), channel -> {connections of the live
# parts not of own host, the channel's newest stream id or false}
INFO_LUA = (
    "local pfx, own, ch = ARGV[1], ARGV[2], ARGV[3]\n" + _NOW_LUA +
    "local n = 0\n"
    "for _, p in ipairs(parts) do n = n + (tonumber(redis.call('HGET', pfx .. 'pr:n:' .. ch, p)) or 0) end\n"
    "local last = redis.call('XREVRANGE', pfx .. 'ch:' .. ch, '+', '-', 'COUNT', 1)\n"
    "local id = false\n"
    "if last[1] then id = last[1][1] end\n"
    "return {n, id}\n"
)
# ARGV: prefix, own host, channel, limit, then subs to count in any case
# -> flat {sub, connections, ...}: up to limit subs of the live parts not of
# own host, and the given subs' connections there; then, while there is
# room, the subs announced on the channel (pr:j: a join published, no leave
# yet), listed even with 0 connections (their leave pending its debounce)
PRESENCE_LUA = (
    "local pfx, own, ch, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])\n" + _NOW_LUA +
    "local seen, order = {}, {}\n"
    "for i = 5, #ARGV do if not seen[ARGV[i]] then seen[ARGV[i]] = true; order[#order + 1] = ARGV[i] end end\n"
    "local want = #order + limit\n"
    "for _, p in ipairs(parts) do\n"
    "  if #order >= want then break end\n"
    "  local k, cursor = pfx .. 'pr:s:' .. p .. ':' .. ch, '0'\n"
    "  repeat\n"
    "    local r = redis.call('HSCAN', k, cursor, 'COUNT', math.max(limit, 10))\n"
    "    cursor = r[1]\n"
    "    for i = 1, #r[2], 2 do\n"
    "      local sub = r[2][i]\n"
    "      if not seen[sub] and #order < want then seen[sub] = true; order[#order + 1] = sub end\n"
    "    end\n"
    "  until cursor == '0' or #order >= want\n"
    "end\n"
    "local jk, cursor = pfx .. 'pr:j:' .. ch, '0'\n"
    "while #order < want do\n"
    "  local r = redis.call('HSCAN', jk, cursor, 'COUNT', math.max(limit, 10))\n"
    "  cursor = r[1]\n"
    "  for i = 1, #r[2], 2 do\n"
    "    local sub = r[2][i]\n"
    "    if not seen[sub] and #order < want then seen[sub] = true; order[#order + 1] = sub end\n"
    "  end\n"
    "  if cursor == '0' then break end\n"
    "end\n"
    "local out = {}\n"
    "for _, sub in ipairs(order) do\n"
    "  local n = 0\n"
    "  for _, p in ipairs(parts) do\n"
    "    n = n + (tonumber(redis.call('HGET', pfx .. 'pr:s:' .. p .. ':' .. ch, sub)) or 0)\n"
    "  end\n"
    "  if n > 0 or redis.call('HEXISTS', jk, sub) == 1 then out[#out + 1] = sub; out[#out + 1] = n end\n"
    "end\n"
    "return out\n"
)
# ARGV: prefix, channel, since ('' for the newest), limit -> {counter,
# oldest retained id or '', entries: after since oldest first, or the
# newest limit newest first}
HISTORY_LUA = (
    "local pfx, ch, since, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])\n"
    "local top = tonumber(redis.call('GET', pfx .. 'seq')) or 0\n"
    "local key = pfx .. 'ch:' .. ch\n"
    "local oldest = redis.call('XRANGE', key, '-', '+', 'COUNT', 1)\n"
    "local first = ''\n"
    "if oldest[1] then first = oldest[1][1] end\n"
    "if limit == 0 then return {top, first, {}} end\n"
    "if since == '' then return {top, first, redis.call('XREVRANGE', key, '+', '-', 'COUNT', limit)} end\n"
    "return {top, first, redis.call('XRANGE', key, '(' .. since .. '-0', '+', 'COUNT', limit)}\n"
)
_warned_reads = set()


def _read_settings(m0):
    """The broker a read asks, as _broker_settings gives it: in a worker
    the server's --broker (m0 its built-in module), else M0_BROKER's;
    None without one, or when it is not Redis (the NATS engine keeps no
    presence parts or read scripts: channel_info, presence and history
    answer from this host)."""
    if m0 is None:
        got = _broker_settings()
        return got if got is None or got["cfg"]["engine"] == "redis" else None
    got = m0._broker_settings()
    if got is None or got[0]["engine"] != "redis":
        return None              # NATS keeps no such table yet: this host answers (docs/realtime.md)
    cfg, prefix, retention, backlog, min_replicas, ca, cert, key = got
    return {"cfg": cfg, "prefix": prefix, "retention": retention, "backlog": backlog,
            "min_replicas": min_replicas, "ssl": _ssl_context(ca, cert, key) if cfg["tls"] else None}


def _script(settings, lua, *args):
    """Run a read script on the broker (the publish connection of this
    thread; with Sentinel, on the primary the sentinels name): its reply.
    Raises BrokerError."""
    cfg = settings["cfg"]
    sha = hashlib.sha1(lua.encode()).hexdigest().encode()
    argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    for attempt in range(2):
        conn, fresh = _kept_conn("conn", cfg, lambda: _dial(settings))
        try:
            try:
                return conn.command(b"EVALSHA", sha, b"0", *argv)
            except _ReplyError as e:
                if not str(e).startswith("NOSCRIPT"):
                    raise
                return conn.command(b"EVAL", lua.encode(), b"0", *argv)
        except _ReplyError as e:
            conn.close()                 # READONLY: a primary demoted under it; the next read dials again
            _local.conn = None
            raise BrokerError("broker %s refused the read: %s" % (cfg["shown"], e)) from None
        except (OSError, EOFError, ValueError) as e:
            conn.close()
            _local.conn = None
            if not fresh and attempt == 0:
                continue                 # a kept connection the broker closed: once more
            raise BrokerError("broker %s: %s" % (cfg["shown"], e or type(e).__name__)) from None
    raise BrokerError("broker %s: no answer" % cfg["shown"])


def _stream_id(raw):
    """An entry id b"N-0" -> N."""
    return int(raw.split(b"-", 1)[0])


def _sub_text(raw):
    """A sub as the server kept its bytes: UTF-8 (a grant's), else latin-1
    (an M0-Presence header value a WSGI view set)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _sub_bytes(sub):
    """The bytes the server keeps for a sub _sub_text gave."""
    try:
        return sub.encode("utf-8")
    except UnicodeEncodeError:
        return sub.encode("latin-1")


def _unframe(frame):
    """(event or None, data) of one SSE frame the server journaled (WHATWG
    HTML §9.2.6: "event" and "data" fields, one space after the colon
    dropped, data lines joined with LF; the id line is the caller's)."""
    event, data = None, []
    for line in frame.decode("utf-8", "replace").split("\n"):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    return event, "\n".join(data)


def _degraded(what):
    if what not in _warned_reads:
        _warned_reads.add(what)
        _log.warning("m0pub.%s: not running under m0serve --realtime and no M0_BROKER: nothing is held here "
                     "(an empty answer)", what)


def _limit(limit, cap, name):
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError("%s must be an int >= 0" % name)
    return min(limit, cap)


def channel_info(channel):
    """How many connections are held on channel now, and its newest event
    id: ``{"connections": N, "last_id": ID or None}``.

    Under ``m0serve --realtime`` the count is summed over every worker (and
    every event loop) of this host from their shared table, in O(1) per
    worker; with a broker (``--broker``, or ``M0_BROKER`` outside a server)
    the other hosts' parts are added from Redis, where each host keeps its
    own, refreshed within about 20 ms of a change and dropped within 3 s
    when the host dies. last_id is the channel's newest event this host's
    journal knows (with a broker: the channel's stream in Redis), None when
    none is known. A WebSocket or stream held on several channels counts on
    each. Raises BrokerError when the broker cannot be read. Outside
    m0serve without M0_BROKER: ``{"connections": 0, "last_id": None}``
    (nothing is held by this process), logged once."""
    name = _check_channel(channel)
    m0 = _setup()
    settings = _read_settings(m0)
    local, last = 0, None
    if m0 is not None:
        local, last = m0._presence_info(name) or (0, 0)
        if settings is None and not last:
            # Nobody holds it on this host (or no event since they came): this
            # view's loop's journal knows its newest id, if anyone does.
            got = m0._history(name, 0, True, 0)
            last = got[2] if got is not None else 0
        last = last or None
    elif settings is None:
        _degraded("channel_info")
        return {"connections": 0, "last_id": None}
    if settings is not None:
        own = m0._presence_host() if m0 is not None else None
        remote, top = _script(settings, INFO_LUA, settings["prefix"], own or "", name)
        local += int(remote)
        last = _stream_id(top) if top else None
    return {"connections": local, "last_id": last}


def presence(channel, limit=PRESENCE_LIMIT):
    """Who holds channel now: ``{SUB: connections}`` for up to limit
    distinct subs (a grant's ``sub`` claim, or the ``M0-Presence`` header
    of the view that held the stream or socket; connections without one are
    counted by channel_info, not listed here). Summed over every worker of
    this host, and with a broker over every host. limit (default 1000, at
    most 100,000) bounds the work: the lists are walked only that far, then
    each listed sub's connections are counted. A sub longer than 128 bytes
    is not listed. On a channel ``--presence-events`` covers, a sub that has
    had its join and not yet its leave is listed even while nothing holds it
    (its leave pending the debounce: a reload), with 0 connections — the
    list is the state the join/leave events describe. Raises BrokerError
    when the broker cannot be read. Outside m0serve without M0_BROKER:
    ``{}``, logged once."""
    name = _check_channel(channel)
    limit = _limit(limit, PRESENCE_MAX, "limit")
    if limit == 0:
        return {}
    m0 = _setup()
    settings = _read_settings(m0)
    out = {}
    if m0 is not None:
        out = m0._presence_list(name, limit) or {}
        if settings is None:
            return out
    elif settings is None:
        _degraded("presence")
        return {}
    own = m0._presence_host() if m0 is not None else None
    local = [_sub_bytes(sub) for sub in out]
    reply = _script(settings, PRESENCE_LUA, settings["prefix"], own or "", name, max(0, limit - len(out)), *local)
    for i in range(0, len(reply) - 1, 2):
        sub = _sub_text(reply[i])
        if sub in out or len(out) < limit:
            out[sub] = out.get(sub, 0) + int(reply[i + 1])
    return out


def history(channel, since=None, limit=HISTORY_LIMIT):
    """The events of channel the server still keeps, for a page to render
    what it missed before it subscribes: ``{"events": [{"id": ID, "event":
    NAME or None, "data": STR}, ...], "complete": bool}``, oldest first.

    since=ID: the events after ID, at most limit (default 100, at most
    10,000); then subscribe with Last-Event-ID (or ``?lastEventId=``) the
    last one's id for the rest. since=None: the newest limit events.
    complete says that nothing after since (since=None: among or after the
    events given) is missing — the rule that sends a resuming client
    ``m0-gap`` — so False means the page should reload its state from its
    own storage. Without a broker the calling view's event loop answers
    from its journal (``--replay``/``--replay-bytes`` per channel); with a
    broker, the channel's stream in Redis (``--broker-retention``) answers,
    on any host. Raises BrokerError when the broker cannot be read. Outside
    m0serve without M0_BROKER: no events, complete False, logged once."""
    name = _check_channel(channel)
    limit = _limit(limit, HISTORY_MAX, "limit")
    if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
        raise ValueError("since must be an event id (an int >= 0) or None")
    m0 = _setup()
    settings = _read_settings(m0)
    events = []
    if settings is not None:
        top, first, entries = _script(settings, HISTORY_LUA, settings["prefix"], name,
                                      "" if since is None else since, limit)
        if since is None:
            entries = list(reversed(entries))
        for raw_id, fields in entries:
            kv = dict(zip(fields[::2], fields[1::2]))
            frame = kv.get(b"f", b"")
            if frame.startswith(b"\0G"):
                continue                 # a GRIP item: another format, not an event
            event, data = _unframe(frame)
            events.append({"id": _stream_id(raw_id), "event": event, "data": data})
        top = int(top)
        if since is None:
            complete = bool(entries) or top == 0
        elif since > top:
            complete = False             # an id this broker never issued: m0-gap's null case
        elif since == top:
            complete = True              # nothing was published since
        else:
            complete = bool(first) and _stream_id(first) <= since
        return {"events": events, "complete": complete}
    if m0 is None:
        _degraded("history")
        return {"events": [], "complete": False}
    got = m0._history(name, since or 0, since is None, limit)
    if got is None:
        return {"events": [], "complete": False}
    for event_id, frame in got[0]:
        event, data = _unframe(frame)
        events.append({"id": event_id, "event": event, "data": data})
    return {"events": events, "complete": bool(got[1])}


# ------------------------------------------------------------------ grants
# Keep these equal to the server's (include/m0/grant.h, include/m0/jwt.h).
GRANT_TTL = 3600           # seconds a grant() token is valid by default
GRANT_LEEWAY = 30          # seconds of clock skew the server allows (exp, nbf, iat)
GRANT_MAX_CHANNELS = 32
GRANT_KEY_MIN = 32         # bytes of a secret (RFC 7518 §3.2: HS256 wants 256 bits or more)
GRANT_KEY_MAX = 512
GRANT_KID_MAX = 64
GRANT_FILE_MAX = 64 * 1024
GRANT_TOKEN_MAX = 4096     # bytes of a token the server accepts
_WS = b" \t\r\x0b\x0c\n"   # white space, as C's isspace() and bytes.split() see it


class GrantError(ValueError):
    """A key file, a grant's arguments, or a token that cannot be used."""


_keys_cache = {}           # path -> ((dev, ino, size, mtime_ns, mode), [(kid, key bytes)])


def _parse_key_file(raw, name):
    """[(kid, key)] from a key file's bytes, by the server's rules (grant.h)."""
    if b"\0" in raw:
        raise GrantError("%s: holds a NUL byte" % name)
    keys = []
    for lineno, line in enumerate(raw.split(b"\n"), 1):
        line = line.strip(_WS)
        if not line or line.startswith(b"#"):
            continue
        parts = line.split(None, 1)
        kid = parts[0]
        if any(b < 0x21 or b > 0x7E for b in kid):
            raise GrantError("%s:%d: the kid must be printable ASCII" % (name, lineno))
        if len(kid) > GRANT_KID_MAX:
            raise GrantError("%s:%d: the kid is longer than %d bytes" % (name, lineno, GRANT_KID_MAX))
        if len(parts) == 1:
            raise GrantError("%s:%d: want KID SECRET (no secret)" % (name, lineno))
        secret = parts[1]
        if len(secret) < GRANT_KEY_MIN:
            raise GrantError("%s:%d: the secret is shorter than %d bytes (RFC 7518 §3.2)"
                             % (name, lineno, GRANT_KEY_MIN))
        if len(secret) > GRANT_KEY_MAX:
            raise GrantError("%s:%d: the secret is longer than %d bytes" % (name, lineno, GRANT_KEY_MAX))
        try:
            secret.decode("utf-8")
        except UnicodeDecodeError:
            raise GrantError("%s:%d: the secret is not UTF-8" % (name, lineno)) from None
        if len(keys) == 64:
            raise GrantError("%s:%d: more than 64 keys" % (name, lineno))
        kid = kid.decode("ascii")
        if any(k == kid for k, _ in keys):
            raise GrantError("%s:%d: the kid is given twice" % (name, lineno))
        keys.append((kid, secret))
    if not keys:
        raise GrantError("%s: no key (want one 'KID SECRET' a line)" % name)
    return keys


_worker_keys = []          # [] not asked yet; None outside a worker; else m0._grant_keys()
_worker_signer = None      # in a worker: m0._grant_signer


def _server_keys():
    """The keys the m0serve worker running this code verifies grants with
    (its --grant-key-file as it was when the worker started), or None outside
    one (or without --grant-key-file). Fixed for the life of the process."""
    global _worker_keys, _worker_signer
    if _worker_keys == []:
        try:
            import m0                       # the server's built-in module
            keys = m0._grant_keys() if hasattr(m0, "_grant_keys") else None
            _worker_signer = getattr(m0, "_grant_signer", None)
        except ImportError:
            keys = None
        _worker_keys = [(kid, bytes(secret)) for kid, secret in keys] if keys else None
    return _worker_keys


def _signing_kid(keys, key_file):
    """The key grant() signs with when no kid is asked: in an m0serve worker
    (no key_file), the one the server names -- the newest of the worker's
    keys that every worker verifies, which during a rotation is the previous
    key until the workers that lack the new one have exited; else the last
    key of keys (the file's newest)."""
    if key_file is None and _worker_signer is not None and keys is _worker_keys:
        kid = _worker_signer()
        if kid is not None:
            return kid
    return keys[-1][0]


def _grant_keys(key_file=None):
    """The keys to sign and verify with: key_file's when given; in an
    m0serve worker, the keys that worker verifies with (never the file as
    edited since: a key is signed with only once the workers serving know
    it); else M0_GRANT_KEY_FILE's, re-read when the file changes. Raises
    GrantError."""
    if key_file is None:
        keys = _server_keys()
        if keys:
            return keys
    path = key_file or os.environ.get("M0_GRANT_KEY_FILE")
    if not path:
        raise GrantError("no grant key file: pass key_file= or set M0_GRANT_KEY_FILE "
                         "(m0serve --grant-key-file sets it for its workers)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        raise GrantError("cannot open %s: %s" % (path, e.strerror)) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise GrantError("%s: not a regular file" % path)
        if st.st_mode & 0o077:
            raise GrantError("%s: group or other users have access (mode %04o): chmod 600 it"
                             % (path, stat.S_IMODE(st.st_mode)))
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
        cached = _keys_cache.get(path)
        if cached is not None and cached[0] == ident:
            return cached[1]
        raw = f.read(GRANT_FILE_MAX + 1)
    if len(raw) > GRANT_FILE_MAX:
        raise GrantError("%s: larger than 64 KiB" % path)
    keys = _parse_key_file(raw, path)
    _keys_cache[path] = (ident, keys)
    return keys


def _b64url(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=")


def _channels(channels):
    if isinstance(channels, str):
        channels = [channels]
    names = []
    for c in channels:
        _check_channel(c)
        if c not in names:
            names.append(c)
    if not names:
        raise GrantError("a grant names at least one channel")
    if len(names) > GRANT_MAX_CHANNELS:
        raise GrantError("a grant names at most %d channels" % GRANT_MAX_CHANNELS)
    return names


def grant(channels, ttl=GRANT_TTL, sub=None, kid=None, key_file=None, now=None):
    """Mint a grant: the token that lets a browser listen to channels through
    ``m0serve --grant-path PREFIX`` (``PREFIX/sse?token=...`` for an
    EventSource, ``PREFIX/ws?token=...`` for a WebSocket, or the same token
    in ``Authorization: Bearer`` or the ``--grant-cookie``), verified by the
    server in C with no Python call.

    channels: a channel name (str) or an iterable of 1..32 of them, each
    passing the server's channel-name rules (repeats dropped). ttl: seconds
    the token stays valid (default 3600); the server checks it when a stream
    is opened -- also when an EventSource reconnects with the same URL, so
    a page that must survive a longer outage needs a longer ttl or a fresh
    URL; with ``--grant-expire close`` (the default) the stream itself ends
    at exp, after an ``m0-refresh`` notice (docs/realtime.md "Expiry and
    refresh"). sub: an optional str naming who it is for (logged; handed to an
    inbound view). kid: the key to sign with; None signs with the LAST key,
    the newest -- in a worker of m0serve, the newest one every worker of the
    server verifies. The keys: in a worker of m0serve (no key_file given),
    the ones that worker verifies grants with -- its --grant-key-file as it
    was when the worker started, so a grant minted there is accepted by the
    workers serving, also while a key file edit waits for its SIGHUP, after
    a reload failed, and while the workers of the previous reload, which
    lack the new key, finish draining (the previous key signs until they
    have exited; docs/realtime.md "Rotation"). Elsewhere
    (a script, a Celery worker) key_file, default ``M0_GRANT_KEY_FILE``
    (which m0serve sets for its workers), read as the server reads it (one
    ``KID SECRET`` a line, ``#`` comments, mode 600) and re-read when it
    changes. now: the clock in seconds since the epoch (for tests).

    Returns the compact JWT (str): header ``{"alg":"HS256","typ":"JWT",
    "kid":KID}``, claims ``channels``, ``exp``, ``iat`` and ``sub`` when
    given, signed with HMAC-SHA256 over the secret's UTF-8 bytes -- PyJWT's
    ``jwt.decode(token, secret, algorithms=["HS256"])`` reads it. Raises
    TypeError/ValueError for bad channels, GrantError (a ValueError) for a
    bad ttl, sub, kid or key file.
    """
    names = _channels(channels)
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= 10 * 365 * 86400:
        raise GrantError("ttl must be a positive number of seconds (at most ten years)")
    if sub is not None and not isinstance(sub, str):
        raise GrantError("sub must be a str or None")
    keys = _grant_keys(key_file)
    if kid is None:
        kid = _signing_kid(keys, key_file)
    secret = dict(keys).get(kid)
    if secret is None:
        raise GrantError("no key %r in the grant key file" % (kid,))
    t = int(time.time() if now is None else now)
    claims = {"channels": names, "exp": t + int(ttl), "iat": t}
    if sub is not None:
        claims["sub"] = sub
    header = json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}, separators=(",", ":"))
    body = json.dumps(claims, separators=(",", ":"), ensure_ascii=True)
    signing = _b64url(header.encode()) + b"." + _b64url(body.encode())
    sig = hmac.new(secret, signing, hashlib.sha256).digest()
    token = (signing + b"." + _b64url(sig)).decode("ascii")
    if len(token) > GRANT_TOKEN_MAX:
        raise GrantError("the grant is %d bytes, over the server's %d" % (len(token), GRANT_TOKEN_MAX))
    return token


def _grant_prefix(prefix):
    p = prefix if prefix is not None else os.environ.get("M0_GRANT_PATH")
    if not p:
        raise GrantError("no grant path: pass prefix= or run under m0serve --grant-path")
    if not p.startswith("/"):
        raise GrantError("the grant path is absolute: %r" % (p,))
    return p.rstrip("/")


def grant_url(channels, ws=False, prefix=None, **kwargs):
    """The path a browser subscribes with: ``PREFIX/sse?token=GRANT`` (or
    ``PREFIX/ws?token=GRANT`` with ws=True), GRANT minted by grant(channels,
    **kwargs). prefix: the server's --grant-path (default
    ``M0_GRANT_PATH``, which m0serve sets for its workers). A relative URL:
    EventSource and WebSocket resolve it against the page; the framework
    helpers (m0serve.django/flask/fastapi) make it absolute."""
    return "%s/%s?token=%s" % (_grant_prefix(prefix), "ws" if ws else "sse", grant(channels, **kwargs))


def _unb64url(part):
    """Strict base64url (RFC 7515 §2), as the server decodes it."""
    if len(part) % 4 == 1 or not all(c in _B64URL for c in part):
        raise GrantError("malformed token")
    raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    if _b64url(raw).decode() != part:
        raise GrantError("malformed token")      # nonzero unused bits: a second spelling
    return raw


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise GrantError("duplicate member %r" % (k,))
        out[k] = v
    return out


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)      # NaN, Infinity: jansson refuses them too


def _json_object(raw, what):
    try:
        v = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except GrantError:
        raise GrantError("malformed token %s" % what) from None
    except ValueError:
        raise GrantError("malformed token %s" % what) from None
    if not isinstance(v, dict):
        raise GrantError("malformed token %s" % what)
    return v


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def verify_grant(token, key_file=None, now=None, leeway=GRANT_LEEWAY):
    """The server's grant check, in Python, for tests and tools (the server
    itself verifies in C): returns the claims (dict) of token (str), or
    raises GrantError with the reason the server would give. The rules are
    grant.h's and jwt.h's: at most 4096 bytes, strict base64url, a header
    with alg exactly HS256 (no crit; kid selecting the key, or the file's
    only key when there is no kid), the HMAC, claims without duplicate
    members, exp required, nbf/iat honoured with leeway seconds, sub a
    str, channels a list of 1..32 valid channel names. The keys are
    grant()'s: in a worker of m0serve the worker's own, else key_file's."""
    if not isinstance(token, str):
        raise GrantError("the token is a str")
    if len(token) > GRANT_TOKEN_MAX:
        raise GrantError("token too large")
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise GrantError("malformed token")
    header_raw, claims_raw, sig = (_unb64url(p) for p in parts)
    header = _json_object(header_raw, "header")
    if header.get("alg") != "HS256":
        raise GrantError("unsupported token algorithm (HS256 only)")
    if "crit" in header or not isinstance(header.get("typ", ""), str):
        raise GrantError("malformed token header")
    kid = header.get("kid")
    if kid is not None and (not isinstance(kid, str) or not 0 < len(kid.encode("utf-8", "surrogatepass")) <= GRANT_KID_MAX):
        raise GrantError("malformed token header")
    keys = _grant_keys(key_file)
    secret = dict(keys).get(kid) if kid is not None else (keys[0][1] if len(keys) == 1 else None)
    if secret is None:
        raise GrantError("invalid token signature")            # an unknown kid reads the same
    mac = hmac.new(secret, (parts[0] + "." + parts[1]).encode("ascii"), hashlib.sha256).digest()
    if not hmac.compare_digest(mac, sig):
        raise GrantError("invalid token signature")
    claims = _json_object(claims_raw, "claims")
    t = time.time() if now is None else now
    if "exp" not in claims:
        raise GrantError("token has no exp claim")
    for name in ("exp", "nbf", "iat"):
        if name in claims and not _number(claims[name]):
            raise GrantError("malformed token claims")
    if "sub" in claims and not isinstance(claims["sub"], str):
        raise GrantError("malformed token claims")
    if not t - leeway < claims["exp"]:
        raise GrantError("token expired")
    if ("nbf" in claims and t + leeway < claims["nbf"]) or ("iat" in claims and claims["iat"] > t + leeway):
        raise GrantError("token not yet valid")
    channels = claims.get("channels")
    if channels is None or channels == []:
        raise GrantError("token grants no channel")
    if not isinstance(channels, list) or len(channels) > GRANT_MAX_CHANNELS or \
            not all(isinstance(c, str) for c in channels):
        raise GrantError("token channels claim is not a list of channel names")
    for c in channels:
        try:
            _check_channel(c)
        except ValueError:
            raise GrantError("token names an invalid channel") from None
    return claims
