"""Worker lifecycle and process identity: --max-requests (with jitter) under
a keep-alive load with no failed request, held streams that resume with
Last-Event-ID across the replacement, --worker-max-rss, --reload, --user and
--group, --pid, --umask, --access-log-format, and log times that stay UTC
when the application changes TZ."""

import http.client
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path


from serverproc import (APPS_DIR, BINARY, EXAMPLES_DIR, REPO, StreamCollector, children_of, kill_group,
                        run_to_exit, spawn)
from sse import SSEStream


def keepalive_load(port, clients, until, limit, pause=0.002):
    """clients threads, each with one kept-alive http.client connection,
    send requests back to back (pause s apart) until until() holds or limit
    requests each; a connection is reopened only after a response said
    Connection: close, as a browser or a proxy would. Returns (ok, failures)."""
    ok = [0]
    failures = []
    lock = threading.Lock()
    stop = threading.Event()

    def client():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        for _ in range(limit):
            if stop.is_set():
                break
            try:
                conn.request("GET", "/pid")
                r = conn.getresponse()
                body = r.read()
                if r.status != 200 or not body.isdigit():
                    raise AssertionError("%d %r" % (r.status, body[:80]))
                with lock:
                    ok[0] += 1
            except Exception as exc:      # a failed request, whatever the cause
                with lock:
                    failures.append(repr(exc))
                conn.close()
            time.sleep(pause)
        conn.close()

    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    while any(t.is_alive() for t in ts):
        if until():
            stop.set()
        time.sleep(0.02)
    for t in ts:
        t.join(60)
    return ok[0], failures


def test_max_requests_replaces_workers_without_failing_a_request(start_server):
    server = start_server("realtime_app:application", "--max-requests", "100", "--max-requests-jitter", "20",
                          "--realtime", workers=2)

    def count(what):
        return len(re.findall(what, server.stderr.text()))

    # Eight clients on kept-alive connections, without a pause longer than a
    # few milliseconds, until both workers were replaced three times each
    # (or 12,000 requests).
    ok, failures = keepalive_load(server.port, 8, until=lambda: count("replaced: draining it") >= 6, limit=1500)
    print("--max-requests 100: %d requests, %d failed, %d replacements" % (
        ok + len(failures), len(failures), count("replaced: draining it")))
    assert failures == [], failures[:5]
    assert count("replaced: draining it") >= 6, server.stderr.text()
    assert "exited with status" not in server.stderr.text() and "killed by signal" not in server.stderr.text()


def test_held_stream_resumes_across_a_replacement(start_server):
    server = start_server("realtime_app:application", "--max-requests", "30", "--realtime", workers=1)
    port = server.port
    stream = SSEStream(port, "/events?channel=lc")
    assert stream.status == 200
    stream.next()                                        # ": connected worker=..."
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/publish?channel=lc")
    last = int(conn.getresponse().read())
    ev = stream.next_event()
    assert ev.id == last
    before = server.worker_pids()
    for _ in range(40):                                   # past the quota: the worker is replaced
        conn.request("GET", "/pid")
        conn.getresponse().read()
    conn.close()
    assert stream.wait_closed(10)                         # a clean FIN: EventSource reconnects
    server.wait_workers(lambda p: p and not (p & before))
    # EventSource reconnects with the last id it saw.
    resumed = SSEStream(port, "/events?channel=lc", headers=[("Last-Event-ID", str(last))])
    hello = resumed.next()
    assert hello.comment and hello.comment.startswith("connected")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/publish?channel=lc")
    new = int(conn.getresponse().read())
    conn.close()
    ev = resumed.next_event()
    assert (ev.id, ev.event) == (new, "message") and new == last + 1     # nothing lost, no m0-gap
    resumed.close()
    stream.close()


def test_worker_max_rss(start_server):
    server = start_server("conformance:application", "--worker-max-rss", "1", workers=1)
    first = server.worker_pids()
    assert server.stderr.wait_for(re.compile(r"uses \d+ MiB \(over --worker-max-rss 1\): booting its replacement"),
                                  10)
    server.wait_workers(lambda p: p and not (p & first))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/")
    assert conn.getresponse().status == 200


