"""HTTP/1.1 and PEP 3333 conformance of m0serve.

Drives tests/apps/conformance.py (most routes wrapped in
wsgiref.validate.validator) on one worker: bodies in and out, HEAD,
keep-alive, pipelining, Expect: 100-continue, HTTP/1.0, mandatory response
headers, bodiless statuses, the file wrapper, application errors, and the
environ the server builds.
"""

import email.utils
import json
import os

import pytest

from rawhttp import Conn, IncompleteResponse, build_request, chunked, request

ECHO_MODES = ["read", "readn", "readline", "readlines", "iter"]
LARGE = 5 * 1024 * 1024


def pattern(n):
    return (bytes(range(256)) * (n // 256 + 1))[:n]


@pytest.fixture(scope="module")
def server(start_module_server):
    return start_module_server("conformance:application", "--max-body", str(16 * 1024 * 1024))


def get(server, target, headers=(), version="HTTP/1.1"):
    return request(server.port, "GET", target, headers, version=version)


def environ_of(server, target="/environ", headers=(), version="HTTP/1.1"):
    response = get(server, target, headers, version)
    assert response.status == 200, response
    return json.loads(response.body)


def test_get(server):
    response = get(server, "/")
    assert (response.status, response.body) == (200, b"ok")


def test_large_response_body(server):
    response = get(server, "/big?n=%d" % (3 * 1024 * 1024 + 7))
    assert response.status == 200
    assert response.body == pattern(3 * 1024 * 1024 + 7)


@pytest.mark.parametrize("mode", ECHO_MODES)
def test_post_small_body_echo(server, mode):
    body = b"line one\nline two\n\n\xff\x00 last line without newline"
    response = request(server.port, "POST", "/echo/" + mode, body=body)
    assert (response.status, response.body) == (200, body)


@pytest.mark.parametrize("mode", ["read", "readn"])
def test_post_large_body_echo(server, mode):
    body = pattern(LARGE)
    response = request(server.port, "POST", "/echo/" + mode + "?n=100000", body=body, timeout=30)
    assert response.status == 200
    assert response.body == body


@pytest.mark.parametrize("mode", ["readn", "readline", "iter"])
def test_chunked_request_body(server, mode):
    body = pattern(300000)
    with Conn(server.port) as conn:
        conn.send(build_request("POST", "/echo/" + mode, [("Transfer-Encoding", "chunked")]) + chunked(body))
        response = conn.read_response()
    assert response.status == 200
    assert response.body == body


def test_large_chunked_request_body(server):
    body = pattern(LARGE)
    with Conn(server.port, timeout=30) as conn:
        conn.send(build_request("POST", "/echo/readn?n=65536", [("Transfer-Encoding", "chunked")]) + chunked(body))
        response = conn.read_response()
    assert response.status == 200
    assert response.body == body


def headers_but_date(response):
    return [(name.lower(), value) for name, value in response.headers if name.lower() != "date"]


def test_head_has_get_headers_and_no_body(server):
    with Conn(server.port) as conn:
        got = conn.request("GET", "/big?n=1000")
        head = conn.request("HEAD", "/big?n=1000")
        after = conn.request("GET", "/")  # parses only if HEAD sent no body bytes
    assert head.status == 200
    assert headers_but_date(head) == headers_but_date(got)
    assert head.header("content-length") == "1000"
    assert after.body == b"ok"


def test_keep_alive_many_requests(server):
    with Conn(server.port) as conn:
        for i in range(200):
            response = conn.request("GET", "/?i=%d" % i)
            assert (response.status, response.body) == (200, b"ok")
            assert (response.header("connection") or "").lower() != "close"


def test_pipelined_requests_answered_in_order(server):
    batch = (build_request("GET", "/environ?n=1")
             + build_request("POST", "/echo/readn", body=b"second")
             + build_request("GET", "/environ?n=3"))
    with Conn(server.port) as conn:
        conn.send(batch)
        first, second, third = (conn.read_response() for _ in range(3))
    assert json.loads(first.body)["QUERY_STRING"] == "n=1"
    assert second.body == b"second"
    assert json.loads(third.body)["QUERY_STRING"] == "n=3"


def test_expect_100_continue(server):
    with Conn(server.port) as conn:
        conn.send(build_request("POST", "/echo/readn", [("Expect", "100-continue"), ("Content-Length", "11")]))
        interim = conn.read_response()
        assert (interim.version, interim.status) == ("HTTP/1.1", 100)
        conn.send(b"hello world")
        final = conn.read_response()
    assert (final.status, final.body) == (200, b"hello world")


def test_http10_closes_by_default(server):
    with Conn(server.port) as conn:
        response = conn.request("GET", "/", version="HTTP/1.0")
        assert (response.status, response.body) == (200, b"ok")
        assert conn.wait_closed(5)


def test_http10_keep_alive_when_asked(server):
    with Conn(server.port) as conn:
        first = conn.request("GET", "/", [("Connection", "keep-alive")], version="HTTP/1.0")
        assert first.status == 200
        assert (first.header("connection") or "").lower() == "keep-alive"
        second = conn.request("GET", "/", [("Connection", "keep-alive")], version="HTTP/1.0")
        assert (second.status, second.body) == (200, b"ok")


def test_date_and_server_headers(server):
    response = get(server, "/")
    date = email.utils.parsedate_to_datetime(response.header("date"))
    assert response.header("date").endswith(" GMT") and date.utcoffset().total_seconds() == 0
    assert response.header("server")


@pytest.mark.parametrize("code", [204, 304])
def test_bodiless_status_has_no_body(server, code):
    with Conn(server.port) as conn:
        response = conn.request("GET", "/status?code=%d" % code)
        after = conn.request("GET", "/")  # parses only if no body bytes were sent
    assert response.status == code
    assert response.header("transfer-encoding") is None
    if code == 204:
        assert response.header("content-length") is None
    assert after.body == b"ok"


def test_file_wrapper(server, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 123)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    response = get(server, "/file?path=%s" % path)
    assert response.status == 200
    assert response.header("content-length") == str(len(data))
    assert response.body == data


def test_generator_body(server):
    response = get(server, "/generator?n=5")
    assert response.status == 200
    assert response.body == b"".join(b"chunk-%d\n" % i for i in range(5))


def test_write_callable(server):
    response = get(server, "/write")
    assert (response.status, response.body) == (200, b"written;returned")


def test_app_iterable_is_closed(server):
    before = int(get(server, "/closecount").body)
    assert get(server, "/tracked").body == b"tracked"
    assert int(get(server, "/closecount").body) == before + 1


def test_unread_request_body_is_discarded(server):
    with Conn(server.port) as conn:
        ignored = conn.request("POST", "/ignore-body", body=pattern(100000))
        after = conn.request("GET", "/")
    assert (ignored.status, ignored.body) == (200, b"ignored")
    assert (after.status, after.body) == (200, b"ok")


def test_exception_before_start_response_is_500(server):
    assert get(server, "/error/before").status == 500


def test_exception_after_first_chunk_aborts_connection(server):
    with pytest.raises(IncompleteResponse) as info:
        get(server, "/error/after")
    assert b"first chunk" in info.value.partial


def test_start_response_with_exc_info_replaces_status(server):
    response = get(server, "/error/replace")
    assert (response.status, response.body) == (500, b"replaced")


def test_environ_path_info_is_percent_decoded_latin1(server):
    assert environ_of(server, "/environ/caf%C3%A9%20x")["PATH_INFO"] == "/environ/caf\u00c3\u00a9 x"


def test_environ_query_string_is_raw(server):
    assert environ_of(server, "/environ?a=%20b&c=d+e&f")["QUERY_STRING"] == "a=%20b&c=d+e&f"


def test_environ_request_basics(server):
    env = environ_of(server)
    assert env["REQUEST_METHOD"] == "GET"
    assert env["SCRIPT_NAME"] == ""
    assert env["SERVER_PROTOCOL"] == "HTTP/1.1"
    assert env["REMOTE_ADDR"] == "127.0.0.1"
    assert env["SERVER_PORT"] == str(server.port)
    assert env["HTTP_HOST"] == "127.0.0.1:%d" % server.port
    assert env["wsgi.url_scheme"] == "http"
    assert env["wsgi.version"] == [1, 0]
    assert env["wsgi.run_once"] is False


def test_environ_http10_protocol(server):
    assert environ_of(server, version="HTTP/1.0")["SERVER_PROTOCOL"] == "HTTP/1.0"


def test_environ_http_headers(server):
    env = environ_of(server, headers=[("X-Custom-Header", "v1"), ("Content-Type", "text/x-test")])
    assert env["HTTP_X_CUSTOM_HEADER"] == "v1"
    assert env["CONTENT_TYPE"] == "text/x-test"
    assert "HTTP_CONTENT_TYPE" not in env


def test_environ_content_length(server):
    response = request(server.port, "POST", "/environ", body=b"abc")
    assert json.loads(response.body)["CONTENT_LENGTH"] == "3"


def test_environ_drops_headers_with_underscore(server):
    env = environ_of(server, headers=[("X_Under", "smuggled"), ("X-Dash", "kept")])
    assert env["HTTP_X_DASH"] == "kept"
    assert "smuggled" not in env.values()


def test_environ_joins_repeated_headers(server):
    env = environ_of(server, headers=[("X-Multi", "a"), ("X-Multi", "b")])
    assert [part.strip() for part in env["HTTP_X_MULTI"].split(",")] == ["a", "b"]
