"""Regressions for what adversarial testing found: trailers never reach
environ, the head limit holds on the read that completes it, timeouts do
what they say, queued work of vanished clients is dropped, endless bodies
stop once enough is sent, SIGHUP twice in a row, response-line rules."""

import json
import re
import signal
import socket
import struct
import threading
import time

import pytest

from rawhttp import Conn, build_request, request


def environ(port, raw):
    with Conn(port) as conn:
        conn.send(raw)
        response = conn.read_response()
    assert response.status == 200, response
    return json.loads(response.body)


def test_chunked_trailers_are_not_merged_into_environ(start_server):
    server = start_server("edge_app:application")
    env = environ(server.port, b"POST /environ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"3\r\nabc\r\n0\r\nContent-Length: 999\r\nContent-Type: application/evil\r\n"
                  b"X-Forwarded-For: 6.6.6.6\r\nAuthorization: Bearer injected\r\n\r\n")
    assert env["CONTENT_LENGTH"] == "3"
    assert "CONTENT_TYPE" not in env
    assert "HTTP_X_FORWARDED_FOR" not in env and "HTTP_AUTHORIZATION" not in env


def test_absolute_form_authority_replaces_host(start_server):
    server = start_server("edge_app:application")
    env = environ(server.port, b"GET http://good.example/environ?x=1 HTTP/1.1\r\nHost: evil.example\r\n\r\n")
    assert env["HTTP_HOST"] == "good.example"
    assert env["PATH_INFO"] == "/environ" and env["QUERY_STRING"] == "x=1"


def test_head_limit_counts_the_read_that_completes_the_head(start_server):
    server = start_server("conformance:application")
    head = b"GET / HTTP/1.1\r\nHost: a\r\n" + b"".join(
        b"X-Big-%d: %s\r\n" % (i, b"v" * 16000) for i in range(25)) + b"\r\n"
    with Conn(server.port) as conn:
        conn.send_tolerant(head)
        assert conn.read_response().status == 431


def test_body_timeout_is_idle_not_total(start_server):
    server = start_server("conformance:application", "--body-timeout", "1")
    body = b"x" * 12
    with Conn(server.port, timeout=10) as conn:
        conn.send(b"POST /echo/read HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n")
        for i in range(6):               # 2.4 s in total, never idle for 1 s
            time.sleep(0.4)
            conn.send(body[2 * i:2 * i + 2])
        assert conn.read_response().body == body
    with Conn(server.port, timeout=10) as conn:
        conn.send(b"POST /echo/read HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\nxx")
        assert conn.read_response().status == 408    # stalled for over 1 s


def test_a_request_started_late_in_keepalive_gets_the_full_head_timeout(start_server):
    server = start_server("conformance:application", "--timeout-keep-alive", "1.5", "--header-timeout", "1.5")
    with Conn(server.port, timeout=10) as conn:
        assert conn.request("GET", "/").status == 200
        time.sleep(1.0)                  # most of the keep-alive time is gone
        conn.send(b"GET / HTTP/1.1\r\n")
        time.sleep(0.8)                  # the head takes longer than what was left
        conn.send(b"Host: a\r\n\r\n")
        assert conn.read_response().status == 200


def test_queued_requests_of_vanished_clients_are_not_run(start_server):
    server = start_server("conformance:application", "--blocking-threads", "1")
    busy = threading.Thread(target=request, args=(server.port, "GET", "/slow?s=1&tag=busy"), daemon=True)
    busy.start()
    assert server.stderr.wait_for(__import__("re").compile("slow start tag=busy"), 10)
    for i in range(20):                  # queue 20 x 0.2 s, then reset each client
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"GET /slow?s=0.2&tag=gone%d HTTP/1.1\r\nHost: a\r\n\r\n" % i)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    began = time.monotonic()
    assert request(server.port, "GET", "/", timeout=15).status == 200
    assert time.monotonic() - began < 2.5    # not 1 s + 20 x 0.2 s
    busy.join(10)
    assert "tag=gone" not in server.stderr.text()


