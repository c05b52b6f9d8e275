"""A raw-socket RFC 6455 client for the WebSocket tests.

``RawWS(port, path)`` sends the opening handshake (§4.1) with a fresh key and
reads the response head; frames are then written and read byte for byte,
so a test can send what a library never would (unmasked frames, invalid
UTF-8, oversized messages) and see exactly what the server answers. Every
read is bounded by a timeout.
"""

import base64
import hashlib
import os
import socket
import struct
import time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


def expected_accept(key):
    """Sec-WebSocket-Accept for key (RFC 6455 §4.2.2), computed here."""
    return base64.b64encode(hashlib.sha1(key.encode("ascii") + GUID).digest()).decode("ascii")


class Frame:
    def __init__(self, fin, opcode, payload):
        self.fin, self.opcode, self.payload = fin, opcode, payload

    @property
    def close_code(self):
        return struct.unpack(">H", self.payload[:2])[0] if len(self.payload) >= 2 else None

    def __repr__(self):
        return "<frame fin=%d op=%x %r>" % (self.fin, self.opcode, self.payload[:60])


class RawWS:
    def __init__(self, port, path="/ws/echo", headers=(), timeout=10.0, key=None, version="13",
                 handshake=True, wrap=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if wrap is not None:
            self.sock = wrap(self.sock)        # TLS (tlsfix.py): wss://
        self.timeout = timeout
        self.buf = b""
        self.key = key or base64.b64encode(os.urandom(16)).decode("ascii")
        self.status = None
        self.headers = {}
        if handshake:
            lines = ["GET %s HTTP/1.1" % path, "Host: 127.0.0.1", "Upgrade: websocket",
                     "Connection: Upgrade", "Sec-WebSocket-Key: %s" % self.key]
            if version is not None:
                lines.append("Sec-WebSocket-Version: %s" % version)
            lines += ["%s: %s" % h for h in headers]
            self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            self.read_head()

    def read_head(self):
        head = self._until(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        self.status = int(status_line.split(" ")[1])
        self.headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        return self.status

    # ------------------------------------------------------------- wire
    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("no data within the timeout")
        self.sock.settimeout(remaining)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("server closed the connection")
        self.buf += chunk

    def _until(self, marker, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while marker not in self.buf:
            self._fill(deadline)
        head, self.buf = self.buf.split(marker, 1)
        return head

    def _take(self, n, deadline):
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send_raw(self, data):
        self.sock.sendall(data)

    @staticmethod
    def frame(opcode, payload=b"", fin=True, mask=True, rsv=0, key=None):
        """One client frame as bytes (masked unless mask=False)."""
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        b0 = (0x80 if fin else 0) | (rsv << 4) | opcode
        n = len(payload)
        mbit = 0x80 if mask else 0
        if n < 126:
            head = bytes([b0, mbit | n])
        elif n < 65536:
            head = bytes([b0, mbit | 126]) + struct.pack(">H", n)
        else:
            head = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
        if not mask:
            return head + payload
        key = key or os.urandom(4)
        masked = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
        return head + key + masked

    def send(self, opcode, payload=b"", **kw):
        self.sock.sendall(self.frame(opcode, payload, **kw))

    def send_text(self, text):
        self.send(TEXT, text)

    def close_frame(self, code=1000, reason=b""):
        self.send(CLOSE, struct.pack(">H", code) + reason)

    def recv(self, timeout=5.0):
        """The next server frame. Server frames are never masked (§5.1)."""
        deadline = time.monotonic() + timeout
        b0, b1 = self._take(2, deadline)
        assert not b1 & 0x80, "a server frame was masked"
        assert not b0 & 0x70, "reserved bits set on a server frame"
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._take(2, deadline))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._take(8, deadline))[0]
        return Frame(b0 >> 7, b0 & 0x0F, self._take(n, deadline))

    def recv_data(self, timeout=5.0):
        """The next text or binary frame's payload, skipping pings."""
        deadline = time.monotonic() + timeout
        while True:
            f = self.recv(max(0.01, deadline - time.monotonic()))
            if f.opcode in (TEXT, BINARY):
                return f
            assert f.opcode == PING, f

    def wait_eof(self, timeout=5.0):
        """True when the server closes the TCP connection (a FIN) within timeout;
        bytes arriving meanwhile are discarded."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self._fill(deadline)
                self.buf = b""
        except EOFError:
            return True
        except ConnectionResetError:
            return False
        except (TimeoutError, socket.timeout):
            return False

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
