"""smoke-asgi: ASGI applications on the per-worker asyncio executor (issue 9).

Raw ASGI, Starlette (with sse-starlette), FastAPI and Django's ASGIHandler,
served from the CLI as a uvicorn user would; scopes, bodies, streaming with
credit, disconnects, lifespan, holds, and the RSS guard.
"""

import json
import os
import re
import signal
import socket
import threading
import time

import pytest

from rawhttp import Conn, IncompleteResponse, build_request, request
from serverproc import binary_is_sanitized, rss_kb, run_to_exit, APPS_DIR
from sse import SSEStream
from test_streaming import first_block_before_the_second, recv_all, recv_until, slow_read

RAW = "asgi_raw:app"


def test_banner_and_a_request(start_server):
    server = start_server(RAW)
    response = request(server.port, "GET", "/")
    assert (response.status, response.body) == (200, b"hello")
    assert response.header("content-length") == "5"


def test_scope_follows_the_asgi_spec(start_server):
    server = start_server(RAW)
    response = request(server.port, "GET", "/sc%6Fpe?a=1&b=%20", [("X-Custom", "Value"), ("X-Custom", "two")])
    scope = json.loads(response.body)
    assert scope["type"] == "http"
    assert scope["asgi"] == {"version": "3.0", "spec_version": "2.4"}
    assert scope["http_version"] == "1.1" and scope["method"] == "GET" and scope["scheme"] == "http"
    assert scope["path"] == "/scope" and scope["raw_path"] == "/sc%6Fpe"
    assert scope["query_string"] == "a=1&b=%20"
    assert scope["root_path"] == ""
    assert ["x-custom", "Value"] in scope["headers"] and ["x-custom", "two"] in scope["headers"]
    assert all(name == name.lower() for name, _ in scope["headers"])
    assert scope["client"][0] == "127.0.0.1" and isinstance(scope["client"][1], int)
    assert scope["server"] == ["127.0.0.1", server.port]
    assert scope["state"]["started"] > 0                 # lifespan's state, copied in
    assert "http.response.pathsend" in scope["extensions"]


def test_an_absolute_form_target_replaces_the_host_header(start_server):
    # RFC 9112 §3.2.2: the origin server MUST ignore the received Host and use
    # the target's authority -- in the scope's headers, as WSGI's HTTP_HOST does.
    server = start_server(RAW)
    with Conn(server.port) as conn:
        conn.send(b"GET http://example.com:8080/scope?x HTTP/1.1\r\nHost: other\r\n\r\n")
        scope = json.loads(conn.read_response().body)
        assert scope["path"] == "/scope" and scope["query_string"] == "x"
        assert [v for k, v in scope["headers"] if k == "host"] == ["example.com:8080"]
        conn.send(b"GET http://example.com/scope HTTP/1.0\r\n\r\n")     # no Host at all
        scope = json.loads(conn.read_response().body)
        assert [v for k, v in scope["headers"] if k == "host"] == ["example.com"]


def test_a_trusted_proxy_sets_client_and_scheme(start_server):
    server = start_server(RAW)            # the test connects from 127.0.0.1: trusted by default
    hdrs = [("X-Forwarded-For", "203.0.113.7, 10.9.9.9"), ("X-Forwarded-Proto", "https")]
    scope = json.loads(request(server.port, "GET", "/scope", hdrs).body)
    assert scope["client"][0] == "10.9.9.9" and scope["scheme"] == "https"   # the first hop not trusted
    scope = json.loads(request(server.port, "GET", "/scope", [("X-Forwarded-For", "203.0.113.7"),
                                                             ("X-Forwarded-Proto", "https")]).body)
    assert scope["client"][0] == "203.0.113.7" and scope["scheme"] == "https"
    other = start_server(RAW, "--forwarded-allow-ips", "10.0.0.1")
    scope = json.loads(request(other.port, "GET", "/scope", [("X-Forwarded-For", "203.0.113.7"),
                                                            ("X-Forwarded-Proto", "https")]).body)
    assert scope["client"][0] == "127.0.0.1" and scope["scheme"] == "http"     # an untrusted peer is ignored


