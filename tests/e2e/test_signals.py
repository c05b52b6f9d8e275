"""Signals an operator sends by habit (gunicorn's, logrotate's) never stop
the server: SIGUSR1 is logged (logs go to stdout/stderr), SIGUSR2 is logged
and ignored, SIGTTIN/SIGTTOU add and remove a worker; workers survive all
four when they are sent to the whole process group."""

import os
import re
import signal
import threading
import time

from rawhttp import Conn, build_request, request
from serverproc import Server, StreamCollector, spawn

WAIT = 15
QUEUED = 300     # connections queued on a stopped worker (resizing under load)


def pid_of(server):
    response = request(server.port, "GET", "/pid")
    assert response.status == 200
    return int(response.body)


def assert_serves(server):
    assert server.proc.poll() is None
    assert pid_of(server) in server.worker_pids()


def test_sigusr1_is_logged_and_the_server_keeps_serving(start_server):
    server = start_server("conformance:application", workers=2)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    server.signal(signal.SIGUSR1)
    assert server.stderr.wait_for(re.compile(r"SIGUSR1: logs go to stdout/stderr, nothing to reopen"), WAIT)
    assert_serves(server)
    assert server.worker_pids() == before


def test_sigusr2_is_logged_and_ignored(start_server):
    server = start_server("conformance:application", workers=1)
    before = server.wait_workers(lambda pids: len(pids) == 1)
    server.signal(signal.SIGUSR2)
    assert server.stderr.wait_for(re.compile(r"SIGUSR2: re-executing the binary is not supported; ignored"), WAIT)
    assert_serves(server)
    assert server.worker_pids() == before


def test_workers_survive_the_signals_sent_to_the_process_group(start_server):
    server = start_server("conformance:application", workers=2)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    os.killpg(server.pid, signal.SIGUSR1)
    os.killpg(server.pid, signal.SIGUSR2)
    assert server.stderr.wait_for(re.compile(r"SIGUSR2: re-executing"), WAIT)
    assert server.stderr.wait_for(re.compile(r"SIGUSR1: logs go"), WAIT)
    # A worker killed by either would be restarted with a new pid and logged.
    for _ in range(10):
        assert_serves(server)
    assert server.worker_pids() == before
    assert "killed by signal" not in server.stderr.text()


def test_sigttin_adds_a_worker_that_serves(start_server):
    server = start_server("conformance:application", workers=2)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    server.signal(signal.SIGTTIN)
    assert server.stderr.wait_for(re.compile(r"worker 2 added: 3 worker\(s\)"), WAIT)
    after = server.wait_workers(lambda pids: len(pids) == 3)
    assert before < after
    (new,) = after - before
    # New connections reach it too: its socket joined the port's group.
    deadline = time.monotonic() + WAIT
    seen = set()
    while new not in seen and time.monotonic() < deadline:
        seen.add(pid_of(server))
    assert new in seen
    assert seen <= after


def test_sigttou_removes_a_worker_but_never_the_last(start_server):
    server = start_server("conformance:application", workers=2)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    server.signal(signal.SIGTTOU)
    assert server.stderr.wait_for(re.compile(r"worker 1 removed: 1 worker\(s\)"), WAIT)
    after = server.wait_workers(lambda pids: len(pids) == 1)
    assert after < before
    for _ in range(10):
        assert pid_of(server) in after
    server.signal(signal.SIGTTOU)
    assert server.stderr.wait_for(re.compile(r"SIGTTOU: ignored: already down to 1 worker"), WAIT)
    assert_serves(server)
    assert server.worker_pids() == after


