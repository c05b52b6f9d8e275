"""The local publish socket (issue 27 item 21; docs/realtime.md "Publishing
from outside the server", src/http/pubsock.c).

A shell, a cron job or a Celery worker on the server's host publishes with
no broker: `m0serve publish` and m0pub.publish in a plain Python process
find the server's unix socket on their own (the default path, or
M0_PUBLISH_SOCKET), and the server publishes the event as a view's publish
-- one global id, every worker's held streams, the id sequence the views'
publishes use. Bad input gets the right 4xx before a large body is read;
the socket goes when the server stops, a stale one is replaced, another
live server's is never taken.
"""

import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from rawhttp import Conn, build_request, chunked, request
from serverproc import BINARY, REPO, kill_group, run_to_exit
from sse import hold_each_worker

PYDIR = REPO / "python"
EVENT_TIMEOUT = 10.0


class UnixConn(Conn):
    """rawhttp.Conn over a unix stream socket."""

    def __init__(self, path, timeout=10.0):
        self.port = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = bytearray()


@pytest.fixture
def rundir():
    """A runtime directory of the test's own (short: a socket path has 108 bytes)."""
    d = tempfile.mkdtemp(prefix="m0ps.")
    yield d
    subprocess.run(["rm", "-rf", d], check=False)


def serve(start_server, rundir, *args, workers=2, env=None):
    """broker_app with --realtime, its default runtime directory rundir."""
    e = {"XDG_RUNTIME_DIR": rundir}
    e.update(env or {})
    return start_server("broker_app:application", "--realtime", "--heartbeat", "0.5", *args, workers=workers, env=e)


def view_publish(port, data):
    r = request(port, "GET", "/publish?channel=news&data=%s" % data)
    assert r.status == 200, r.body
    return int(r.body)


def shell_publish(*args, env=None):
    """`m0serve publish ...` with env as the whole environment: (rc, stdout, stderr)."""
    p = subprocess.run([BINARY, "publish", *args], env=env, capture_output=True, text=True, timeout=20)
    return p.returncode, p.stdout.strip(), p.stderr


def python_publish(env, channel, data, event=None, key=None):
    """m0pub.publish from a plain Python process, not under a server: (rc, stdout, stderr)."""
    code = ("import m0pub, sys; "
            "print(m0pub.publish(sys.argv[1], sys.argv[2], event=sys.argv[3] or None, key=sys.argv[4] or None))")
    e = dict(env, PYTHONPATH=str(PYDIR))
    p = subprocess.run([sys.executable, "-c", code, channel, data, event or "", key or ""], env=e,
                       capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout.strip(), p.stderr


def plain_env(**extra):
    """A publisher's environment: no broker, nothing of the server's."""
    env = {"PATH": os.environ.get("PATH", "")}
    env.update(extra)
    return env


def expect_everywhere(streams, eid, data, event="message"):
    for s in streams:
        ev = s.next_event(EVENT_TIMEOUT)
        assert (ev.id, ev.event, ev.data) == (eid, event, data)


def test_shell_and_python_find_the_default_socket_and_reach_every_worker_with_one_id(start_server, rundir):
    server = serve(start_server, rundir)
    path = os.path.join(rundir, "m0serve", "publish.sock")
    assert server.stderr.wait_for(re.compile("publish socket .* at unix:%s" % re.escape(path)), 5)
    streams = hold_each_worker(server.port)
    first = view_publish(server.port, "from-view")
    expect_everywhere(streams, first, "from-view")

    # No M0_PUBLISH_SOCKET, no broker: the same runtime directory is all they share.
    env = plain_env(XDG_RUNTIME_DIR=rundir)
    rc, out, err = shell_publish("news", "from shell\nline 2", "--event", "sh", env=env)
    assert rc == 0, err
    second = int(out)
    expect_everywhere(streams, second, "from shell\nline 2", "sh")

    rc, out, err = python_publish(env, "news", "from cron", event="cron")
    assert rc == 0, err
    third = int(out)
    expect_everywhere(streams, third, "from cron", "cron")

    fourth = view_publish(server.port, "again")
    expect_everywhere(streams, fourth, "again")
    assert [first, second, third, fourth] == list(range(first, first + 4))   # one sequence, no gap

    # The directory is the user's alone; the socket 0660 less the umask.
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) & 0o007 == 0
    for s in streams:
        s.close()