def test_request_body_arrives_through_receive(start_server):
    server = start_server(RAW)
    body = os.urandom(300 * 1024)
    response = request(server.port, "POST", "/echo", body=body)
    assert response.status == 200 and response.body == body
    assert int(response.header("x-pieces")) > 1          # more_body pieces, not one blob


def test_http10_and_head(start_server):
    server = start_server(RAW)
    response = request(server.port, "GET", "/", version="HTTP/1.0")
    assert response.status == 200 and response.body == b"hello"
    with Conn(server.port) as conn:
        head = conn.request("HEAD", "/")
        assert head.status == 200 and head.body == b"" and head.header("content-length") == "5"
        assert conn.request("GET", "/").body == b"hello"


@pytest.mark.parametrize("version", ["HTTP/1.1", "HTTP/1.0"])
def test_a_stream_is_delivered_incrementally(start_server, tmp_path, version):
    server = start_server(RAW)
    raw = first_block_before_the_second(server.port, "/gated?gate=%s/g" % tmp_path, tmp_path / "g", version)
    head, _, body = raw.partition(b"\r\n\r\n")
    if version == "HTTP/1.1":
        assert b"Transfer-Encoding: chunked" in head and body == b"2\r\nb1\r\n2\r\nb2\r\n0\r\n\r\n"
    else:
        assert b"Transfer-Encoding" not in head and body == b"b1b2"


