"""A redis-server for the broker tests: started from Debian's binary on a
free 127.0.0.1 port and a unix socket in a temporary directory, with an
append-only file fsynced on every write, so that a kill -9 and a restart
keep what it had accepted (the "retained by the broker" case). Every wait is
bounded; stop() kills it and reaps it.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

from serverproc import free_port, kill_and_reap, wait_for

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


def resp_command(*args):
    """A command as RESP (an array of bulk strings)."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)


class Redis:
    def __init__(self, tmpdir, port=None, persist=True, args=(), password=None):
        self.dir = str(tmpdir)
        self.port = port or free_port()
        self.sock = os.path.join(self.dir, "redis.sock")
        self.persist = persist
        self.args = list(args)           # more redis-server options ("--maxclients", "2")
        self.password = password         # --requirepass; command() authenticates
        self.proc = None

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    @property
    def unix_url(self):
        return "unix://%s" % self.sock

    def start(self, timeout=10.0):
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--unixsocket", self.sock,
                "--dir", self.dir, "--save", "", "--daemonize", "no", "--loglevel", "warning"]
        if self.persist:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        if self.password:
            args += ["--requirepass", self.password]
        args += self.args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.command("PING") == b"PONG":
                    return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("redis-server exited with %s" % self.proc.returncode)
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not answer PING within %ss" % timeout)
            time.sleep(0.05)

    def command(self, *args):
        """One command over a fresh connection; the raw reply's first line
        payload (enough for PING, GET, XLEN)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            out = b"".join(resp_command(*c) for c in ([("AUTH", self.password)] if self.password else []) + [args])
            s.sendall(out)
            f = s.makefile("rb")
            if self.password:
                f.readline()             # +OK of the AUTH
            line = f.readline()
            if line[:1] == b"$":
                n = int(line[1:-2])
                return None if n < 0 else f.read(n)
            return line[1:-2]

    def kill(self):
        """SIGKILL (no shutdown save: what survives is the fsynced AOF)."""
        kill_and_reap(self.proc)

    def stop(self):
        self.kill()


# ------------------------------------------------------------------ Sentinel

REDIS_SENTINEL = shutil.which("redis-sentinel") or "/usr/bin/redis-sentinel"


def _resp_reply(f):
    """One RESP reply from a binary file object (arrays as lists)."""
    line = f.readline()
    if not line:
        raise EOFError("connection closed")
    kind, body = line[:1], line[1:-2]
    if kind in (b"+", b"-"):
        return body if kind == b"+" else RuntimeError(body.decode())
    if kind == b":":
        return int(body)
    if kind == b"$":
        n = int(body)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(body)
        return None if n < 0 else [_resp_reply(f) for _ in range(n)]
    raise ValueError("not RESP: %r" % line)


def ask(port, *args, timeout=2.0, tls=False):
    """One command to 127.0.0.1:port over a fresh connection (TLS without
    verification when tls: the test's own probe): the whole reply (lists,
    bytes, ints; an error reply as a RuntimeError value)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        s = raw
        if tls:
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            s = ctx.wrap_socket(raw)
        s.sendall(resp_command(*args))
        return _resp_reply(s.makefile("rb"))