def sigterm_pending_within(pid, seconds):
    """Whether a SIGTERM waits, undelivered, on the stopped process pid
    within seconds (/proc/PID/status: ShdPnd, the process's pending set)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with open("/proc/%d/status" % pid) as f:
            pending = dict(line.split(":", 1) for line in f if ":" in line)
        if int(pending["ShdPnd"], 16) & (1 << (signal.SIGTERM - 1)):
            return True
        time.sleep(0.02)
    return False


def test_resizing_under_load_loses_no_connection(start_server):
    """Every connection opened while a worker is added and one removed is
    answered: the removed worker's socket gets no new connections first and
    closes only once its queue is empty. The worker being removed is stopped
    (SIGSTOP) while connections queue on its socket and TTOU arrives, then
    continued: only the master's wait for that queue to empty before it
    tells the worker to drain gets those connections answered."""
    server = start_server("conformance:application", workers=2)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    stop = threading.Event()
    failures, answered = [], [0]

    def client():
        while not stop.is_set():
            try:
                response = request(server.port, "GET", "/", timeout=10)
                if response.status != 200:
                    failures.append(response.status)
                answered[0] += 1
            except Exception as exc:  # a reset, a cut response
                failures.append(repr(exc))

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    queued, stopped = [], None
    try:
        server.signal(signal.SIGTTIN)
        assert server.stderr.wait_for(re.compile(r"worker 2 added"), WAIT)
        (stopped_pid,) = server.wait_workers(lambda pids: len(pids) == 3) - before
        stopped = stopped_pid
        os.kill(stopped, signal.SIGSTOP)
        # SO_REUSEPORT spreads connections by their ports: about a third of
        # these wait in the stopped worker's queue, more than the 64 a loop
        # accepts in one wakeup (conn.c), so that the drain it would read
        # next, had the master sent it at once, would close the queue on
        # the rest.
        for _ in range(QUEUED):
            conn = Conn(server.port, timeout=WAIT)
            conn.send(build_request("GET", "/pid", headers=[("Connection", "close")]))
            queued.append(conn)
        server.signal(signal.SIGTTOU)
        assert server.stderr.wait_for(re.compile(r"worker 2 gets no new connections"), WAIT)
        # While its queue is not empty the master must not tell it to drain
        # (the 'D' and the SIGTERM it sends with it): watch for that SIGTERM
        # past the settle time (500 ms) and two of the master's wakeups (at
        # least one a second). A drain read before the rest of the queue is
        # accepted closes the queue on those connections.
        drained_early = sigterm_pending_within(stopped, 2.5)
        os.kill(stopped, signal.SIGCONT)
        stopped = None
        assert server.stderr.wait_for(re.compile(r"worker 2 removed"), WAIT)
        answered_by = []
        for conn in queued:
            try:
                response = conn.read_response()
                assert response.status == 200, response
                answered_by.append(int(response.body))
            except Exception as exc:  # a reset: the queue was closed under it
                failures.append("queued: %r" % exc)
        server.signal(signal.SIGTTOU)
        assert server.stderr.wait_for(re.compile(r"worker 1 removed"), WAIT)
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        for conn in queued:
            conn.close()
        stop.set()
        for t in threads:
            t.join(15)
    assert failures == []
    assert not drained_early, "the master told a worker with a non-empty accept queue to drain"
    assert answered[0] > 0
    assert len(server.worker_pids()) == 1
    # The stopped worker answered what queued on it before it drained:
    # more than one wakeup's accepts (a mean of 100, 64 is 4.4 sd below).
    assert answered_by.count(stopped_pid) > 64, answered_by.count(stopped_pid)


def test_sighup_after_sigttin_reloads_every_worker(start_server):
    server = start_server("conformance:application", workers=1)
    server.signal(signal.SIGTTIN)
    assert server.stderr.wait_for(re.compile(r"worker 1 added: 2 worker\(s\)"), WAIT)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    server.signal(signal.SIGHUP)
    after = server.wait_workers(lambda pids: len(pids) == 2 and not pids & before, 30)
    for _ in range(5):
        assert pid_of(server) in after


def test_sigttin_on_a_unix_socket(start_server, tmp_path):
    path = tmp_path / "m0.sock"
    # The harness waits for an HTTP banner on TCP: start this one by hand.
    server = Server("conformance:application", workers=1)
    server.args[server.args.index("--bind") + 1] = "unix:%s" % path
    start_server.servers.append(server)
    server.proc = spawn(server.args)
    server.stdout = StreamCollector(server.proc.stdout)
    server.stderr = StreamCollector(server.proc.stderr)
    assert server.stderr.wait_for(re.compile(r"worker booted"), WAIT)
    server.signal(signal.SIGTTIN)
    assert server.stderr.wait_for(re.compile(r"worker 1 added: 2 worker\(s\)"), WAIT)
    server.wait_workers(lambda pids: len(pids) == 2)
    server.signal(signal.SIGTTOU)
    assert server.stderr.wait_for(re.compile(r"worker 1 removed: 1 worker\(s\)"), WAIT)
    server.wait_workers(lambda pids: len(pids) == 1)
    assert server.proc.poll() is None


def test_sigttin_is_refused_with_realtime(start_server):
    server = start_server("realtime_app:application", "--realtime", workers=1)
    server.signal(signal.SIGTTIN)
    assert server.stderr.wait_for(re.compile(r"SIGTTIN: ignored: with --realtime the number of workers is fixed"),
                                  WAIT)
    assert server.proc.poll() is None
    assert len(server.worker_pids()) == 1


def test_sigttin_stops_at_max_workers_with_one_line(start_server):
    """SIGTTIN adds workers up to --max-workers (what the metrics' shared
    blocks are sized for, issue 27 item 12), then says so and adds none."""
    server = start_server("conformance:application", "--max-workers", "2", workers=1)
    server.signal(signal.SIGTTIN)
    assert server.stderr.wait_for(re.compile(r"worker 1 added: 2 worker\(s\)"), WAIT)
    server.signal(signal.SIGTTIN)
    assert server.stderr.wait_for(re.compile(r"SIGTTIN: ignored: already at 2 workers, the most --max-workers "
                                             r"allows"), WAIT)
    assert len(server.worker_pids()) == 2
    assert_serves(server)
    proc = spawn(["conformance:application", "--bind", "127.0.0.1:0", "--workers", "3", "--max-workers", "2"])
    _, err = proc.communicate(timeout=WAIT)
    assert proc.returncode == 2 and err.decode().strip() == "m0serve: error: --max-workers: 2 is fewer than --workers 3"