def test_reload_on_a_changed_view(start_server, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(EXAMPLES_DIR / "django_site", site)
    server = start_server("djangosite", "--reload", app_dir=site)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)

    def page():
        conn.request("GET", "/")
        r = conn.getresponse()
        return r.read().decode()

    assert "Hello from Django on m0serve" in page()      # the view's module is imported now
    time.sleep(1.5)                                       # the watcher's next look at sys.modules
    views = site / "pages" / "views.py"
    views.write_text(views.read_text().replace("Hello from Django on m0serve", "Edited while serving"))
    edited = time.monotonic()
    while "Edited while serving" not in page():
        assert time.monotonic() - edited < 10, server.stderr.text()
        time.sleep(0.05)
    took = time.monotonic() - edited
    print("--reload: the edited view answered %.2f s after the write" % took)
    assert server.stderr.wait_for(re.compile("views.py changed"), 5)

    # A broken edit of a module imported at boot: the new worker cannot load
    # the application, the one serving keeps serving; the fix reloads.
    settings = site / "djangosite" / "settings.py"
    good = settings.read_text()
    settings.write_text(good + "\ndef broken(:\n")
    assert server.stderr.wait_for(re.compile(r"reload failed"), 15), server.stderr.text()
    assert "Edited while serving" in page()
    settings.write_text(good)
    views.write_text(views.read_text().replace("Edited while serving", "Fixed and reloaded"))
    fixed = time.monotonic()
    while "Fixed and reloaded" not in page():
        assert time.monotonic() - fixed < 10, server.stderr.text()
        time.sleep(0.05)
    conn.close()


