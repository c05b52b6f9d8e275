"""smoke-hybrid, static files: a --static directory served by the event loop
(DESIGN capability 10; issue 11), in the hybrid server (hybridserver.py).
It checks:

* isolation: blocking Django views hold every handler thread of a worker
  (--blocking-threads 4) while its static files keep answering in
  milliseconds — the loop serves them, no thread is involved;
* the shared traversal table (tests/cases/static.tsv, also run by
  tests/unit/test_static.c) under both resolvers, ETag/304, Range/206/416,
  HEAD, a precompressed sibling, a 1 GiB sparse file to a slow reader with
  bounded RSS, a file replaced (and one truncated) while it is being sent.

Mounts, prefixes and what each application sees are test_mounts.py's.
"""

import gzip
import os
import statistics
import threading
import time

import pytest

from hybridserver import GIB, POOL, health, hybrid, load_table, mounts_of, static_root  # noqa: F401 (fixtures)
from rawhttp import Conn, IncompleteResponse, build_request, request
from serverproc import rss_kb


@pytest.fixture(scope="module")
def walk_server(start_module_server, static_root):
    """Static files only (no application at all), the openat walk forced."""
    return start_module_server(None, "--static", "/static=%s" % static_root, "--health-path", "/health",
                               app_dir=None, env={"M0_STATIC_RESOLVER": "walk"})


# -------------------------------------------------------------- isolation

def test_static_files_stay_fast_while_every_pool_thread_is_blocked(hybrid):
    slow = []

    def blocking_view():
        began = time.monotonic()
        response = request(hybrid.port, "GET", "/slow/?s=2", timeout=30)
        slow.append((response.status, time.monotonic() - began))

    # Two workers: of eight 2 s views one worker gets at least four, which
    # is its whole pinned pool (--blocking-threads 4).
    views = [threading.Thread(target=blocking_view) for _ in range(8)]
    for view in views:
        view.start()
    try:
        deadline = time.monotonic() + 1.5
        while True:
            conn = Conn(hybrid.port)
            before = health(conn)
            if before["pool"]["busy"] == POOL and before["pool"]["threads"] == POOL:
                break
            conn.close()
            assert time.monotonic() < deadline, "no worker had its %d handler threads busy" % POOL
            time.sleep(0.01)
        with conn:
            assert mounts_of(before)["/"]["in_flight"] >= POOL
            latencies = []
            for i in range(150):
                target = ("/static/css/app.css", "/static/js/app.js", "/static/a.txt", "/api/ping")[i % 4]
                began = time.perf_counter()
                response = conn.request("GET", target)
                latencies.append(time.perf_counter() - began)
                assert response.status == 200
            after = health(conn)
        # Same worker, still saturated: the static answers were measured
        # while no handler thread was free.
        assert after["pid"] == before["pid"]
        assert after["pool"]["busy"] == POOL
    finally:
        for view in views:
            view.join(30)
    assert len(slow) == 8 and all(status == 200 and took >= 2.0 for status, took in slow)
    latencies.sort()
    p50, p99 = statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]
    print("static while the pool is saturated: p50 %.3f ms, p99 %.3f ms, max %.3f ms"
          % (p50 * 1e3, p99 * 1e3, latencies[-1] * 1e3))
    # Generous bounds (a sanitizer build, a busy machine): the point is
    # milliseconds, against the 2 s a thread-bound answer would wait.
    assert p50 < 0.05, latencies
    assert latencies[-1] < 0.5, latencies


# ----------------------------------------------------------- static files

@pytest.mark.parametrize("which", ["default", "walk"])
def test_traversal_table(which, hybrid, walk_server):
    server = hybrid if which == "default" else walk_server
    with Conn(server.port) as conn:
        resolver = mounts_of(health(conn))["/static"]["resolver"]
    assert which == "default" or resolver == "openat-walk"
    key = "openat2" if resolver == "openat2" else "walk"
    failures = []
    for name, status, path, body in load_table()[1]:
        want = int(dict(p.split("=") for p in status.split(","))[key]) if "=" in status else int(status)
        response = request(server.port, "GET", "/static" + path)
        got_body = response.body.decode("utf-8", "replace")
        if response.status != want or (want == 200 and got_body != body):
            failures.append("%s %s: got %d %r, want %d %r" % (name, path, response.status, got_body, want, body))
        assert b"TOP-SECRET" not in response.body and b"root:" not in response.body
        # A refusal keeps the connection like any answer.
        assert response.header("connection") is None, name
    assert not failures, "\n".join(failures)


def test_validators_conditionals_and_head(hybrid, static_root):
    css = (static_root / "css" / "app.css").read_bytes()
    with Conn(hybrid.port) as conn:
        first = conn.request("GET", "/static/css/app.css")
        assert first.status == 200 and first.body == css
        assert first.header("content-type") == "text/css; charset=utf-8"
        assert first.header("cache-control") == "public, max-age=60"
        assert first.header("accept-ranges") == "bytes"
        assert first.header("vary") == "Accept-Encoding"
        etag, modified = first.header("etag"), first.header("last-modified")
        assert etag.startswith('"') and modified.endswith(" GMT")
        # The same connection carries on after each of these.
        not_modified = conn.request("GET", "/static/css/app.css", [("If-None-Match", "W/" + etag)])
        assert not_modified.status == 304 and not_modified.body == b""
        assert not_modified.header("etag") == etag
        assert conn.request("GET", "/static/css/app.css", [("If-Modified-Since", modified)]).status == 304
        assert conn.request("GET", "/static/css/app.css", [("If-None-Match", '"other"')]).status == 200
        assert conn.request("GET", "/static/css/app.css", [("If-Match", '"other"')]).status == 412
        head = conn.request("HEAD", "/static/css/app.css")
        assert head.status == 200 and head.body == b""
        assert int(head.header("content-length")) == len(css) and head.header("etag") == etag
        assert conn.request("POST", "/static/css/app.css", body=b"x").status == 405


