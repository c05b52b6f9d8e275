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

from serverproc import free_port

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
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self):
        self.kill()
