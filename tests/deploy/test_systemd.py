"""deploy/m0serve.service and m0serve.socket, started as written under
systemd-socket-activate with a notify socket read here: socket activation
(the unix and the TCP socket of the socket unit, both served by every
worker), Type=notify (READY=1, RELOADING=1 then READY=1 on SIGHUP,
STOPPING=1 on SIGTERM, STATUS=), and the watchdog, which stops while a
worker's loop does not answer."""

import os
import re
import signal
import socket
import time

from serverproc import children_of


def request(unit, path, via="tcp", timeout=10):
    if via == "tcp":
        s = socket.create_connection(("127.0.0.1", unit.site.tcp_port), timeout=timeout)
    else:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        s.connect(unit.unix_path)
    with s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n" % path).encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def workers(unit):
    return children_of(unit.proc.pid)


def test_socket_activation_and_notify(start_unit):
    unit = start_unit()
    # The connection that made systemd-socket-activate start the service
    # was accepted from the inherited socket, not refused.
    first = unit.first_response()
    assert first.startswith(b"HTTP/1.1 200"), first
    n = unit.notify
    ready = n.wait_for("READY", "1")
    fields = n.messages[ready][1]
    assert fields["MAINPID"] == str(unit.proc.pid)       # exec'd in place: the master is the main pid
    assert fields["STATUS"].startswith("2 workers serving"), fields
    assert not any("STOPPING" in m[1] for m in n.messages[:ready])
    text = unit.stderr.text()
    assert "socket activation: serving 2 socket(s)" in text
    assert re.search(r"listening on unix:%s \(fd 3 http, systemd\), http://127\.0\.0\.1:%d \(fd 4 http, systemd\)"
                     % (re.escape(unit.unix_path), unit.site.tcp_port), text), text

    # Both sockets reach both workers (one shared socket each; nobody bound anew).
    pids = set()
    for via in ("tcp", "unix") * 20:
        status, body = request(unit, "/pid", via)
        assert status == 200
        pids.add(int(body))
        if len(pids) == 2:
            break
    assert pids <= workers(unit)

    # systemctl reload: RELOADING=1 (with MONOTONIC_USEC), then READY=1 once
    # the new generation serves.
    old = workers(unit)
    before = time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6
    unit.proc.send_signal(signal.SIGHUP)
    reloading = n.wait_for("RELOADING", "1", after=ready + 1)
    assert before <= int(n.messages[reloading][1]["MONOTONIC_USEC"]) <= time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6
    ready2 = n.wait_for("READY", "1", after=reloading + 1)
    status, body = request(unit, "/pid")
    assert status == 200 and int(body) not in old

    # systemctl stop: STOPPING=1, then a clean exit.
    unit.proc.send_signal(signal.SIGTERM)
    n.wait_for("STOPPING", "1", after=ready2 + 1)
    assert unit.proc.wait(20) == 0
    assert os.path.exists(unit.unix_path)      # the socket unit's, not ours to remove


def test_watchdog_only_while_workers_answer(start_unit):
    # WatchdogSec=30 in the unit; a shorter WATCHDOG_USEC keeps the test short
    # (the master pings every quarter of it).
    unit = start_unit(watchdog_usec=1_000_000)
    unit.first_response()
    n = unit.notify
    n.wait_for("READY", "1")
    t0 = time.monotonic()
    n.wait_for("WATCHDOG", "1", timeout=5)
    time.sleep(1.0)
    assert n.count("WATCHDOG", t0) >= 3

    # A worker whose loop is stopped does not answer pings: no WATCHDOG=1
    # (systemd would restart the service after WatchdogSec).
    victim = min(workers(unit))
    os.kill(victim, signal.SIGSTOP)
    try:
        time.sleep(0.8)                        # the round in flight may still count
        t1 = time.monotonic()
        time.sleep(1.2)
        assert n.count("WATCHDOG", t1) == 0
        assert re.search(r"worker \d \(pid %d\) did not answer a ping" % victim, unit.stderr.text())
    finally:
        os.kill(victim, signal.SIGCONT)
    t2 = time.monotonic()
    n.wait_for("WATCHDOG", "1", after=len(n.messages), timeout=5)
    assert n.count("WATCHDOG", t2) >= 1