class SentinelSet:
    """A primary, its replicas and the sentinels watching them, on 127.0.0.1
    ports of their own (Debian's redis-server and redis-sentinel), no
    persistence: a node that comes back is restarted as a replica of the
    primary of the moment. down_after_ms and failover_timeout_ms are the
    sentinels' (small: a failover in about two seconds). stop() kills
    everything it started."""

    def __init__(self, tmpdir, replicas=2, sentinels=3, master="m0", down_after_ms=1000, failover_timeout_ms=2000,
                 certs=None):
        self.certs = certs               # a make_certs directory: every node and sentinel speaks TLS only
        self.dir = str(tmpdir)
        self.master = master
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.ports = [free_port() for _ in range(1 + replicas)]
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.procs = {}                  # port -> Popen (data nodes and sentinels)

    @property
    def url(self):
        return "%s://%s/%s" % ("rediss+sentinel" if self.certs else "redis+sentinel",
                               ",".join("127.0.0.1:%d" % p for p in self.sentinel_ports), self.master)

    def _tls(self):
        """The TLS settings of a node or sentinel (as flags: --name value)."""
        c = self.certs
        return ["--tls-cert-file", os.path.join(c, "server.pem"), "--tls-key-file", os.path.join(c, "server.key"),
                "--tls-ca-cert-file", os.path.join(c, "ca.pem"), "--tls-auth-clients", "no",
                "--tls-replication", "yes"]

    def ask(self, port, *args):
        return ask(port, *args, tls=bool(self.certs))

    def _start_node(self, port, replicaof=None):
        args = [REDIS_SERVER, "--bind", "127.0.0.1", "--dir", self.dir, "--save", "",
                "--appendonly", "no", "--dbfilename", "dump-%d.rdb" % port, "--daemonize", "no",
                "--loglevel", "warning", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]
        args += ["--port", "0", "--tls-port", str(port)] + self._tls() if self.certs else ["--port", str(port)]
        if replicaof:
            args += ["--replicaof", "127.0.0.1", str(replicaof)]
        self.procs[port] = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: self.ask(port, "PING") == b"PONG", 10, "redis-server on %d" % port)

    def start(self, timeout=20.0):
        self._start_node(self.ports[0])
        for p in self.ports[1:]:
            self._start_node(p, replicaof=self.ports[0])
        for p in self.sentinel_ports:
            conf = os.path.join(self.dir, "sentinel-%d.conf" % p)
            quorum = min(2, len(self.sentinel_ports))
            with open(conf, "w") as f:
                if self.certs:
                    t = self._tls()
                    f.write("port 0\ntls-port %d\n" % p + "".join("%s %s\n" % (t[i][2:], t[i + 1])
                                                                   for i in range(0, len(t), 2)))
                else:
                    f.write("port %d\n" % p)
                f.write("bind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d %d\n"
                        "sentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s %d\n"
                        % (self.dir, self.master, self.ports[0], quorum, self.master, self.down_after_ms,
                           self.master, self.failover_timeout_ms))
            self.procs[p] = subprocess.Popen([REDIS_SENTINEL, conf, "--loglevel", "warning"],
                                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.wait_settled(self.ports[0], timeout)
        return self

    def primary(self, sentinel=None):
        """The primary's port as a sentinel says (None: not known)."""
        r = self.ask(sentinel or self.sentinel_ports[0], "SENTINEL", "get-master-addr-by-name", self.master)
        return int(r[1]) if isinstance(r, list) else None

    def linked(self, port):
        """The node at port is a replica whose link to its primary is up."""
        r = self.ask(port, "ROLE")
        return isinstance(r, list) and r[0] == b"slave" and r[3] == b"connected"

    def wait_settled(self, primary, timeout=20.0):
        """Every sentinel names primary, knows the other sentinels and sees
        the live replicas linked; every live replica is linked."""
        live = [p for p in self.ports if p != primary and self.alive(p)]

        def settled():
            for s in self.sentinel_ports:
                if self.primary(s) != primary:
                    return False
                if len(self.ask(s, "SENTINEL", "sentinels", self.master)) != len(self.sentinel_ports) - 1:
                    return False
                seen = {int(dict(zip(r[::2], r[1::2]))[b"port"]) for r in self.ask(s, "SENTINEL", "replicas", self.master)
                        if dict(zip(r[::2], r[1::2])).get(b"master-link-status") == b"ok"
                        and b"s_down" not in dict(zip(r[::2], r[1::2]))[b"flags"]}
                if not set(live) <= seen:
                    return False
            return all(self.linked(p) for p in live)
        wait_for(settled, timeout, "sentinels settled on primary %d" % primary, interval=0.1)

    def alive(self, port):
        p = self.procs.get(port)
        return p is not None and p.poll() is None

    def kill(self, port):
        kill_and_reap(self.procs.get(port))

    def pause(self, port):
        os.killpg(self.procs[port].pid, signal.SIGSTOP)

    def resume(self, port):
        os.killpg(self.procs[port].pid, signal.SIGCONT)

    def wait_failover(self, old, timeout=30.0):
        """The port of the primary the sentinels moved to from old."""
        return wait_for(lambda: all(self.primary(s) not in (None, old) for s in self.sentinel_ports)
                        and self.primary(), timeout, "a failover away from %d" % old, interval=0.05)

    def restart_as_replica(self, port, of):
        """Start the node at port again (empty) as a replica of of."""
        self.kill(port)
        self._start_node(port, replicaof=of)

    def stop(self):
        for p in self.procs.values():
            kill_and_reap(p)


# ----------------------------------------------------------------------- TLS

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)


