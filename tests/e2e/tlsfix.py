"""TLS for the e2e suite (issue 31): certificates made with the openssl CLI,
and an m0serve started on a TLS listener.

``Certs(directory)`` makes, once, a CA of the test's own, a server
certificate for localhost and 127.0.0.1 signed by it (its key also in an
encrypted copy with a password file), a client certificate from that CA, and
a client certificate from another CA. ``client_context(certs)`` is a
Python ``ssl`` context that trusts only the test's CA.

``TLSServer(certs, app, *args)`` is ``serverproc.Server`` listening with
``--bind 127.0.0.1:0 --certfile ... --keyfile ...``: its banner names an
``https://`` listener, and it is ready once a request over TLS is answered.
Extra listeners are found in the banner (``listener(scheme, n)``).
"""

import re
import socket
import ssl
import subprocess
import time
from pathlib import Path

from serverproc import START_TIMEOUT, Server, StreamCollector, spawn

LISTEN_RE = re.compile(r"listening on (.*?) workers=")
PASSWORD = "m0-test-password"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   timeout=60)


class Certs:
    def __init__(self, directory):
        d = self.dir = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.ca, self.ca_key = d / "ca.pem", d / "ca.key"
        self.cert, self.key = d / "server.pem", d / "server.key"
        self.key_encrypted, self.password_file = d / "server.enc.key", d / "password"
        self.cert2, self.key2 = d / "server2.pem", d / "server2.key"
        self.client, self.client_key = d / "client.pem", d / "client.key"
        self.other_ca, self.other_ca_key = d / "other-ca.pem", d / "other-ca.key"
        self.stranger, self.stranger_key = d / "stranger.pem", d / "stranger.key"
        if not self.stranger.exists():
            self._make()

    def _ca(self, cert, key, cn):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
                "-out", cert, "-days", "30", "-subj", "/CN=%s" % cn, "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=self.dir)

    def _leaf(self, cert, key, cn, ca, ca_key, ext):
        csr = self.dir / (cert.stem + ".csr")
        extfile = self.dir / (cert.stem + ".ext")
        extfile.write_text(ext)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out",
                csr, "-subj", cn, cwd=self.dir)
        openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert, "-days",
                "30", "-extfile", extfile, cwd=self.dir)

    def _make(self):
        server_ext = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        client_ext = "extendedKeyUsage=clientAuth\n"
        self._ca(self.ca, self.ca_key, "m0serve test CA")
        self._leaf(self.cert, self.key, "/CN=localhost", self.ca, self.ca_key, server_ext)
        self._leaf(self.cert2, self.key2, "/CN=localhost/O=second", self.ca, self.ca_key, server_ext)
        self._leaf(self.client, self.client_key, "/CN=alice/O=m0 tests", self.ca, self.ca_key, client_ext)
        self._ca(self.other_ca, self.other_ca_key, "another CA")
        self._leaf(self.stranger, self.stranger_key, "/CN=mallory", self.other_ca, self.other_ca_key, client_ext)
        self.password_file.write_text(PASSWORD + "\n")
        self.password_file.chmod(0o600)
        openssl("pkey", "-in", self.key, "-out", self.key_encrypted, "-aes256", "-passout", "pass:" + PASSWORD,
                cwd=self.dir)


def client_context(certs, cert=None, key=None, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def tls_connect(port, ctx, server_hostname="localhost", timeout=10.0, session=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        return ctx.wrap_socket(raw, server_hostname=server_hostname, session=session)
    except BaseException:
        raw.close()
        raise


def read_response(sock, timeout=10.0):
    """One HTTP/1.1 response off sock (Content-Length or close-delimited):
    (status, headers dict lower-cased, body)."""
    sock.settimeout(timeout)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the head: %r" % buf)
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed mid-body")
            rest += chunk
        return status, headers, rest[:n]
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while True:
            while b"\r\n" not in rest:
                rest += sock.recv(65536)
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("closed mid-chunk")
                rest += chunk
            if size == 0:
                return status, headers, body
            body += rest[:size]
            rest = rest[size + 2:]
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return status, headers, rest
        rest += chunk


def get(port, ctx, path, headers=(), method="GET", body=b""):
    with tls_connect(port, ctx) as s:
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: localhost:%d" % port, "Connection: close"]
        if body:
            lines.append("Content-Length: %d" % len(body))
        lines += ["%s: %s" % h for h in headers]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        return read_response(s)


class TLSServer(Server):
    """m0serve on a TLS listener (and whatever else args add)."""

    def __init__(self, certs, app, *args, tls_args=None, **kwargs):
        if tls_args is None:
            tls_args = ("--certfile", str(certs.cert), "--keyfile", str(certs.key))
        super().__init__(app, *tls_args, *args, **kwargs)
        self.certs = certs
        self.listeners = []

    def start(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        self.proc = spawn(self.args, self.env, self.cwd)
        self.stdout = StreamCollector(self.proc.stdout)
        self.stderr = StreamCollector(self.proc.stderr)
        match = self.stderr.wait_for(LISTEN_RE, timeout)
        if match is None:
            raise RuntimeError("no banner within %ss (exit status %s); stderr:\n%s"
                               % (timeout, self.proc.poll(), self.stderr.text()))
        self.banner = match.string
        self.listeners = [w.strip() for w in match.group(1).split(",")]
        tls = self.listener("https")
        self.port = int(tls.rsplit(":", 1)[1])
        self._wait_tls(deadline)
        return self

    def listener(self, scheme, n=0):
        """The nth listener of scheme ("https", "http") in the banner: its URL."""
        found = [w.split(" ")[0] for w in self.listeners if w.startswith(scheme + "://")]
        return found[n]

    def port_of(self, scheme, n=0):
        return int(self.listener(scheme, n).rsplit(":", 1)[1])

    def _wait_tls(self, deadline):
        ctx = client_context(self.certs)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("exited with %s during startup; stderr:\n%s"
                                   % (self.proc.returncode, self.stderr.text()))
            if time.monotonic() > deadline:
                raise RuntimeError("no HTTPS response on port %d; stderr:\n%s" % (self.port, self.stderr.text()))
            try:
                with tls_connect(self.port, ctx, timeout=2) as s:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                    if s.recv(5) == b"HTTP/":
                        return
            except ssl.SSLError:
                return          # a worker's alert (a client certificate required): it serves
            except OSError:
                pass
            time.sleep(0.05)

    def url(self, path="/"):
        return "https://localhost:%d%s" % (self.port, path)