def test_eight_slow_requests_overlap_on_one_worker(start_server):
    server = start_server(RAW)
    results = []
    began = time.monotonic()
    threads = [threading.Thread(target=lambda: results.append(request(server.port, "GET", "/sleep?s=1.5",
                                                                       timeout=20).status)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [200] * 8
    assert time.monotonic() - began < 3.0                # not 8 x 1.5 s


def test_errors_before_and_after_the_head(start_server):
    server = start_server(RAW)
    assert request(server.port, "GET", "/raise-before").status == 500
    assert request(server.port, "GET", "/no-response").status == 500
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(build_request("GET", "/raise-after"))
        raw = recv_all(s)
    assert b"5\r\nfirst\r\n" in raw and not raw.endswith(b"0\r\n\r\n")
    assert server.stderr.wait_for(re.compile("asgi app raised before the head"), 5)
    assert request(server.port, "GET", "/").status == 200


def test_a_client_leaving_is_http_disconnect_within_a_second(start_server):
    server = start_server(RAW)
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(build_request("GET", "/ticks?tag=left"))
        recv_until(s, b"tick 2")
    left = time.monotonic()
    assert server.stderr.wait_for(re.compile("asgi: disconnect tag=left"), 5)
    assert time.monotonic() - left < 1.0


def test_a_client_leaving_mid_body_is_http_disconnect(start_server):
    """Expect: 100-continue, half the body, then the client closes: receive()
    returns http.disconnect (ASGI HTTP 2.4), it does not raise."""
    server = start_server(RAW)
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
        assert recv_until(s, b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(b"hello")
    assert server.stderr.wait_for(re.compile(r"asgi: echo got http.disconnect after [05] bytes"), 5)
    assert "the application raised" not in server.stderr.text()


def test_a_client_closing_before_the_answer_is_http_disconnect(start_server):
    server = start_server(RAW)
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(build_request("GET", "/wait-disconnect?tag=fin"))
        time.sleep(0.2)                   # the application is waiting in receive()
    left = time.monotonic()               # a FIN, not a reset
    assert server.stderr.wait_for(re.compile("left before the answer tag=fin"), 5)
    assert time.monotonic() - left < 1.0


def test_a_slow_reader_costs_bounded_memory(start_server):
    server = start_server(RAW)
    assert request(server.port, "GET", "/").status == 200
    received, grown = slow_read(server, "/big?mb=100")
    assert 0 < received < 10 * 1024 * 1024
    if not binary_is_sanitized():         # ASan's quarantine keeps freed memory
        assert grown < 4 * 1024, "RSS grew %d kB for a client reading 64 KB/s" % grown


def test_pathsend(start_server, tmp_path):
    server = start_server(RAW)
    f = tmp_path / "f.bin"
    f.write_bytes(os.urandom(200000))
    response = request(server.port, "GET", "/pathsend?path=%s" % f)
    assert response.status == 200 and response.body == f.read_bytes()
    assert response.header("content-length") == "200000"


def test_asgi2_double_callable_is_wrapped(start_server):
    server = start_server("asgi2_app:app")
    assert request(server.port, "GET", "/x").body == b"asgi2 /x"


# ---------------------------------------------------------------- lifespan

def test_lifespan_startup_failure_exits_nonzero_with_the_message():
    rc, err = run_to_exit(["asgi_lifespan_fail:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0"])
    assert rc != 0
    assert "the database is unreachable (test)" in err


def test_a_lifespan_startup_that_raises_fails_the_boot():
    """Issue 27 item 11: an application that takes lifespan.startup and then
    raises speaks lifespan, and its startup failed: exit 1 with its
    traceback, not "does not speak ASGI lifespan" and serving without it."""
    rc, err = run_to_exit(["asgi_lifespan_raise:app", "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0"],
                          env={"LIFESPAN_RAISE": "always"})
    assert rc == 1, err
    assert "does not speak ASGI lifespan" not in err
    assert "ConnectionError: the database is down (startup 1, test)" in err
    assert re.search(r"\[ERROR\] asgi_lifespan_raise:app: lifespan startup failed: .*ConnectionError", err), err
    assert "worker booted" not in err


def test_an_application_raising_before_it_takes_startup_does_not_speak_lifespan(start_server):
    server = start_server("asgi_lifespan_raise:app", env={"LIFESPAN_RAISE": "before"})
    assert request(server.port, "GET", "/").body == b"{}"
    assert server.stderr.wait_for(re.compile(r"does not speak ASGI lifespan \(RuntimeError: lifespan\? not here"), 5)


def test_lifespan_shutdown_runs_once_on_sigterm(start_server, tmp_path):
    log = tmp_path / "shutdown.log"
    server = start_server(RAW, env={"ASGI_SHUTDOWN_LOG": str(log)})
    assert request(server.port, "GET", "/").status == 200
    server.signal(signal.SIGTERM)
    assert server.wait(15) == 0
    assert log.read_text().count("shutdown") == 1


def test_work_after_the_response_finishes_before_the_worker_stops(start_server):
    server = start_server(RAW)
    assert request(server.port, "GET", "/after?tag=late").body == b"answered"
    server.signal(signal.SIGTERM)
    assert server.wait(15) == 0
    assert server.stderr.wait_for(re.compile("asgi: after-work done tag=late"), 5)
    assert "Traceback" not in server.stderr.text()


LIFESPAN_TASK = "asgi_lifespan_task:app"


def _stop_time(server):
    """SIGTERM; seconds until the master exits (status 0)."""
    began = time.monotonic()
    server.signal(signal.SIGTERM)
    assert server.wait(15) == 0
    return time.monotonic() - began


def test_a_task_the_lifespan_owns_does_not_hold_up_the_stop(start_server):
    """Issue 27 item 7: a task lifespan startup started and only its shutdown
    stops (Litestar's event emitter) cannot finish before lifespan
    shutdown; the worker runs the shutdown once the requests are done,
    not after --graceful-timeout."""
    server = start_server(LIFESPAN_TASK, "--graceful-timeout", "10")
    assert request(server.port, "GET", "/").body == b"hello"
    assert _stop_time(server) < 1.0
    err = server.stderr.text()
    assert "lifespan-task: ticker stopped" in err and "Traceback" not in err


def test_a_request_in_flight_at_sigterm_completes_before_lifespan_shutdown(start_server):
    server = start_server(LIFESPAN_TASK, "--graceful-timeout", "10")
    got = {}
    client = threading.Thread(target=lambda: got.update(r=request(server.port, "GET", "/slow?s=1")))
    client.start()
    assert server.stderr.wait_for(re.compile("lifespan-task: slow started"), 5)
    began = time.monotonic()
    server.signal(signal.SIGTERM)
    client.join(10)
    assert (got["r"].status, got["r"].body) == (200, b"slow")
    assert server.wait(15) == 0
    assert time.monotonic() - began < 2.0            # the request's second, then at once
    err = server.stderr.text()
    assert err.index("lifespan-task: slow done") < err.index("lifespan-task: shutdown") < \
        err.index("lifespan-task: ticker stopped")


def test_tasks_left_after_lifespan_shutdown_are_cancelled_and_named(start_server):
    server = start_server(LIFESPAN_TASK, "--graceful-timeout", "10")
    assert request(server.port, "GET", "/orphan").body == b"orphan"
    assert _stop_time(server) < 1.0
    err = server.stderr.text()
    assert err.index("lifespan-task: ticker stopped") < err.index("lifespan-task: orphan cancelled")
    assert re.search(r"\[WARNING\] .*cancelled 1 task still running after lifespan shutdown: orphan_forever", err), err


def test_a_litestar_hello_world_stops_at_once(start_server):
    """Issue 27 item 7: Litestar's lifespan runs its event emitter until
    shutdown; the stop took the whole --graceful-timeout (30 s)."""
    server = start_server("litestar_app:app")
    assert request(server.port, "GET", "/").body == b"Hello, world!"
    assert _stop_time(server) < 1.0
    err = server.stderr.text()
    assert "litestar: on_shutdown" in err and "Traceback" not in err and "cancelled" not in err


def test_a_litestar_request_in_flight_at_sigterm_completes_before_shutdown(start_server):
    server = start_server("litestar_app:app")
    got = {}
    client = threading.Thread(target=lambda: got.update(r=request(server.port, "GET", "/slow?s=1")))
    client.start()
    assert server.stderr.wait_for(re.compile("litestar: slow started"), 5)
    began = time.monotonic()
    server.signal(signal.SIGTERM)
    client.join(10)
    assert (got["r"].status, got["r"].body) == (200, b"slow")
    assert server.wait(15) == 0
    assert time.monotonic() - began < 2.0
    err = server.stderr.text()
    assert err.index("litestar: slow done") < err.index("litestar: on_shutdown")


def test_lifespan_off_and_blocking_threads_refused():
    rc, err = run_to_exit([RAW, "--app-dir", str(APPS_DIR), "--bind", "127.0.0.1:0", "--blocking-threads", "4"])
    assert rc != 0 and "--blocking-threads applies to WSGI" in err


# --------------------------------------------------------------- frameworks

def test_starlette_routes_json_forms_uploads(start_server):
    server = start_server("starlette_app:app")
    response = request(server.port, "GET", "/json")
    assert json.loads(response.body) == {"ok": True, "path": "/json", "root_path": ""}
    assert json.loads(request(server.port, "GET", "/items/42").body) == {"item_id": "42"}
    form = request(server.port, "POST", "/form", [("Content-Type", "application/x-www-form-urlencoded")],
                   body=b"a=1&b=two")
    assert json.loads(form.body) == {"a": "1", "b": "two"}
    boundary = "m0boundary"
    payload = os.urandom(100000)
    body = ("--%s\r\nContent-Disposition: form-data; name=\"f\"; filename=\"up.bin\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n" % boundary).encode() + payload + \
           ("\r\n--%s\r\nContent-Disposition: form-data; name=\"t\"\r\n\r\nhi\r\n--%s--\r\n"
            % (boundary, boundary)).encode()
    up = request(server.port, "POST", "/form", [("Content-Type", "multipart/form-data; boundary=" + boundary)],
                 body=body)
    assert json.loads(up.body) == {"f": {"filename": "up.bin", "size": 100000}, "t": "hi"}


def test_starlette_streaming_response_is_incremental(start_server, tmp_path):
    server = start_server("starlette_app:app")
    raw = first_block_before_the_second(server.port, "/stream?gate=%s/g" % tmp_path, tmp_path / "g")
    assert raw.partition(b"\r\n\r\n")[2] == b"2\r\nb1\r\n2\r\nb2\r\n0\r\n\r\n"


def test_sse_starlette_is_byte_exact(start_server):
    server = start_server("starlette_app:app")
    response = request(server.port, "GET", "/sse?n=3")
    assert response.status == 200
    assert response.header("content-type").startswith("text/event-stream")
    events = response.body.replace(b"\r\n", b"\n")
    assert events == b"".join(b"id: %d\nevent: tick\ndata: tick %d\n\n" % (i, i) for i in range(3))


def test_fastapi_json_validation_upload_and_sync_endpoints(start_server):
    server = start_server("fastapi_app:app")
    greeting = json.loads(request(server.port, "GET", "/json").body)
    assert greeting["message"] == "hello" and greeting["pid"] > 0
    assert json.loads(request(server.port, "GET", "/items/21").body) == {"n": 21, "double": 42}
    assert request(server.port, "GET", "/items/x").status == 422
    assert json.loads(request(server.port, "GET", "/sync").body) == {"sync": True}
    boundary = "b0undary"
    body = ("--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\n" % boundary
            ).encode() + b"x" * 5000 + ("\r\n--%s--\r\n" % boundary).encode()
    up = request(server.port, "POST", "/upload", [("Content-Type", "multipart/form-data; boundary=" + boundary)],
                 body=body)
    assert json.loads(up.body) == {"filename": "a.txt", "size": 5000}


def test_fastapi_hold_receives_a_publish_from_another_worker(start_server):
    server = start_server("fastapi_app:app", "--realtime", workers=2)
    server.wait_workers(lambda p: len(p) == 2)
    stream = SSEStream(server.port, "/events?channel=fa")
    assert stream.status == 200 and stream.headers["content-type"] == "text/event-stream"
    held_on = int(re.search(r"worker=(\d+)", stream.next().comment).group(1))
    event_id = None
    for _ in range(60):                   # publish from the other worker
        with Conn(server.port) as conn:
            if json.loads(conn.request("GET", "/pid").body)["pid"] != held_on:
                event_id = json.loads(conn.request("GET", "/publish?channel=fa&text=cross").body)["id"]
                break
    assert event_id is not None
    event = stream.next_event()
    assert (event.id, event.data) == (event_id, "cross")
    stream.close()


def test_django_asgi_handler_serves_async_and_sync_views(start_server):
    server = start_server("django_async:application")
    data = json.loads(request(server.port, "GET", "/async").body)
    assert data == {"async": True, "path": "/async", "script_name": ""}
    assert request(server.port, "GET", "/sync").body == b"sync"


# ---------------------------------------------------------------- RSS guard

@pytest.mark.skipif(binary_is_sanitized(), reason="ASan's quarantine makes RSS growth meaningless")
def test_rss_growth_over_10000_requests(start_server):
    server = start_server(RAW)
    pid = next(iter(server.worker_pids()))
    with Conn(server.port) as conn:
        for _ in range(2000):             # warm up: allocator arenas, caches
            conn.request("GET", "/")
        before = rss_kb(pid)
        for _ in range(10000):
            assert conn.request("GET", "/").status == 200
    grown = rss_kb(pid) - before
    assert grown < 2048, "RSS grew %d kB over 10,000 requests" % grown


def test_each_disconnect_message_is_the_applications_own(start_server):
    # One worker, one executor: the second request's http.disconnect must not
    # carry what the application wrote into the first's (a shared dict did).
    server = start_server("asgi_disconnect:app")
    with Conn(server.port) as conn:
        for target in ("/a", "/b", "/c"):
            assert conn.request("GET", target).body == b"ok"
        seen = json.loads(conn.request("GET", "/seen").body)
    assert len(seen) >= 3                       # and the start-up probe's request
    assert all(message == {"type": "http.disconnect"} for message in seen), seen