def test_an_explicit_path_from_the_flag_and_the_variable(start_server, rundir):
    path = os.path.join(rundir, "pub.sock")
    server = serve(start_server, rundir, "--publish-socket", path, "--umask", "007")
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o660
    assert not os.path.exists(os.path.join(rundir, "m0serve"))      # no default besides
    streams = hold_each_worker(server.port)
    rc, out, err = shell_publish("news", "flag", "--publish-socket", path, env=plain_env())
    assert rc == 0, err
    expect_everywhere(streams, int(out), "flag")
    rc, out, err = python_publish(plain_env(M0_PUBLISH_SOCKET=path), "news", "variable")
    assert rc == 0, err
    expect_everywhere(streams, int(out), "variable")
    # curl's way: one request, no client library.
    with UnixConn(path) as c:
        r = c.request("POST", "/publish", body=b'{"channel": "news", "data": "raw", "event": null}')
    assert r.status == 200 and r.header("content-type") == "application/json", r
    expect_everywhere(streams, int(json.loads(r.body)["id"]), "raw")
    for s in streams:
        s.close()


def test_bad_input_gets_the_right_4xx_and_nothing_is_published(start_server, rundir):
    path = os.path.join(rundir, "pub.sock")
    server = serve(start_server, rundir, "--publish-socket", path, workers=1)
    (stream,) = hold_each_worker(server.port, workers=1)

    def post(body, headers=()):
        with UnixConn(path) as c:
            return c.request("POST", "/publish", headers=headers, body=body)

    cases = [
        (b'{"channel": "m0.x", "data": "d"}', 400, b"channel: the m0. channel namespace is reserved"),
        (b'{"channel": "a\\tb", "data": "d"}', 400, b"channel: channel names are printable ASCII"),
        (b'{"channel": "' + b"c" * 201 + b'", "data": "d"}', 400, b"longer than 200 bytes"),
        (b'{"channel": "news", "data": "d", "id": 7}', 400, b"event ids are the server's"),
        (b'{"channel": "news", "data": "d", "evnt": "x"}', 400, b"unknown member 'evnt'"),
        (b'{"channel": "news", "data": "d", "event": "a\\nb"}', 400, b"event: one line"),
        (b'{"channel": "news", "data": 5}', 400, b"data: want a string"),
        (b'{"channel": "news", "data": "d", "key": ""}', 400, b"key: 1..200 printable ASCII"),
        (b'{"channel": "news", "channel": "x", "data": "d"}', 400, b"not a JSON object"),   # a duplicate
        (b'{"channel": "news"}', 400, b"data: required"),
        (b'["news", "d"]', 400, b"body is not a JSON object"),
        (b"channel=news&data=d", 400, b"body is not a JSON object"),
        (b'{"channel": "news", "data": "' + b"x" * 70000 + b'"}', 413, b"exceeds the 65536-byte frame limit"),
    ]
    for body, status, text in cases:
        r = post(body)
        assert (r.status, text in r.body) == (status, True), (body[:60], r.status, r.body)
    with UnixConn(path) as c:
        r = c.request("GET", "/publish")
        assert r.status == 405 and r.header("allow") == "POST"
        r = c.request("POST", "/events?channel=news", body=b'{"channel": "news", "data": "d"}')
        assert r.status == 404           # the application is never reached from here

    # Over the body limit: refused from the head, before any body byte.
    with UnixConn(path) as c:
        c.send(b"POST /publish HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\n\r\n")
        r = c.read_response("POST")
        assert r.status == 413 and c.wait_closed(5)
    with UnixConn(path) as c:
        c.send(b"POST /publish HTTP/1.1\r\nHost: x\r\nContent-Length: 300000\r\nExpect: 100-continue\r\n\r\n")
        r = c.read_response("POST")
        assert r.status == 413               # not 100 Continue: the body is never asked for
    with UnixConn(path) as c:
        c.send(b"POST /publish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        c.send_tolerant(chunked(b"x" * 300000, sizes=(65536,)))
        r = c.read_response("POST")
        assert r.status == 413
    # `m0serve publish` names what the server refused, exit 2; m0pub raises ValueError.
    env = plain_env(M0_PUBLISH_SOCKET=path)
    rc, _, err = shell_publish("news", "x" * 70000, env=env)
    assert rc == 2 and "65536-byte frame limit" in err
    rc, _, err = shell_publish("news", "x", "--key", "k" * 201, env=env)
    assert rc == 2 and "--key" in err

    # Nothing of that was published: the next event is the next id.
    marker = view_publish(server.port, "marker")
    ev = stream.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (marker, "marker")

    # What does go: Expect: 100-continue, chunked, and pipelined on one connection.
    with UnixConn(path) as c:
        body = b'{"channel":"news","data":"100"}'
        c.send(b"POST /publish HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n"
               % len(body))
        assert c.read_response("POST").status == 100
        c.send(body)
        r = c.read_response("POST")
        assert r.status == 200, r.body
        body = b'{"channel":"news","data":"chunked"}'
        c.send(build_request("POST", "/publish", [("Transfer-Encoding", "chunked")], chunked(body, sizes=(3,))))
        r2 = c.read_response("POST")
        one = b'{"channel":"news","data":"p1"}'
        two = b'{"channel":"news","data":"p2"}'
        c.send(build_request("POST", "/publish", (), one) + build_request("POST", "/publish", (), two))
        r3, r4 = c.read_response("POST"), c.read_response("POST")
    ids = [int(json.loads(x.body)["id"]) for x in (r, r2, r3, r4)]
    assert ids == list(range(marker + 1, marker + 5))
    assert [stream.next_event(EVENT_TIMEOUT).data for _ in ids] == ["100", "chunked", "p1", "p2"]
    stream.close()


def test_the_socket_goes_at_exit_a_stale_one_is_replaced_a_live_one_never_taken(start_server, rundir):
    path = os.path.join(rundir, "pub.sock")
    server = serve(start_server, rundir, "--publish-socket", path, workers=1)
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    # A second server asking for the same path: refused, the first keeps it.
    p = subprocess.run([BINARY, "broker_app:application", "--app-dir", str(REPO / "tests" / "apps"), "--bind",
                        "127.0.0.1:0", "--realtime", "--publish-socket", path], capture_output=True, text=True,
                       timeout=20)
    assert p.returncode == 1 and "is another server's (pid %d)" % server.pid in p.stderr, p.stderr
    rc, out, err = shell_publish("news", "still", env=plain_env(M0_PUBLISH_SOCKET=path))
    assert rc == 0, err
    # The default path another server holds: this one goes without, and says so.
    first = serve(start_server, rundir, workers=1)
    assert first.stderr.wait_for(re.compile("publish socket .* at unix:"), 5)
    second = serve(start_server, rundir, workers=1)
    assert second.stderr.wait_for(re.compile(r"no publish socket for this server: .* is another server's \(pid %d\)"
                                             % first.pid), 5)

    assert server.stop() == 0
    assert not os.path.exists(path)                      # removed at exit

    # A socket file a killed server left: replaced.
    crash = serve(start_server, rundir, "--publish-socket", path, workers=1)
    kill_group(crash.proc)
    crash.proc.wait(10)
    wait_unheard(path)                                   # its worker's threads are gone too
    assert stat.S_ISSOCK(os.stat(path).st_mode)          # left behind
    rc, _, err = shell_publish("news", "x", env=plain_env(M0_PUBLISH_SOCKET=path))
    assert rc == 1 and "Connection refused" in err and "nothing was published" in err
    again = serve(start_server, rundir, "--publish-socket", path, workers=1)
    (stream,) = hold_each_worker(again.port, workers=1)
    rc, out, err = shell_publish("news", "after", env=plain_env(M0_PUBLISH_SOCKET=path))
    assert rc == 0, err
    ev = stream.next_event(EVENT_TIMEOUT)
    assert (ev.id, ev.data) == (int(out), "after")
    stream.close()


def test_a_socket_another_program_listens_on_is_never_taken(start_server, rundir):
    """A program that takes no claim (no lock file beside it) listens at the
    path: the claim is free, but the socket is live, so it is never
    unlinked. At the default path the server serves without a publish
    socket and says so; with --publish-socket it exits 1 naming it. The
    program's socket stays and still accepts."""
    default = os.path.join(rundir, "m0serve", "publish.sock")
    given = os.path.join(rundir, "pub.sock")
    os.mkdir(os.path.dirname(default), 0o700)
    for path in (default, given):
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            other.bind(path)
            other.listen(4)
            if path == default:
                server = serve(start_server, rundir, workers=1)
                assert server.stderr.wait_for(re.compile(r"no publish socket for this server: unix:%s is in use by "
                                                         r"another program" % re.escape(path)), 5), \
                    server.stderr.text()
            else:
                rc, err = run_to_exit(["broker_app:application", "--app-dir", str(REPO / "tests" / "apps"), "--bind",
                                       "127.0.0.1:0", "--realtime", "--publish-socket", path])
                assert rc == 1 and "unix:%s is in use by another program" % path in err, (rc, err)
            assert stat.S_ISSOCK(os.stat(path).st_mode)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.connect(path)                      # still the program's
                other.settimeout(5)
                other.accept()[0].close()
        finally:
            other.close()


def test_stopping_answers_503_and_then_no_server_is_a_clear_error(start_server, rundir):
    path = os.path.join(rundir, "pub.sock")
    server = serve(start_server, rundir, "--publish-socket", path, "--graceful-timeout", "5", workers=1)
    idle = UnixConn(path)                 # accepted, no request yet
    idle.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert idle.read_response().status == 200
    server.signal(signal.SIGTERM)
    assert server.stderr.wait_for(re.compile("worker draining"), 5)
    assert not os.path.exists(path)       # unlinked at the stop's start: publishers are told at once
    idle.send(build_request("POST", "/publish", (), b'{"channel": "news", "data": "late"}'))
    r = idle.read_response("POST")
    assert r.status == 503 and r.body.startswith(b"Draining"), r
    idle.close()
    env = plain_env(M0_PUBLISH_SOCKET=path)
    rc, _, err = shell_publish("news", "x", env=env)
    assert rc == 1 and "no server at unix:%s" % path in err and "nothing was published" in err
    rc, _, err = python_publish(env, "news", "x")
    assert rc != 0 and "m0pub.PublishError: no m0serve at unix:%s" % path in err, err
    assert server.wait(10) == 0


def wait_unheard(path, timeout=10.0):
    """Until no socket listens at path any more (/proc/net/unix: a killed
    process's descriptors go after its last thread; bounded)."""
    def listening():
        with open("/proc/net/unix") as f:
            next(f)
            for line in f:
                fields = line.split()
                if len(fields) >= 8 and fields[7] == path and int(fields[3], 16) & 0x10000:   # __SO_ACCEPTCON
                    return True
        return False
    deadline = time.monotonic() + timeout
    while listening():
        assert time.monotonic() < deadline, "something still listens at %s" % path
        time.sleep(0.02)


def wait_lines(server, text, n, timeout=20.0):
    """Until the server's stderr holds n lines containing text (bounded)."""
    deadline = time.monotonic() + timeout
    while sum(text in line for line in list(server.stderr.lines)) < n:
        assert time.monotonic() < deadline, "no %d lines %r in:\n%s" % (n, text, server.stderr.text())
        time.sleep(0.05)


def test_publishing_through_reloads_loses_nothing(start_server, rundir):
    """SIGHUP replaces the workers (the socket stays the master's): every
    publish of a plain Python process gets an id, in order, none twice --
    a publish a draining worker took is answered 503 and tried again."""
    server = serve(start_server, rundir, workers=2)
    code = ("import m0pub, select, sys\n"
            "i = 0\n"
            "while not select.select([sys.stdin], [], [], 0)[0]:\n"    # until stdin closes
            "    print(m0pub.publish('news', 'e%d' % i), flush=True)\n"
            "    i += 1\n")
    env = dict(plain_env(XDG_RUNTIME_DIR=rundir), PYTHONPATH=str(PYDIR))
    pub = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    ids = []
    reader = threading.Thread(target=lambda: ids.extend(int(x) for x in pub.stdout), daemon=True)
    reader.start()

    def more(n, timeout=20.0):
        want, deadline = len(ids) + n, time.monotonic() + timeout
        while len(ids) < want:
            assert pub.poll() is None and time.monotonic() < deadline, pub.stderr.read() if pub.poll() else ids[-3:]
            time.sleep(0.01)

    try:
        more(1)
        for n in (1, 2):
            server.signal(signal.SIGHUP)
            wait_lines(server, "SIGHUP: new workers booted; retiring the old ones", n)
            more(200)                                     # while the old ones drain, and after
            wait_lines(server, "worker exiting", 2 * n)
            more(50)
        pub.stdin.close()
        assert pub.wait(30) == 0, pub.stderr.read()
        reader.join(10)
    finally:
        if pub.poll() is None:
            pub.kill()
    assert ids == list(range(ids[0], ids[0] + len(ids)))  # one sequence: nothing lost, nothing twice


DRAINING = (503, b"Draining: this worker is stopping and published nothing; publish again on a new connection.\n")


def stand_in(path, answers, publish):
    """publish() with a stand-in for the server at path: each connection, in
    turn, gets the next of answers ((status, body)) to its request. Returns
    publish()'s result and the request bodies the stand-in read. (A real
    worker answers 503 Draining only to a request on a connection it
    accepted before it began draining: a race a test cannot bring about at
    will.)"""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    bodies = []

    def run():
        for status, body in answers:
            try:
                c, _ = srv.accept()
            except OSError:
                return                      # the publisher is done: no more connections
            with c:
                c.settimeout(10)
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += c.recv(65536)
                head, _, rest = buf.partition(b"\r\n\r\n")
                n = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                while len(rest) < n:
                    rest += c.recv(65536)
                bodies.append(rest)
                c.sendall(b"HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                          b"Connection: close\r\n\r\n%s" % (status, len(body), body))
    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        result = publish()
    finally:
        srv.shutdown(socket.SHUT_RDWR)      # wakes an accept() still waiting
        t.join(10)
        srv.close()
        os.unlink(path)
    return result, bodies


def test_a_draining_answer_is_published_again_on_a_new_connection(rundir):
    """A worker that began draining after it accepted the publisher's
    connection publishes nothing and answers 503 Draining (see the test
    above): `m0serve publish` and m0pub send the event again on a new
    connection, quietly, and fail with one line only when the retry is
    refused too."""
    path = os.path.join(rundir, "stand-in.sock")
    env = plain_env(M0_PUBLISH_SOCKET=path)
    shell, python = (lambda: shell_publish("news", "x", env=env)), (lambda: python_publish(env, "news", "x"))
    for publish in (shell, python):
        (rc, out, err), bodies = stand_in(path, [DRAINING, (200, b'{"id": 7}\n')], publish)
        assert (rc, out) == (0, "7"), err
        assert "Draining" not in err and len(bodies) == 2 and bodies[0] == bodies[1], (err, bodies)
    (rc, _, err), bodies = stand_in(path, [DRAINING, DRAINING], shell)
    assert rc == 1 and len(bodies) == 2 and err.count("Draining") == 1, (rc, err)
    (rc, _, err), bodies = stand_in(path, [DRAINING, DRAINING], python)
    assert rc != 0 and "m0pub.PublishError" in err and "Draining" in err and len(bodies) == 2, err


def test_without_any_server_publishers_keep_todays_behaviour(rundir):
    env = plain_env(XDG_RUNTIME_DIR=rundir)           # nothing there
    code = ("import m0pub, logging; logging.basicConfig(); "
            "print(m0pub.publish('news', 'x'), m0pub.enabled())")
    p = subprocess.run([sys.executable, "-c", code], env=dict(env, PYTHONPATH=str(PYDIR)), capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0 and p.stdout.split() == ["None", "False"], p.stderr
    assert "events are dropped" in p.stderr and os.path.join(rundir, "m0serve", "publish.sock") in p.stderr
    rc, _, err = shell_publish("news", "x", env=env)
    assert rc == 2 and "M0_BROKER" in err and "publish socket" in err


def test_a_default_directory_others_may_write_is_not_used(start_server, rundir):
    os.mkdir(os.path.join(rundir, "m0serve"), 0o700)
    os.chmod(os.path.join(rundir, "m0serve"), 0o777)
    server = serve(start_server, rundir, workers=1)
    assert server.stderr.wait_for(re.compile(r"no publish socket: .*m0serve may be written by other users"), 5)
    assert os.listdir(os.path.join(rundir, "m0serve")) == []
    # A publisher does not trust a socket someone could have put there.
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(os.path.join(rundir, "m0serve", "publish.sock"))
    sock.listen(1)
    try:
        rc, _, err = shell_publish("news", "x", env=plain_env(XDG_RUNTIME_DIR=rundir))
        assert rc == 1 and "is not used" in err and "written by other users" in err
        rc, _, err = python_publish(plain_env(XDG_RUNTIME_DIR=rundir), "news", "x")
        assert rc != 0 and "PublishError" in err and "is not used" in err
    finally:
        sock.close()
    server.stop()


def test_with_a_broker_the_socket_publishes_through_it(start_server, rundir, redis):
    path = os.path.join(rundir, "pub.sock")
    server = serve(start_server, rundir, "--publish-socket", path, "--broker", redis.url)
    streams = hold_each_worker(server.port)
    first = view_publish(server.port, "from-view")
    expect_everywhere(streams, first, "from-view")
    env = plain_env(M0_PUBLISH_SOCKET=path)               # no M0_BROKER: the server's broker
    rc, out, err = shell_publish("news", "via socket", "--key", "k-sock", env=env)
    assert rc == 0, err
    second = int(out)
    assert second > first
    expect_everywhere(streams, second, "via socket")
    # The key travels: a retry gets the first id and appends nothing.
    rc, out, err = python_publish(env, "news", "via socket", key="k-sock")
    assert rc == 0 and int(out) == second, err
    assert redis.command("XLEN", "m0:log") == b"2"
    # A broker that is gone: not published, said so (exit 1 / BrokerError).
    redis.stop()
    rc, _, err = shell_publish("news", "x", env=env)
    assert rc == 1 and "Not published" in err, err
    rc, _, err = python_publish(env, "news", "x")
    assert rc != 0 and "m0pub.BrokerError" in err, err
    for s in streams:
        s.close()