def make_certs(d):
    """A test PKI in directory d, made with the openssl CLI: ca.pem (the CA),
    server.pem/server.key (127.0.0.1 and localhost, valid), expired.pem/
    expired.key (the same names, its validity over), client.pem/client.key
    (a client certificate of the CA), other-ca.pem (a CA that signed none of
    them). Returns d."""
    d = str(d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=m0 test CA", cwd=d)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "other-ca.key", "-out", "other-ca.pem",
            "-days", "2", "-subj", "/CN=another CA", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca=m0\n[m0]\ndir=.\ndatabase=index.txt\nserial=serial\nnew_certs_dir=.\n"
                "default_md=sha256\npolicy=any\ncopy_extensions=copy\nunique_subject=no\n[any]\ncommonName=supplied\n")
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("01\n")
    for name, dates in (("server", ["-days", "2"]), ("expired", ["-startdate", "20200101000000Z",
                                                                  "-enddate", "20200102000000Z"]),
                        ("client", ["-days", "2"])):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out", name + ".csr",
                "-subj", "/CN=" + ("127.0.0.1" if name != "client" else "m0 client"), cwd=d)
        openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in", name + ".csr",
                "-out", name + ".pem", "-extfile", "san.ext", "-notext", *dates, cwd=d)
    return d


class TLSRedis(Redis):
    """A redis-server that speaks TLS only (tls-port), with the certificate
    cert (a make_certs name: "server", "expired") of the PKI in certs;
    clients need no certificate unless auth_clients."""

    def __init__(self, tmpdir, certs, cert="server", auth_clients=False):
        super().__init__(tmpdir, persist=False)
        self.certs = certs
        self.args = ["--port", "0", "--tls-port", str(self.port),
                     "--tls-cert-file", os.path.join(certs, cert + ".pem"),
                     "--tls-key-file", os.path.join(certs, cert + ".key"),
                     "--tls-ca-cert-file", os.path.join(certs, "ca.pem"),
                     "--tls-auth-clients", "yes" if auth_clients else "no"]

    @property
    def url(self):
        return "rediss://127.0.0.1:%d" % self.port

    def start(self, timeout=10.0):
        args = [REDIS_SERVER, "--bind", "127.0.0.1", "--dir", self.dir, "--save", "", "--daemonize", "no",
                "--loglevel", "warning", "--appendonly", "no"] + self.args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for(lambda: self.command("PING") == b"PONG" or self.proc.poll() is not None, timeout,
                 "TLS redis-server on %d" % self.port)
        if self.proc.poll() is not None:
            raise RuntimeError("redis-server exited with %s" % self.proc.returncode)
        return self

    def command(self, *args):
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)   # the test's own probe: any certificate it served
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(os.path.join(self.certs, "client.pem"), os.path.join(self.certs, "client.key"))
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(resp_command(*args))
                r = _resp_reply(s.makefile("rb"))
                return r