def test_reload_is_off_by_default_and_ignores_other_files(start_server, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(EXAMPLES_DIR / "django_site", site)
    server = start_server("djangosite", "--reload", app_dir=site)
    pids = server.worker_pids()
    (site / "pages" / "notes.txt").write_text("not python")
    plain = start_server("djangosite", app_dir=site)
    plain_pids = plain.worker_pids()
    views = site / "pages" / "views.py"
    views.write_text(views.read_text() + "\n")
    assert server.stderr.wait_for(re.compile(r"--reload: views\.py changed"), 10)
    time.sleep(1.0)
    assert plain.worker_pids() == plain_pids
    assert "--reload" not in plain.stderr.text()
    assert "notes.txt" not in server.stderr.text()
    server.wait_workers(lambda p: p and not (p & pids))


def test_user_group_and_pid_file(tmp_path):
    """--user nobody --group nogroup: the master and every worker run as
    nobody, with root's supplementary groups gone. The binary, its python/
    directory and the app are copied to a directory nobody can read (a
    checkout under /root is not), and no virtualenv is used."""
    nobody = pwd.getpwnam("nobody")
    root = Path(tempfile.mkdtemp(prefix="m0-user-", dir="/tmp"))
    try:
        shutil.copy(BINARY, root / "m0serve")
        shutil.copytree(REPO / "python", root / "python")
        (root / "app").mkdir()
        shutil.copy(APPS_DIR / "conformance.py", root / "app")
        for p in [root, *root.rglob("*")]:
            os.chmod(p, 0o755 if p.is_dir() or p.name == "m0serve" else 0o644)
        pidfile = root / "m0.pid"
        env = dict(os.environ, VIRTUAL_ENV="")
        proc = subprocess.Popen([str(root / "m0serve"), "conformance:application", "--app-dir", str(root / "app"),
                                 "--bind", "127.0.0.1:0", "--workers", "2", "--user", "nobody", "--group", "nogroup",
                                 "--pid", str(pidfile)], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        err = StreamCollector(proc.stderr)
        StreamCollector(proc.stdout)
        try:
            m = err.wait_for(re.compile(r"listening on http://127\.0\.0\.1:(\d+)"), 15)
            assert m, err.text()
            deadline = time.monotonic() + 15
            while len(re.findall(r"worker booted", err.text())) < 2:
                assert time.monotonic() < deadline and proc.poll() is None, err.text()
                time.sleep(0.05)
            assert int(pidfile.read_text()) == proc.pid
            pids = children_of(proc.pid) | {proc.pid}
            assert len(pids) == 3
            for pid in pids:
                status = Path("/proc/%d/status" % pid).read_text()
                uids = re.search(r"Uid:\s+(\d+)\s+(\d+)\s+(\d+)", status).groups()
                assert set(uids) == {str(nobody.pw_uid)}, (pid, uids)
                groups = re.search(r"Groups:\s*(.*)", status).group(1).split()
                assert groups in ([], [str(nobody.pw_gid)]), groups     # root's supplementary groups are gone
            conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=10)
            conn.request("GET", "/environ")
            assert conn.getresponse().status == 200
            assert "running as uid %d" % nobody.pw_uid in err.text()
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            finally:
                kill_group(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_pid_file_is_removed_and_a_live_one_refused(start_server, tmp_path):
    pidfile = tmp_path / "m0.pid"
    server = start_server("conformance:application", "--pid", str(pidfile))
    assert int(pidfile.read_text()) == server.pid
    code, err = run_to_exit(["conformance:application", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                             "--pid", str(pidfile)])
    assert code == 1 and "process %d is running" % server.pid in err
    assert server.stop() == 0
    assert not pidfile.exists()


def test_umask_sets_the_unix_socket_mode(tmp_path):
    path = tmp_path / "s.sock"
    proc = spawn(["conformance:application", "--app-dir", str(APPS_DIR), "--bind", "unix:%s" % path,
                  "--umask", "0o117"])
    err = StreamCollector(proc.stderr)
    StreamCollector(proc.stdout)
    try:
        assert err.wait_for(re.compile(r"worker booted"), 15), err.text()
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o660
    finally:
        kill_group(proc)
        proc.wait(10)


def test_bad_identity_flags_are_one_line():
    for args, want in ((["--user", "no-such-user-m0"], "m0serve: error: --user: no such user 'no-such-user-m0'"),
                       (["--group", "no-such-group-m0"], "m0serve: error: --group: no such group 'no-such-group-m0'"),
                       (["--umask", "888"], "m0serve: error: --umask: invalid value '888'"),
                       (["--access-log-format", "%(h)s %(zz)s"],
                        "m0serve: error: --access-log-format: unknown atom '%(zz)s'")):
        code, err = run_to_exit(["conformance:application", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0",
                                 *args])
        assert code == 2 and err.strip().splitlines() == [want], (args, err)


def test_access_log_formats(start_server):
    server = start_server("conformance:application", "--access-log", "--access-log-format",
                          '%(h)s "%(r)s" %(s)s %(b)s %({x-trace}i)s %({content-type}o)s %(M)s')
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/environ?a=1", headers={"X-Trace": "t-42"})
    conn.getresponse().read()
    assert server.stdout.wait_for(
        re.compile(r'^127\.0\.0\.1 "GET /environ\?a=1 HTTP/1\.1" 200 \d+ t-42 application/json \d+$'), 5), \
        server.stdout.text()
    js = start_server("conformance:application", "--access-log", "--access-log-format", "json")
    conn = http.client.HTTPConnection("127.0.0.1", js.port, timeout=10)
    conn.request("GET", "/?q=%22x%22", headers={"User-Agent": 'ua "quoted"'})
    conn.getresponse().read()
    m = js.stdout.wait_for(re.compile(r"^\{.*\"query\":\"q=.*\}$"), 5)
    assert m, js.stdout.text()
    rec = json.loads(m.group(0))
    assert (rec["method"], rec["path"], rec["query"], rec["status"]) == ("GET", "/", "q=%22x%22", 200)
    assert rec["user_agent"] == 'ua "quoted"' and rec["remote_addr"] == "127.0.0.1"
    assert rec["time"].endswith("Z") and rec["pid"] in js.worker_pids()


def test_log_times_stay_utc_when_the_app_sets_tz(start_server):
    server = start_server("tz_app:application", "--access-log")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/")
    assert conn.getresponse().read() in (b"-0600", b"-0500")     # the app's own zone moved
    assert server.stdout.wait_for(re.compile(r"\+0000\] \"GET / "), 5), server.stdout.text()
    stamps = re.findall(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ([+-]\d{4})\] \[(\d+)\]", server.stderr.text(), re.M)
    workers = server.worker_pids()
    assert {z for z, pid in stamps if int(pid) in workers} == {"+0000"}
    assert {z for z, pid in stamps} == {"+0000"}


def test_replacements_and_reloads_at_once(start_server):
    """--max-requests replacements while SIGHUPs arrive: the master's worker
    table grows under it (more workers alive than slots); nothing fails and
    the server still stops cleanly."""
    server = start_server("realtime_app:application", "--max-requests", "20", "--realtime", workers=1)
    stop = threading.Event()

    def hup():
        while not stop.wait(0.05):
            server.signal(signal.SIGHUP)

    t = threading.Thread(target=hup)
    t.start()
    try:
        ok, failures = keepalive_load(server.port, 4, until=lambda: False, limit=150)
    finally:
        stop.set()
        t.join(10)
    assert failures == [], failures[:5]
    assert ok == 600
    text = server.stderr.text()
    assert "asking to be replaced" in text and "SIGHUP: booting" in text
    assert server.stop() == 0
