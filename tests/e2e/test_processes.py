"""The prefork process model and startup: worker count, respawn after
SIGKILL, graceful SIGTERM, SIGHUP reload, where the app is imported from,
environment twins of flags, and startup failures (bad flag, failing import)."""

import os
import re
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from rawhttp import Conn, build_request, request
from serverproc import APPS_DIR, REPO, run_to_exit


def pid_of(server, target="/pid"):
    response = request(server.port, "GET", target)
    assert response.status == 200
    return int(response.body)


def test_workers_serve_from_distinct_pids(start_server):
    server = start_server("conformance:application", workers=4)
    assert re.search(r"\bworkers=4\b", server.banner)
    seen = set()
    deadline = time.monotonic() + 30
    with ThreadPoolExecutor(8) as pool:
        while len(seen) < 4 and time.monotonic() < deadline:
            seen.update(pool.map(lambda _: pid_of(server, "/pid?s=0.05"), range(8)))
    assert len(seen) == 4
    assert seen <= server.worker_pids()


def test_killed_worker_is_respawned(start_server):
    server = start_server("conformance:application", workers=2)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    after = server.wait_workers(lambda pids: len(pids) == 2 and victim not in pids)
    assert len(after - before) == 1
    for _ in range(20):
        assert pid_of(server) in after


def test_sigterm_lets_inflight_request_finish_then_exits_0(start_server):
    server = start_server("conformance:application", workers=1)
    tag = uuid.uuid4().hex
    with Conn(server.port, timeout=15) as conn:
        conn.send(build_request("GET", "/slow?s=1.5&tag=" + tag))
        assert server.stderr.wait_for(re.compile("slow start tag=" + tag), 10), "request never reached the app"
        server.signal(signal.SIGTERM)
        response = conn.read_response()
    assert (response.status, response.body) == (200, b"slept 1.5")
    assert server.wait(15) == 0


def test_sighup_replaces_workers(start_server):
    server = start_server("conformance:application", workers=2)
    before = server.wait_workers(lambda pids: len(pids) == 2)
    server.signal(signal.SIGHUP)
    after = server.wait_workers(lambda pids: len(pids) == 2 and not pids & before, 20)
    for _ in range(10):
        assert pid_of(server) in after
    assert server.proc.poll() is None


def test_app_dir_defaults_to_cwd(start_server):
    server = start_server("conformance:application", app_dir=None, cwd=APPS_DIR)
    assert request(server.port, "GET", "/").body == b"ok"


def test_pythonpath_is_honoured(start_server):
    server = start_server("conformance:application", app_dir=None, cwd=REPO, env={"PYTHONPATH": str(APPS_DIR)})
    assert request(server.port, "GET", "/").body == b"ok"


def test_environment_variable_sets_workers(start_server):
    server = start_server("conformance:application", workers=None, env={"M0_WORKERS": "3"})
    assert re.search(r"\bworkers=3\b", server.banner)
    assert len(server.wait_workers(lambda pids: len(pids) == 3)) == 3


def test_bad_flag_exits_2_naming_the_flag():
    status, stderr = run_to_exit(["conformance:application", "--bind", "127.0.0.1:0",
                                  "--app-dir", str(APPS_DIR), "--no-such-flag"])
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert status == 2
    assert len(lines) == 1 and "--no-such-flag" in lines[0], stderr


def test_a_port_another_server_serves_is_refused(start_server):
    """A second m0serve on a port the first one serves exits 1 naming it,
    as gunicorn and uvicorn do; SO_REUSEPORT would otherwise let both serve
    it, splitting the connections between two applications."""
    first = start_server("conformance:application", workers=2)
    for host in ("127.0.0.1", "0.0.0.0"):
        status, stderr = run_to_exit(["conformance:application", "--bind", "%s:%d" % (host, first.port),
                                      "--app-dir", str(APPS_DIR)])
        assert status == 1 and "Address already in use" in stderr, stderr
    assert request(first.port, "GET", "/environ").status == 200


def test_import_failure_prints_traceback_and_exits_1():
    status, stderr = run_to_exit(["importfail:application", "--bind", "127.0.0.1:0",
                                  "--app-dir", str(APPS_DIR), "--workers", "2"])
    assert status == 1
    assert "Traceback (most recent call last)" in stderr
    assert "RuntimeError: importfail: deliberate failure at import time" in stderr


def test_an_asgi_callable_without_lifespan_is_detected_and_served(start_server):
    # Its lifespan attempt fails ("auto" lifespan: the app does not speak it).
    server = start_server("asgi_only:app")
    assert request(server.port, "GET", "/").body == b"asgi"
    assert server.stderr.wait_for(re.compile("does not speak ASGI lifespan"), 5)