def test_ranges(hybrid, static_root):
    js = (static_root / "js" / "app.js").read_bytes()
    with Conn(hybrid.port) as conn:
        part = conn.request("GET", "/static/js/app.js", [("Range", "bytes=10-19")])
        assert part.status == 206 and part.body == js[10:20]
        assert part.header("content-range") == "bytes 10-19/%d" % len(js)
        tail = conn.request("GET", "/static/js/app.js", [("Range", "bytes=-7")])
        assert tail.status == 206 and tail.body == js[-7:]
        beyond = conn.request("GET", "/static/js/app.js", [("Range", "bytes=%d-" % len(js))])
        assert beyond.status == 416 and beyond.header("content-range") == "bytes */%d" % len(js)
        several = conn.request("GET", "/static/js/app.js", [("Range", "bytes=0-1,4-5")])
        assert several.status == 200 and several.body == js        # documented: the whole file
        stale = conn.request("GET", "/static/js/app.js", [("Range", "bytes=0-1"), ("If-Range", '"old"')])
        assert stale.status == 200 and stale.body == js
        # A range of the sparse gigabyte, from its end: sendfile with an offset.
        end = conn.request("GET", "/static/sparse.bin", [("Range", "bytes=-100000")])
        assert end.status == 206 and end.body == bytes(100000)
        assert end.header("content-range") == "bytes %d-%d/%d" % (GIB - 100000, GIB - 1, GIB)


def test_precompressed_sibling_by_accept_encoding(hybrid, static_root):
    js = (static_root / "js" / "app.js").read_bytes()
    with Conn(hybrid.port) as conn:
        packed = conn.request("GET", "/static/js/app.js", [("Accept-Encoding", "br;q=0.9, gzip")])
        assert packed.status == 200 and packed.header("content-encoding") == "gzip"
        assert packed.header("content-type") == "text/javascript; charset=utf-8"
        assert packed.header("vary") == "Accept-Encoding"
        assert gzip.decompress(packed.body) == js
        plain = conn.request("GET", "/static/js/app.js", [("Accept-Encoding", "gzip;q=0, identity")])
        assert plain.header("content-encoding") is None and plain.body == js
        assert plain.header("etag") != packed.header("etag")


def test_gigabyte_sparse_file_to_a_slow_reader_costs_no_memory(hybrid):
    with Conn(hybrid.port, timeout=30) as conn:
        pid = health(conn)["pid"]
        before = rss_kb(pid)
        conn.send(build_request("GET", "/static/sparse.bin"))
        _, status, _, headers = conn.read_head()
        assert status == 200 and dict((k.lower(), v) for k, v in headers)["content-length"] == str(GIB)
        got = len(conn.buf)
        conn.buf.clear()
        peak = before
        slow_until = time.monotonic() + 2.0
        while time.monotonic() < slow_until:           # 64 KB every 20 ms: ~3 MB/s
            got += len(conn.sock.recv(65536))
            peak = max(peak, rss_kb(pid))
            time.sleep(0.02)
        print("1 GiB to a slow reader: worker RSS %d kB before, %d kB peak" % (before, peak))
        assert peak - before < 16 * 1024
        buf = memoryview(bytearray(1 << 20))
        while got < GIB:
            n = conn.sock.recv_into(buf)
            assert n > 0, "closed after %d bytes" % got
            got += n
        assert got == GIB
        assert conn.request("GET", "/static/a.txt").body == b"alpha"    # kept alive
    assert rss_kb(pid) - before < 16 * 1024


def test_a_file_replaced_while_it_is_sent(hybrid, static_root):
    """Replaced by rename (what deploy tools do): the response is the OLD
    file's bytes, whole — the open descriptor pins the old inode. Truncated
    in place: the connection closes short of Content-Length (never a mix)."""
    path = static_root / "replaced.bin"
    path.write_bytes(b"A" * (32 << 20))
    with Conn(hybrid.port, timeout=30) as conn:
        conn.send(build_request("GET", "/static/replaced.bin"))
        _, status, _, headers = conn.read_head()
        length = int(dict((k.lower(), v) for k, v in headers)["content-length"])
        assert status == 200 and length == 32 << 20
        while len(conn.buf) < 1 << 20:
            conn._fill()
        staging = static_root / ".replaced.tmp"          # a dotfile: never served half-written
        staging.write_bytes(b"B" * (16 << 20))
        os.replace(staging, path)
        body = conn._take_exact(length, b"")
        assert body.count(b"A") == length
        fresh = conn.request("GET", "/static/replaced.bin")
        assert fresh.body == b"B" * (16 << 20)

    path = static_root / "truncated.bin"
    path.write_bytes(b"C" * (32 << 20))
    with Conn(hybrid.port, timeout=30) as conn:
        conn.send(build_request("GET", "/static/truncated.bin"))
        conn.read_head()
        while len(conn.buf) < 1 << 20:
            conn._fill()
        os.truncate(path, 2 << 20)
        with pytest.raises(IncompleteResponse) as short:
            conn._take_exact(32 << 20, b"")
        assert set(short.value.partial) == {ord("C")}
    assert request(hybrid.port, "GET", "/static/a.txt").body == b"alpha"      # the server carries on
