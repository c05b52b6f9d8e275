"""Issue 23, protocol items 10 and 11: the status line's reason phrase, and
one access-log line per response with what was received and sent.

10. The reason phrase is the IANA registry's (RFC 9110 §15) for the server's
    own responses and for ASGI's integer status; an unregistered code gets an
    empty one ("HTTP/1.1 599 \\r\\n", RFC 9112 §4); a WSGI application's own
    status string goes out as given (PEP 3333).
11. A request the parser rejects is logged once, with the version the client
    sent and the bytes it received.
"""

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
