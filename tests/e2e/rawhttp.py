"""A minimal raw-socket HTTP/1.1 client for the e2e suite.

Nothing here tolerates or repairs a bad response: the point is to observe
exactly what the server put on the wire.  Every socket operation is bounded
by the connection's timeout.
"""

import socket
import time

DEFAULT_TIMEOUT = 10.0
MAX_HEAD = 256 * 1024


class IncompleteResponse(Exception):
    """The peer closed (or reset) the connection in the middle of a response."""

    def __init__(self, message, partial):
        super().__init__(message)
        self.partial = bytes(partial)


class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value), as received, latin-1
        self.body = body

    def header(self, name):
        """The value of the first header called name (any case), or None."""
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def header_names(self):
        return [key.lower() for key, _ in self.headers]

    def __repr__(self):
        return "<Response %d %r %d body bytes>" % (self.status, self.headers, len(self.body))


def build_request(method, target, headers=(), body=None, version="HTTP/1.1", host="127.0.0.1"):
    """Serialise a request.  Adds Host (unless host is None or a Host header is
    given) and Content-Length (when body is given without Transfer-Encoding)."""
    names = [name.lower() for name, _ in headers]
    lines = ["%s %s %s" % (method, target, version)]
    if host is not None and "host" not in names:
        lines.append("Host: %s" % host)
    lines.extend("%s: %s" % (name, value) for name, value in headers)
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        lines.append("Content-Length: %d" % len(body))
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


def chunked(data, sizes=(1, 10, 4096, 65536)):
    """Encode data with the chunked transfer coding, cycling through sizes."""
    out, pos, i = [], 0, 0
    while pos < len(data):
        piece = data[pos:pos + sizes[i % len(sizes)]]
        out.append(b"%x\r\n%s\r\n" % (len(piece), piece))
        pos += len(piece)
        i += 1
    out.append(b"0\r\n\r\n")
    return b"".join(out)


class Conn:
    """One client connection with a read buffer, so pipelined responses parse."""

    def __init__(self, port, timeout=DEFAULT_TIMEOUT, host="127.0.0.1"):
        self.port = port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = bytearray()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def send_tolerant(self, data):
        """Send data; a server that stops reading and resets is not an error
        here, the response (if any) is what the caller checks."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def request(self, method, target, headers=(), body=None, version="HTTP/1.1"):
        self.send(build_request(method, target, headers, body, version, "127.0.0.1:%d" % self.port))
        return self.read_response(method)

    def _fill(self):
        try:
            data = self.sock.recv(262144)
        except ConnectionResetError:
            data = b""
        if not data:
            return False
        self.buf += data
        return True

    def _take_line(self, what):
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                line = bytes(self.buf[:end])
                del self.buf[:end + 2]
                return line
            if len(self.buf) > MAX_HEAD:
                raise AssertionError("%s longer than %d bytes" % (what, MAX_HEAD))
            if not self._fill():
                raise IncompleteResponse("connection closed while reading %s" % what, self.buf)

    def _take_exact(self, size, partial):
        while len(self.buf) < size:
            if not self._fill():
                raise IncompleteResponse("connection closed %d bytes short" % (size - len(self.buf)),
                                         partial + self.buf)
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data

    def read_head(self):
        """Read a status line and header section: (version, status, reason, headers)."""
        status_line = self._take_line("the status line").decode("latin-1")
        version, _, rest = status_line.partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or not (code.isdigit() and len(code) == 3):
            raise AssertionError("bad status line %r" % status_line)
        headers = []
        while True:
            line = self._take_line("the header section").decode("latin-1")
            if not line:
                return version, int(code), reason, headers
            name, sep, value = line.partition(":")
            if not sep or name != name.strip():
                raise AssertionError("bad response header line %r" % line)
            headers.append((name, value.strip(" \t")))

    def read_response(self, method="GET"):
        """Read one response (an interim 1xx one included), framed per RFC 9112 6.3."""
        version, status, reason, headers = self.read_head()
        response = Response(version, status, reason, headers, b"")
        if method == "HEAD" or status < 200 or status in (204, 304):
            return response
        te = response.header("transfer-encoding")
        length = response.header("content-length")
        if te is not None:
            if te.lower() != "chunked":
                raise AssertionError("unexpected response Transfer-Encoding %r" % te)
            response.body = self._read_chunked()
        elif length is not None:
            response.body = self._take_exact(int(length), b"")
        else:
            while self._fill():
                pass
            response.body = bytes(self.buf)
            self.buf.clear()
        return response

    def _read_chunked(self):
        body = bytearray()
        while True:
            try:
                size_line = self._take_line("a chunk size")
            except IncompleteResponse as exc:
                raise IncompleteResponse(str(exc), body) from None
            size = int(size_line.split(b";")[0], 16)
            if size == 0:
                break
            body += self._take_exact(size, body)
            if self._take_exact(2, body) != b"\r\n":
                raise AssertionError("chunk not followed by CRLF")
        while self._take_line("the trailer section"):
            pass
        return bytes(body)

    def wait_closed(self, timeout):
        """True when the peer closes (FIN or RST) within timeout seconds; bytes
        that arrive meanwhile are kept in the buffer."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.sock.settimeout(remaining)
                if not self._fill():
                    return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(DEFAULT_TIMEOUT)

def get_to_close(sock, target):
    """GET target with Connection: close on the connected socket sock (TCP
    or unix), read until the server closes: (head bytes, body bytes)."""
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % target.encode())
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


def request(port, method, target, headers=(), body=None, version="HTTP/1.1", timeout=DEFAULT_TIMEOUT):
    """One request on a fresh connection."""
    with Conn(port, timeout) as conn:
        return conn.request(method, target, headers, body, version)


def tcp_queues():
    """The IPv4 TCP sockets of this network namespace (/proc/net/tcp):
    {(local port, remote port): (bytes sent and not yet acknowledged, bytes
    received and not yet read)}. The tests' sockets are all on 127.0.0.1."""
    out = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, remote, queues = fields[1], fields[2], fields[4]
            tx, rx = (int(q, 16) for q in queues.split(":"))
            out[(int(local.split(":")[1], 16), int(remote.split(":")[1], 16))] = (tx, rx)
    return out


def wait_read_by_peer(sock, timeout):
    """Until the server has read every byte sent on the TCP connection sock:
    they were acknowledged (sock's send queue is empty) and the server's end
    holds none unread. True, or False after timeout seconds."""
    mine, theirs = sock.getsockname()[1], sock.getpeername()[1]
    deadline = time.monotonic() + timeout
    while True:
        q = tcp_queues()
        if q.get((mine, theirs), (1, 0))[0] == 0 and q.get((theirs, mine), (0, 1))[1] == 0:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
