"""Issue 23, protocol items 10 and 11: the status line's reason phrase, and
one access-log line per response with what was received and sent.

10. The reason phrase is the IANA registry's (RFC 9110 §15) for the server's
    own responses and for ASGI's integer status; an unregistered code gets an
    empty one ("HTTP/1.1 599 \\r\\n", RFC 9112 §4); a WSGI application's own
    status string goes out as given (PEP 3333).
11. A request the parser rejects is logged once, with the version the client
    sent and the bytes it received.
"""

import json
import re
import socket
import time
from urllib.parse import quote

import pytest

from rawhttp import Conn, build_request, request


def status_line(port, raw, timeout=5):
    """The response's status line exactly as sent (without its CRLF)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        got = b""
        while b"\r\n" not in got:
            chunk = s.recv(4096)
            assert chunk, got
            got += chunk
    return got.split(b"\r\n", 1)[0]


def get(target):
    return build_request("GET", target)


# ------------------------------------------------------- 10. reason phrases

def test_item10_wsgi_status_string_goes_out_as_given(start_server):
    server = start_server("edge_app:application")
    assert status_line(server.port, get("/status?s=" + quote("422 Whatever"))) == b"HTTP/1.1 422 Whatever"
    assert status_line(server.port, get("/status?s=" + quote("599 Custom Thing"))) == b"HTTP/1.1 599 Custom Thing"
    # A bare code: the registry's phrase, or none, never invented text.
    assert status_line(server.port, get("/status?s=422")) == b"HTTP/1.1 422 Unprocessable Content"
    assert status_line(server.port, get("/status?s=451")) == b"HTTP/1.1 451 Unavailable For Legal Reasons"
    assert status_line(server.port, get("/status?s=599")) == b"HTTP/1.1 599 "


@pytest.mark.parametrize("code, line", [
    (203, b"HTTP/1.1 203 Non-Authoritative Information"),
    (410, b"HTTP/1.1 410 Gone"),
    (415, b"HTTP/1.1 415 Unsupported Media Type"),
    (422, b"HTTP/1.1 422 Unprocessable Content"),
    (425, b"HTTP/1.1 425 Too Early"),
    (428, b"HTTP/1.1 428 Precondition Required"),
    (451, b"HTTP/1.1 451 Unavailable For Legal Reasons"),
    (507, b"HTTP/1.1 507 Insufficient Storage"),
    (511, b"HTTP/1.1 511 Network Authentication Required"),
    (299, b"HTTP/1.1 299 "),
    (599, b"HTTP/1.1 599 "),
])
def test_item10_asgi_status_gets_the_registered_phrase(start_module_server, code, line):
    server = start_module_server("asgi_raw:app")
    assert status_line(server.port, get("/status?code=%d" % code)) == line


def test_item10_fastapi_validation_error_is_422_unprocessable_content(start_server):
    pytest.importorskip("fastapi")
    server = start_server("fastapi_app:app")
    assert status_line(server.port, get("/items/x")) == b"HTTP/1.1 422 Unprocessable Content"


def test_item10_static_precondition_failed(start_server, tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    server = start_server(None, "--static", "/s=%s" % tmp_path, app_dir=None)
    raw = build_request("GET", "/s/a.txt", [("If-Match", '"other"')])
    assert status_line(server.port, raw) == b"HTTP/1.1 412 Precondition Failed"


# ------------------------------------------- 11. one access line per response

def received(port, raw, timeout=5):
    """Everything the server sent for raw, up to its close: (bytes, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    return got, got.split(b"\r\n\r\n", 1)[1]


def access_lines(server, start, marker):
    """The access-log lines from index start up to the one for GET /<marker>
    (which a test requests last, so every line before it has been written)."""
    assert request(server.port, "GET", "/" + marker).status in (200, 404)
    assert server.stdout.wait_for(re.compile(r'"GET /%s HTTP/1\.1"' % marker), 5)
    lines = server.stdout.lines
    return lines[start:next(i for i, line in enumerate(lines) if "/" + marker in line)]


def log_start(server, probe=r'"GET / HTTP/1\.1"|"path":"/"'):
    """Where the lines after the startup probe's (GET /) begin."""
    assert server.stdout.wait_for(re.compile(probe), 5)
    return len(server.stdout.lines)


LINE_RE = re.compile(r'^\S+ - - \[[^]]+\] "(?P<r>[^"]*)" (?P<s>\d{3}) (?P<b>\d+) ')


@pytest.mark.parametrize("raw, reqline, status", [
    # rejected after the version was read: a bad header line, a missing Host
    (b"GET /x HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n", "GET /x HTTP/1.1", 400),
    (b"GET /x HTTP/1.1\r\n\r\n", "GET /x HTTP/1.1", 400),
    (b"GET /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "GET /x HTTP/1.0", 400),
    # rejected before there was a version to log
    (b"\x01\x02\x03 / HTTP/1.1\r\n\r\n", "-", 400),
])
def test_item11_a_rejected_request_is_logged_once_as_received(start_server, raw, reqline, status):
    server = start_server("conformance:application", "--access-log")
    start = log_start(server)
    sent, body = received(server.port, raw)
    assert sent.startswith(b"HTTP/1.1 %d " % status), sent
    lines = access_lines(server, start, "after-the-rejection")
    assert len(lines) == 1, lines
    m = LINE_RE.match(lines[0])
    assert m, lines[0]
    assert (m["r"], int(m["s"]), int(m["b"])) == (reqline, status, len(body)), lines[0]
    assert len(body) > 0


def test_item11_a_head_timeout_is_logged_once(start_server):
    server = start_server("conformance:application", "--access-log", "--header-timeout", "0.5")
    start = log_start(server)
    sent, body = received(server.port, b"GET /x HTTP/1.1\r\nHost: a\r\n")
    assert sent.startswith(b"HTTP/1.1 408 "), sent
    lines = access_lines(server, start, "after-the-timeout")
    assert len(lines) == 1, lines
    m = LINE_RE.match(lines[0])
    assert (m["r"], int(m["s"]), int(m["b"])) == ("GET /x HTTP/1.1", 408, len(body)), lines[0]


def test_item11_json_line_names_the_protocol_received(start_server):
    server = start_server("conformance:application", "--access-log", "--access-log-format", "json")
    start = log_start(server)
    sent, body = received(server.port, b"GET /x HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n")
    assert request(server.port, "GET", "/after").status in (200, 404)
    assert server.stdout.wait_for(re.compile(r'"path":"/after"'), 5)
    docs = [json.loads(line) for line in server.stdout.lines[start:]]
    assert [(d["path"], d["protocol"], d["status"], d["bytes"]) for d in docs] == [
        ("/x", "HTTP/1.1", 400, len(body)), ("/after", "HTTP/1.1", docs[-1]["status"], docs[-1]["bytes"])]
