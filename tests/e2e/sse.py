"""A raw-socket Server-Sent-Events client for the realtime tests.

``SSEStream(port, path, headers)`` sends the GET, reads the response head,
then parses the event stream as EventSource does (WHATWG HTML §9.2.6):
comment lines, ``id``/``event``/``data`` fields, blank-line dispatch. Every
read is bounded by a timeout. Below it, what the tests of the realtime apps
share: a stream held on each worker (``hold_each_worker``) and a publish
through the app's view (``publish_by_view``).
"""

import re
import socket
import time

from rawhttp import request


class Event:
    def __init__(self, id=None, event="message", data=None, comment=None):
        self.id, self.event, self.data, self.comment = id, event, data, comment

    def __repr__(self):
        if self.comment is not None:
            return "<comment %r>" % self.comment
        return "<event id=%s %s %r>" % (self.id, self.event, self.data)


class SSEStream:
    def __init__(self, port, path="/events", headers=(), timeout=10.0, rcvbuf=None, wrap=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(("127.0.0.1", port))
        if wrap is not None:
            self.sock = wrap(self.sock)        # TLS (tlsfix.py): the stream over a TLS listener
        lines = ["GET %s HTTP/1.1" % path, "Host: 127.0.0.1", "Accept: text/event-stream"]
        lines += ["%s: %s" % h for h in headers]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        self.buf = b""
        self.eof = False
        head = self._until(b"\r\n\r\n", timeout)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split()[1])
        self.headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self.raw = b""               # every stream byte after the head

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no data before the deadline")
        self.sock.settimeout(remaining)
        chunk = self.sock.recv(65536)
        if not chunk:
            self.eof = True
            raise EOFError("stream closed")
        self.buf += chunk
        if hasattr(self, "raw"):
            self.raw += chunk

    def _until(self, sep, timeout):
        deadline = time.monotonic() + timeout
        while sep not in self.buf:
            self._fill(deadline)
        block, self.buf = self.buf.split(sep, 1)
        return block

    def next(self, timeout=5.0):
        """The next event or comment block (a comment-only block is returned
        as an Event with .comment set)."""
        block = self._until(b"\n\n", timeout).decode("utf-8")
        ev = Event()
        data = []
        comments = []
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line[1:].strip())
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                ev.id = int(value)
            elif field == "event":
                ev.event = value
            elif field == "data":
                data.append(value)
        if data:
            ev.data = "\n".join(data)
        elif comments:
            ev.comment = " ".join(comments)
        return ev

    def next_event(self, timeout=5.0):
        """The next real event, skipping comments (heartbeats)."""
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next(max(0.01, deadline - time.monotonic()))
            if ev.comment is None:
                return ev

    def wait_closed(self, timeout=5.0):
        """True when the server closes the stream (clean EOF) within timeout."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._fill(deadline)
        except EOFError:
            return True
        except (TimeoutError, socket.timeout):
            return False

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------- the realtime test apps
# broker_app, realtime_app and the presence app greet a held stream with a
# comment naming the worker that holds it, and publish from a view.

WORKER_RE = re.compile(r"connected worker=(\d+)")


def open_worker_stream(port, channel="news", headers=(), timeout=10.0):
    """A stream held on /events?channel=CHANNEL, read past its greeting:
    (stream, the pid of the worker that holds it)."""
    s = SSEStream(port, "/events?channel=%s" % channel, headers=headers, timeout=timeout)
    assert s.status == 200
    return s, int(WORKER_RE.search(s.next().comment).group(1))


def streams_by_worker(port, channel="news", workers=2, headers=(), timeout=10.0):
    """One stream on channel held on each of the workers of the server at
    port (reuseport spreads connections; the spare ones are closed):
    {worker pid: stream}."""
    found, spare = {}, []
    for _ in range(80):
        s, pid = open_worker_stream(port, channel, headers, timeout)
        if pid in found:
            spare.append(s)
        else:
            found[pid] = s
        if len(found) == workers:
            break
    for s in spare:
        s.close()
    assert len(found) == workers, "could not hold a stream on every worker"
    return found


def hold_each_worker(port, channel="news", workers=2, headers=(), timeout=10.0):
    """The same streams, as a list."""
    return list(streams_by_worker(port, channel, workers, headers, timeout).values())


def publish_by_view(port, channel="news", n=1, data=None, event=None):
    """The app's GET /publish view publishes n events on channel: their ids."""
    q = "/publish?channel=%s&n=%d" % (channel, n)
    if data is not None:
        q += "&data=%s" % data
    if event is not None:
        q += "&event=%s" % event
    r = request(port, "GET", q)
    assert r.status == 200, r.body
    return [int(x) for x in r.body.decode().split(",")]
