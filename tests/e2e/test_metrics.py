"""The Prometheus endpoint (issue 21; make smoke-metrics): answered in C,
summed over every worker, scraped by Debian's Prometheus.

  * the output passes ``promtool check metrics``; OpenMetrics on request;
  * a real Prometheus (started here on an ephemeral port, 1 s scrapes)
    ingests it, and its HTTP API returns the exact sum over two workers of
    m0serve_requests_total and of the held-stream gauge;
  * a worker killed with SIGKILL makes no counter go backwards (its block
    is folded by the master), and with PROMETHEUS_MULTIPROC_DIR its live
    gauge files are removed while its counter files stay;
  * a scrape calls no Python: it is answered while the only handler thread
    is blocked in a view, and the application logs no call;
  * --metrics-path is a 404 for a peer outside --forwarded-allow-ips, and
    --metrics-bind answers no other path.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request

import pytest

from rawhttp import get_to_close
from serverproc import REPO, kill_group, spawn
from sse import SSEStream

APP = "metrics_app"
METRICS_RE = re.compile(r"metrics at http://127\.0\.0\.1:(\d+)/")
WAIT = 30.0


def metrics_port(server):
    match = server.stderr.wait_for(METRICS_RE, 5)
    assert match, server.stderr.text()
    return int(match.group(1))


def http_get(port, path, headers=None, timeout=5):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def scrape(port, path="/metrics", headers=None):
    status, hdrs, body = http_get(port, path, headers)
    assert status == 200, (status, body)
    return hdrs, body


def sample_sum(text, name, **labels):
    """Sum of the samples of name whose labels include labels."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def get_pid(port):
    """GET /pid on a fresh connection: which worker answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        head, body = get_to_close(s, "/pid")
    assert head.startswith(b"HTTP/1.1 200"), (head, body)
    return int(body)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, what, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


def need(tool):
    if shutil.which(tool) is None:
        pytest.skip("%s is not installed (Debian package prometheus; make deps)" % tool)


# ------------------------------------------------------------- format


def test_output_passes_promtool(start_server):
    need("promtool")
    server = start_server(APP, "--realtime", "--metrics-bind", "127.0.0.1:0", workers=2)
    port = metrics_port(server)
    for _ in range(5):
        get_pid(server.port)
    hdrs, text = scrape(port)
    assert hdrs["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "Cache-Control" in hdrs
    check = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode() + text
    assert sample_sum(text, "m0serve_requests_total", mount="/", method="GET", status="2xx") >= 5
    assert sample_sum(text, "m0serve_worker_starts_total") == 2
    assert sample_sum(text, "m0serve_build_info") == 1
    assert 'process_resident_memory_bytes{process="master"}' in text
    assert 'process_resident_memory_bytes{process="worker",worker="1"}' in text
    assert "# EOF" not in text

    hdrs, om = scrape(port, headers={"Accept": "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"})
    assert hdrs["Content-Type"] == "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert om.endswith("# EOF\n")
    assert "# TYPE m0serve_requests counter\n" in om
    assert "# TYPE m0serve_build info\n" in om


# ----------------------------------------------------------- Prometheus


class Prometheus:
    """Debian's prometheus on an ephemeral port, scraping target every second."""

    def __init__(self, tmp_path, target):
        self.port = free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                       "scrape_configs:\n  - job_name: m0serve\n    static_configs:\n"
                       "      - targets: ['%s']\n" % target)
        self.log = open(tmp_path / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            ["prometheus", "--config.file=%s" % cfg, "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._ready, "prometheus to be ready")

    def _ready(self):
        if self.proc.poll() is not None:
            raise AssertionError("prometheus exited: " + open(self.log.name).read())
        try:
            return http_get(self.port, "/-/ready", timeout=2)[0] == 200
        except OSError:
            return False

    def query(self, q):
        status, _, body = http_get(self.port, "/api/v1/query?query=" + urllib.parse.quote(q))
        assert status == 200, body
        result = json.loads(body)["data"]["result"]
        return [float(r["value"][1]) for r in result]

    def wait_value(self, q, want):
        last = []

        def check():
            last[:] = self.query(q)
            return last == [want]
        try:
            wait_until(check, q)
        except AssertionError:
            raise AssertionError("%s: %r, want %r; prometheus log:\n%s" % (q, last, want, open(self.log.name).read()))

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()


def test_prometheus_reads_the_sum_over_two_workers(start_server, tmp_path):
    need("prometheus")
    server = start_server(APP, "--realtime", "--metrics-bind", "127.0.0.1:0", workers=2)
    port = metrics_port(server)
    # The start-up probe's GET / (its response can reach the client just
    # before the loop counts it: wait for it, then it is the baseline).
    base = wait_until(lambda: sample_sum(scrape(port)[1], "m0serve_requests_total", mount="/"), "the probe")
    # Requests until both workers have answered some (SO_REUSEPORT spreads
    # connections by their source port), then a known number more.
    seen, sent = {}, 0
    while len(seen) < 2 or sent < 20:
        pid = get_pid(server.port)
        seen[pid] = seen.get(pid, 0) + 1
        sent += 1
        assert sent < 500, "one worker answered everything"
    # Held SSE streams on both workers.
    streams, holders = [], set()
    while len(holders) < 2 or len(streams) < 4:
        st = SSEStream(server.port, "/events")
        assert st.status == 200
        holders.add(st.next(timeout=5).comment)      # "connected worker=PID"
        streams.append(st)
        assert len(streams) < 100, "one worker held everything"
    prom = Prometheus(tmp_path, "127.0.0.1:%d" % port)
    try:
        prom.wait_value('up{job="m0serve"}', 1.0)
        want = base + sent + len(streams)     # a held stream's request is counted when it is held
        prom.wait_value('sum(m0serve_requests_total{mount="/"})', want)
        prom.wait_value('sum(m0serve_held_streams{kind="sse"})', float(len(streams)))
        # Both workers contributed: two worker processes are labelled.
        prom.wait_value('count(process_start_time_seconds{process="worker"})', 2.0)
        for st in streams:
            st.close()
        prom.wait_value('sum(m0serve_held_streams{kind="sse"})', 0.0)
    finally:
        for st in streams:
            st.close()
        prom.stop()


def documented_query(marker):
    """The PromQL line of docs/deploy.md's example block that contains marker."""
    text = (REPO / "docs" / "deploy.md").read_text()
    block = text.split("```promql\n", 1)[1].split("```", 1)[0]
    (line,) = [l for l in block.splitlines() if marker in l and not l.startswith("#")]
    return line


def test_documented_5xx_share_is_0_before_the_first_5xx(start_server, tmp_path):
    """The 5xx share query of docs/deploy.md, run by Prometheus: 0 while
    every answer was a success (a series m0serve_requests_total{status="5xx"}
    does not exist yet, and a bare ratio of it is an empty result, which a
    dashboard shows as "no data" and an alert never fires on), then the share."""
    need("prometheus")
    query = documented_query('status="5xx"')
    server = start_server(APP, "--metrics-bind", "127.0.0.1:0", workers=1)
    port = metrics_port(server)
    for _ in range(5):
        get_pid(server.port)
    prom = Prometheus(tmp_path, "127.0.0.1:%d" % port)
    try:
        prom.wait_value('up{job="m0serve"}', 1.0)
        # rate() needs two scrapes that saw requests
        wait_until(lambda: prom.query('sum(rate(m0serve_requests_total[5m])) > 0'), "a request rate")
        assert prom.query(query) == [0.0], query
        # A series is born at its first value, so rate() sees an increase
        # only from the second scrape of it on: fail, let it be scraped, fail.
        for _ in range(5):
            assert http_get(server.port, "/fail")[0] == 500
        wait_until(lambda: prom.query('m0serve_requests_total{status="5xx"}'), "the 5xx series")
        for _ in range(5):
            assert http_get(server.port, "/fail")[0] == 500
        wait_until(lambda: (prom.query(query) or [0.0])[0] > 0, "a 5xx share above 0")
        share = prom.query(query)
        assert len(share) == 1 and 0 < share[0] < 1, share
    finally:
        prom.stop()


# ---------------------------------------------------------- restarts


def test_counters_survive_a_killed_worker(start_server, tmp_path):
    mp = tmp_path / "multiproc"
    mp.mkdir()
    server = start_server(APP, "--realtime", "--metrics-bind", "127.0.0.1:0", workers=2,
                          env={"PROMETHEUS_MULTIPROC_DIR": str(mp)})
    port = metrics_port(server)
    seen = {}
    while len(seen) < 2 or sum(seen.values()) < 10:
        pid = get_pid(server.port)
        seen[pid] = seen.get(pid, 0) + 1
        assert sum(seen.values()) < 500
    victim = max(seen, key=seen.get)
    # What prometheus_client's multiprocess mode leaves for a process.
    for name in ("gauge_livesum_%d.db", "gauge_liveall_%d.db", "gauge_livemax_%d.db", "gauge_all_%d.db",
                 "counter_%d.db", "histogram_%d.db"):
        (mp / (name % victim)).write_bytes(b"")
    (mp / ("gauge_livesum_%d.db" % (victim + 100000))).write_bytes(b"")   # another pid: kept
    _, before = scrape(port)
    requests_before = sample_sum(before, "m0serve_requests_total", mount="/")
    accepted_before = sample_sum(before, "m0serve_connections_accepted_total")
    os.kill(victim, signal.SIGKILL)
    server.wait_workers(lambda pids: victim not in pids and len(pids) == 2)

    def restarted():
        _, t = scrape(port)
        return t if sample_sum(t, "m0serve_worker_starts_total") == 3 else None
    after = wait_until(restarted, "the worker's replacement")
    assert sample_sum(after, "m0serve_requests_total", mount="/") == requests_before
    assert sample_sum(after, "m0serve_connections_accepted_total") >= accepted_before
    assert sample_sum(after, "m0serve_worker_exits_total", cause="signal") == 1
    # Every counter of the sum is at least what it was.
    for line in before.splitlines():
        m = re.match(r"^(m0serve_\w+_total)(\{[^}]*\})? (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            assert sample_sum(after, m.group(1), **labels) >= float(m.group(3)), line
    left = sorted(p.name for p in mp.iterdir())
    assert left == sorted(["gauge_all_%d.db" % victim, "counter_%d.db" % victim, "histogram_%d.db" % victim,
                           "gauge_livesum_%d.db" % (victim + 100000)]), left


def requests_at_root(port):
    return sample_sum(scrape(port)[1], "m0serve_requests_total", mount="/")


def wait_count(port, want, what):
    """Wait until the root mount's request counter is want; fail if it passes it."""
    def check():
        got = requests_at_root(port)
        assert got <= want, "%s: counted %s, more than the %s sent" % (what, got, want)
        return got == want
    try:
        wait_until(check, what)
    except AssertionError:
        raise AssertionError("%s: counted %s of %s" % (what, requests_at_root(port), want))


def test_every_request_is_counted_after_sigttin_to_many_workers(start_server):
    """The shared blocks were sized once for 4 x --workers + 4 processes:
    with 2 workers grown to 16 by SIGTTIN, 4 of them recorded nothing and
    only the log said so (issue 27 item 12). They are sized for
    --max-workers (default 64), which SIGTTIN never passes."""
    server = start_server(APP, "--metrics-bind", "127.0.0.1:0", workers=2)
    port = metrics_port(server)
    base = wait_until(lambda: requests_at_root(port), "the probe")
    for n in range(3, 17):
        server.signal(signal.SIGTTIN)      # one at a time: signals of one kind coalesce
        assert server.stderr.wait_for(re.compile(r"worker %d added: %d worker\(s\)" % (n - 1, n)), WAIT), \
            server.stderr.text()
    seen = {}
    for _ in range(400):
        pid = get_pid(server.port)
        seen[pid] = seen.get(pid, 0) + 1
    assert len(seen) >= 13, "SO_REUSEPORT spread 400 connections over %d workers only" % len(seen)
    wait_count(port, base + 400, "400 requests over %d workers" % len(seen))
    assert sample_sum(scrape(port)[1], "m0serve_worker_starts_total") == 16
    assert "records no metrics" not in server.stderr.text()


def test_reloads_wait_for_a_metrics_block_rather_than_run_uncounted(start_server, tmp_path):
    """Reloads whose old workers still drain pile up processes: with every
    block a live process's (--max-workers 1: 8 blocks), the next worker
    starts once one of them has exited, said once in the log, and every
    request of every process is counted."""
    calls, release = tmp_path / "calls", tmp_path / "release"
    server = start_server(APP, "--metrics-bind", "127.0.0.1:0", "--max-workers", "1", workers=1,
                          env={"METRICS_APP_CALLS": str(calls), "METRICS_APP_RELEASE": str(release)})
    port = metrics_port(server)
    base = wait_until(lambda: requests_at_root(port), "the probe")
    ncalls = lambda: len(calls.read_text().splitlines()) if calls.exists() else 0  # noqa: E731
    booted = re.compile(r"SIGHUP: new workers booted")
    blocked = []
    try:
        for gen in range(8):
            # The serving worker gets a request that waits for the release
            # file: once retired it drains, and holds its block, until then.
            before = ncalls()
            t = threading.Thread(target=http_get, args=(server.port, "/block"), kwargs={"timeout": 60})
            t.start()
            blocked.append(t)
            wait_until(lambda: ncalls() > before, "the view of generation %d" % gen)
            server.signal(signal.SIGHUP)
            if gen < 7:
                wait_until(lambda: len([l for l in server.stderr.lines if booted.search(l)]) == gen + 1,
                           "reload %d" % (gen + 1))
        # Eight processes hold the eight blocks: the ninth waits, said once.
        assert server.stderr.wait_for(re.compile(r"metrics: 8 worker processes hold every metrics block: worker 0 "
                                                 r"starts once one of them has exited"), WAIT), server.stderr.text()
        assert len([l for l in server.stderr.lines if booted.search(l)]) == 7      # the eighth waits
        release.write_text("go")
        wait_until(lambda: len([l for l in server.stderr.lines if booted.search(l)]) == 8, "the waiting reload")
    finally:
        release.write_text("go")
        for t in blocked:
            t.join(60)
    for _ in range(20):
        get_pid(server.port)
    wait_count(port, base + 8 + 20, "the blocked requests and 20 more")
    assert sample_sum(scrape(port)[1], "m0serve_worker_starts_total") == 9
    assert len([l for l in server.stderr.lines if "hold every metrics block" in l]) == 1


MONOTONIC_RE = re.compile(r"^(m0serve_\w+?(?:_total|_bucket|_count|_sum))(\{[^}]*\})? (\S+)$", re.M)


def test_no_counter_goes_backwards_while_workers_die(start_server):
    """Scrapes in a loop while workers are killed (SIGKILL) and replaced
    (--max-requests), each scraper comparing every counter of the sum with
    its previous scrape: none ever goes backwards. The master's fold of a
    dead worker's block (added to the retired sum, then cleared) is
    bracketed by a sequence count that a scrape waits on; without it a
    scrape that falls in a fold counts the block twice (or not at all) and
    the next one goes back. A fold lasts microseconds, so the test holds
    each one open 2 ms (M0_TEST_FOLD_PAUSE_US, metrics.c) between the two
    halves, where such a scrape would otherwise be rare."""
    server = start_server(APP, "--metrics-bind", "127.0.0.1:0", "--max-requests", "20", workers=3,
                          env={"M0_TEST_FOLD_PAUSE_US": "2000"})
    port = metrics_port(server)
    stop = threading.Event()
    backwards, scrapes, folds = [], [0], [0]

    def scraper():
        last = {}
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    head, body = get_to_close(s, "/metrics")
            except OSError:
                continue                  # its worker was killed under it
            if not head.startswith(b"HTTP/1.1 200"):
                continue                  # cut short by the kill
            now = {m.group(1) + (m.group(2) or ""): float(m.group(3)) for m in MONOTONIC_RE.finditer(body.decode())}
            backwards.extend("%s %s -> %s" % (k, last[k], v) for k, v in now.items() if v < last.get(k, 0))
            last = now
            scrapes[0] += 1
            folds[0] = max(folds[0], now.get("m0serve_worker_exits_total{cause=\"signal\"}", 0)
                           + now.get("m0serve_worker_exits_total{cause=\"clean\"}", 0))

    def traffic():
        while not stop.is_set():
            try:
                get_pid(server.port)
            except (OSError, AssertionError):
                pass                      # its worker was killed under it

    def killer():
        # A worker that dies before it has lived 1 s is restarted with a
        # back-off: kill only older ones.
        born = {}
        while not stop.is_set():
            now = time.monotonic()
            for pid in server.worker_pids():
                if now - born.setdefault(pid, now) > 1.2:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    born[pid] = float("inf")
            stop.wait(0.05)

    threads = [threading.Thread(target=f) for f in (scraper, scraper, scraper, traffic, traffic, killer)]
    for t in threads:
        t.start()
    try:
        # Twenty folds, or 12 s (without the sequence count, a scrape went
        # backwards within the first few folds in every run tried).
        deadline = time.monotonic() + 12
        while folds[0] < 20 and not backwards and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert backwards == [], backwards[:10]
    assert folds[0] >= 10, "only %d workers ended in 12 s" % folds[0]
    assert scrapes[0] > 100


# ------------------------------------------------------- no Python call


def test_scrape_calls_no_python(start_server, tmp_path):
    calls = tmp_path / "calls"
    release = tmp_path / "release"
    server = start_server(APP, "--metrics-path", "/metrics", "--blocking-threads", "1", workers=1,
                          env={"METRICS_APP_CALLS": str(calls), "METRICS_APP_RELEASE": str(release)})
    result = {}

    def blocked():
        result["r"] = http_get(server.port, "/block", timeout=30)
    t = threading.Thread(target=blocked)
    t.start()
    try:
        ncalls = lambda: len(calls.read_text().splitlines()) if calls.exists() else 0  # noqa: E731
        # the probe's GET / and /block: the only handler thread is in the view
        wait_until(lambda: ncalls() >= 2, "the view to start")
        before = ncalls()
        wait_until(lambda: sample_sum(scrape(server.port)[1], "m0serve_pool_threads_busy") == 1, "busy == 1")
        for _ in range(3):
            _, text = scrape(server.port)
            assert sample_sum(text, "m0serve_pool_threads_busy") == 1
            assert sample_sum(text, "m0serve_pool_threads") == 1
            assert sample_sum(text, "m0serve_requests_in_flight", mount="/") == 1
        assert ncalls() == before
    finally:
        release.write_text("go")
        t.join(30)
    assert result["r"][0] == 200


# ------------------------------------------------------------- access


def test_metrics_path_refuses_untrusted_peers(start_server, tmp_path):
    calls = tmp_path / "calls"
    server = start_server(APP, "--metrics-path", "/metrics", "--forwarded-allow-ips", "10.9.8.7",
                          env={"METRICS_APP_CALLS": str(calls)})
    before = len(calls.read_text().splitlines())
    status, _, body = http_get(server.port, "/metrics")
    assert status == 404
    assert "m0serve_" not in body
    # Forwarded headers from an untrusted peer change nothing.
    status, _, body = http_get(server.port, "/metrics", headers={"X-Forwarded-For": "10.9.8.7"})
    assert status == 404
    assert len(calls.read_text().splitlines()) == before     # nor did the application see it


def test_metrics_path_for_trusted_peers_and_bind_only_answers_its_path(start_server):
    server = start_server(APP, "--metrics-path", "/_m", "--metrics-bind", "127.0.0.1:0")
    port = metrics_port(server)
    assert http_get(server.port, "/_m")[0] == 200            # 127.0.0.1 is trusted by default
    assert http_get(port, "/_m")[0] == 200
    assert http_get(port, "/metrics")[0] == 404
    assert http_get(port, "/hello")[0] == 404                # never the application
    req = urllib.request.Request("http://127.0.0.1:%d/_m" % port, method="POST", data=b"")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 405


def test_the_metrics_port_never_runs_the_app_for_an_expect_100_continue(start_server, tmp_path):
    """Issue 27 item 4: with Expect: 100-continue a POST to --metrics-bind
    reached the application (the Expect branch routed on its own). It gets
    what the same POST without Expect gets, with no 100 Continue and none of
    its body read (the connection closes after the answer)."""
    from rawhttp import Conn, request

    calls = tmp_path / "calls"
    server = start_server(APP, "--metrics-bind", "127.0.0.1:0", env={"METRICS_APP_CALLS": str(calls)})
    port = metrics_port(server)
    before = calls.read_text() if calls.exists() else ""
    for path, status in (("/hello", 404), ("/metrics", 405)):
        assert request(port, "POST", path, body=b"").status == status
        with Conn(port, timeout=5) as conn:
            conn.send(b"POST %s HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1000000000\r\n\r\n"
                      % path.encode())
            r = conn.read_response("POST")
            assert r.status == status, r                 # not 100, not the application's 200
            assert r.header("connection") == "close"
            assert conn.wait_closed(5)
    assert (calls.read_text() if calls.exists() else "") == before


def test_bad_metrics_flags_exit_2(tmp_path):
    for args in (["--metrics-bind", "nowhere"], ["--metrics-path", "metrics"]):
        proc = spawn([APP, "--bind", "127.0.0.1:0"] + args)
        try:
            _, err = proc.communicate(timeout=10)
        finally:
            kill_group(proc)
        assert proc.returncode == 2, err
        assert args[0].encode() in err
        assert len(err.decode().strip().splitlines()) == 1, err
