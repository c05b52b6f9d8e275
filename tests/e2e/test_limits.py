"""Connection and request limits: --header-timeout, --timeout-keep-alive,
--max-body."""

import time

import pytest

from rawhttp import Conn, build_request, chunked

MAX_BODY = 1024


@pytest.fixture(scope="module")
def server(start_module_server):
    return start_module_server("conformance:application", "--header-timeout", "1",
                               "--timeout-keep-alive", "1", "--max-body", str(MAX_BODY))


def test_header_timeout_sends_408_and_closes(server):
    with Conn(server.port, timeout=5) as conn:
        conn.send(b"GET / HTTP/1.1\r\nHost: a\r\n")
        started = time.monotonic()
        response = conn.read_response()
        assert response.status == 408
        assert time.monotonic() - started < 4
        assert conn.wait_closed(5)


def test_idle_keep_alive_connection_is_closed(server):
    with Conn(server.port, timeout=5) as conn:
        response = conn.request("GET", "/")
        assert response.status == 200
        assert (response.header("connection") or "").lower() != "close"
        assert conn.wait_closed(5)


def test_body_at_max_body_is_accepted(server):
    body = b"x" * MAX_BODY
    with Conn(server.port) as conn:
        response = conn.request("POST", "/echo/readn", body=body)
    assert (response.status, response.body) == (200, body)


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_body_over_max_body_is_413(server, framing):
    body = b"x" * (2 * MAX_BODY)
    if framing == "chunked":
        raw = build_request("POST", "/echo/readn", [("Transfer-Encoding", "chunked")]) + chunked(body)
    else:
        raw = build_request("POST", "/echo/readn", body=body)
    with Conn(server.port) as conn:
        conn.send_tolerant(raw)
        assert conn.read_response().status == 413