def test_endless_bodies_stop_once_enough_is_sent(start_server):
    server = start_server("edge_app:application")
    assert request(server.port, "GET", "/endless-declared", timeout=5).body == b"xyxyx"
    head = request(server.port, "HEAD", "/endless", timeout=5)
    assert head.status == 200 and head.body == b""
    with Conn(server.port, timeout=5) as conn:     # and the connection is still usable
        assert conn.request("HEAD", "/endless").status == 200
        assert conn.request("GET", "/environ").status == 200


def test_response_line_and_connection_rules(start_server):
    server = start_server("edge_app:application")
    response = request(server.port, "GET", "/no-reason")
    assert (response.status, response.reason) == (200, "OK")
    with Conn(server.port, timeout=5) as conn:
        assert conn.request("GET", "/connection-list").status == 200
        assert conn.wait_closed(2)
    assert request(server.port, "GET", "/informational").status == 500
    head = request(server.port, "HEAD", "/" + "a" * 9000)      # a C-generated error to HEAD
    assert head.status == 414 and head.body == b""


@pytest.mark.parametrize("status, raw", [
    (414, b"HEAD /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: a\r\n\r\n"),
    (431, b"HEAD / HTTP/1.1\r\nHost: a\r\nX-Big: " + b"x" * 20000 + b"\r\n\r\n"),
    (400, b"HEAD / HTTP/1.1\r\nHost: a\r\nX@Bad: b\r\n\r\n"),
    (400, b"HEAD / HTTP/1.1\r\n\r\n"),
    (408, b"HEAD / HTTP/1.1\r\nHost: a\r\n"),
], ids=["414", "431", "bad-field", "no-host", "408"])
def test_an_error_the_server_answers_to_head_has_no_content(start_server, status, raw):
    """RFC 9110 §9.3.2: a response to HEAD has no content, the server's own
    refusals too, whenever in the head they come. Read to the close, since
    a client that asked HEAD does not read a body (it would see none)."""
    server = start_server("edge_app:application", "--header-timeout", "0.5")
    with Conn(server.port, timeout=5) as conn:
        conn.send_tolerant(raw)
        assert conn.wait_closed(5)
        sent = bytes(conn.buf)
    assert sent.startswith(b"HTTP/1.1 %d " % status), sent[:200]
    assert b"\r\nContent-Length: " in sent and sent.endswith(b"\r\n\r\n"), sent


def test_two_sighups_with_a_request_in_flight_keep_a_worker(start_server):
    server = start_server("conformance:application", "--graceful-timeout", "10")
    slow = threading.Thread(target=request, args=(server.port, "GET", "/slow?s=3"), kwargs={"timeout": 20},
                            daemon=True)
    slow.start()
    assert server.stderr.wait_for(__import__("re").compile("slow start"), 10)
    server.signal(signal.SIGHUP)
    time.sleep(0.5)
    server.signal(signal.SIGHUP)
    slow.join(20)
    deadline = time.monotonic() + 10
    while True:                          # the old generations drain; one worker stays
        pids = server.worker_pids()
        if len(pids) == 1:
            break
        assert time.monotonic() < deadline, pids
        time.sleep(0.05)
    assert request(server.port, "GET", "/", timeout=10).status == 200


def test_a_second_sighup_boots_while_the_first_generation_still_drains(start_server):
    """Repeated SIGHUPs grow the master's table of workers: the third
    generation boots at once, while the first still drains its request —
    not once that request is done and a place in the table is free."""
    server = start_server("conformance:application", "--graceful-timeout", "20")
    done = threading.Event()

    def slow():
        request(server.port, "GET", "/slow?s=8&tag=draining", timeout=30)
        done.set()
    threading.Thread(target=slow, daemon=True).start()
    assert server.stderr.wait_for(re.compile("slow start tag=draining"), 10)
    booted = re.compile("SIGHUP: new workers booted")
    server.signal(signal.SIGHUP)
    assert server.stderr.wait_for(booted, 10)
    server.signal(signal.SIGHUP)
    deadline = time.monotonic() + 5
    while len(booted.findall(server.stderr.text())) < 2:
        assert time.monotonic() < deadline, server.stderr.text()
        time.sleep(0.05)
    assert not done.is_set()             # the first generation still drains it
    assert done.wait(20)
    assert request(server.port, "GET", "/", timeout=10).status == 200
