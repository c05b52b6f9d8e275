"""NATS servers for the broker tests (Debian's nats-server): a JetStream
cluster of nats-server processes on free 127.0.0.1 ports (client, route and
monitoring ports of their own), routed to each other, each with its store
in a directory of the test's. Every wait is bounded; stop() kills and reaps
every process it started.

    c = NatsCluster(tmp_path, nodes=3).start()
    c.url                 # nats://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
    c.kill(1)             # kill -9 of the node n2
    c.restart(1)          # n2 again, on its ports and store
    c.stream("m0-events") # the stream's info (a dict), from the JetStream API
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.request

from serverproc import free_port, kill_and_reap, wait_for

NATS_SERVER = shutil.which("nats-server") or "/usr/bin/nats-server"


def api(port, subject, body=b"", timeout=3.0):
    """One request to the server at 127.0.0.1:port over a fresh connection
    (the client protocol, by hand): the reply's payload, or None when no one
    answered (no responders)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        f = s.makefile("rb")
        if not f.readline().startswith(b"INFO "):
            raise ValueError("not a NATS server")
        s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}\r\n'
                  b"SUB _INBOX.t 1\r\nPUB %s _INBOX.t %d\r\n%s\r\n" % (subject.encode(), len(body), body))
        while True:
            line = f.readline()
            if not line:
                raise EOFError("closed")
            if line.startswith(b"PING"):
                s.sendall(b"PONG\r\n")
                continue
            parts = line.split()
            if parts[0] == b"MSG":
                return f.read(int(parts[-1]) + 2)[:-2]
            if parts[0] == b"HMSG":
                raw = f.read(int(parts[-1]) + 2)[:-2]
                hdr = raw[:int(parts[-2])]
                return None if b" 503" in hdr.split(b"\r\n", 1)[0] else raw[int(parts[-2]):]
            if parts[0] == b"-ERR":
                raise ValueError(line.decode())


class NatsCluster:
    """nodes nats-server processes with JetStream (names n1, n2, ...), routed
    to each other when there is more than one. Node i keeps its ports and
    its store across kill/restart."""

    def __init__(self, tmpdir, nodes=3):
        self.dir = str(tmpdir)
        self.n = nodes
        self.ports = [free_port() for _ in range(nodes)]
        self.route_ports = [free_port() for _ in range(nodes)]
        self.monitor_ports = [free_port() for _ in range(nodes)]
        self.procs = {}

    @property
    def url(self):
        return "nats://" + ",".join("127.0.0.1:%d" % p for p in self.ports)

    def name(self, i):
        return "n%d" % (i + 1)

    def _conf(self, i):
        path = os.path.join(self.dir, "%s.conf" % self.name(i))
        text = ("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n"
                "jetstream { store_dir: \"%s\", max_memory_store: 64MB, max_file_store: 256MB }\n"
                % (self.name(i), self.ports[i], self.monitor_ports[i], os.path.join(self.dir, self.name(i))))
        if self.n > 1:
            routes = ", ".join("nats-route://127.0.0.1:%d" % p for j, p in enumerate(self.route_ports) if j != i)
            text += "cluster { name: m0, listen: 127.0.0.1:%d, routes: [%s] }\n" % (self.route_ports[i], routes)
        with open(path, "w") as f:
            f.write(text)
        return path

    def _start(self, i):
        log = open(os.path.join(self.dir, "%s.log" % self.name(i)), "ab")
        self.procs[i] = subprocess.Popen([NATS_SERVER, "-c", self._conf(i)], stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, start_new_session=True)
        log.close()

    def jsz(self, i):
        with urllib.request.urlopen("http://127.0.0.1:%d/jsz" % self.monitor_ports[i], timeout=2) as r:
            return json.loads(r.read())

    def ready(self, i):
        """Node i answers JetStream and knows the meta leader."""
        if self.procs[i].poll() is not None:
            raise RuntimeError("nats-server %s exited with %s" % (self.name(i), self.procs[i].returncode))
        if self.n == 1:
            return api(self.ports[i], "$JS.API.INFO") is not None
        return bool(self.jsz(i).get("meta_cluster", {}).get("leader"))

    def start(self, timeout=30.0):
        for i in range(self.n):
            self._start(i)
        for i in range(self.n):
            wait_for(lambda: self.ready(i), timeout, "nats-server %s ready" % self.name(i))
        return self

    def alive(self, i):
        p = self.procs.get(i)
        return p is not None and p.poll() is None

    def kill(self, i):
        """kill -9 of node i (its store stays)."""
        kill_and_reap(self.procs.get(i))

    def restart(self, i, timeout=30.0):
        """Node i stopped (SIGTERM: a clean restart, or -9 with hard) and
        started again on its ports and store, waited for."""
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        self._start(i)
        wait_for(lambda: self.ready(i), timeout, "nats-server %s back" % self.name(i))

    def pause(self, i):
        """SIGSTOP node i, waited for: every thread of it stopped."""
        pid = self.procs[i].pid
        os.killpg(pid, signal.SIGSTOP)

        def stopped():
            for t in os.listdir("/proc/%d/task" % pid):
                with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
                        return False
            return True
        wait_for(stopped, 5, "nats-server %s stopped" % self.name(i), interval=0.005)

    def resume(self, i):
        os.killpg(self.procs[i].pid, signal.SIGCONT)

    def start_node(self, i, timeout=30.0):
        self._start(i)
        wait_for(lambda: self.ready(i), timeout, "nats-server %s back" % self.name(i))

    def live(self):
        return [i for i in range(self.n) if self.alive(i)]

    def stream(self, name):
        """The stream's info (dict) from any live node, or None when it does
        not exist."""
        last = None
        for i in self.live():
            try:
                r = api(self.ports[i], "$JS.API.STREAM.INFO." + name)
            except (OSError, EOFError, ValueError) as e:
                last = e
                continue
            if r is None:
                continue
            v = json.loads(r)
            if "error" in v:
                if v["error"].get("err_code") == 10059:
                    return None
                last = v["error"]
                continue
            return v
        raise OSError("no node answered the stream's info: %r" % (last,))

    def leader(self, name):
        """The index of the node that leads stream name (None: none now)."""
        info = self.stream(name)
        leader = (info or {}).get("cluster", {}).get("leader")
        return int(leader[1:]) - 1 if leader else None

    def stop(self):
        for p in self.procs.values():
            kill_and_reap(p)
