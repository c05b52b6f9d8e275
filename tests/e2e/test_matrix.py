"""Topology matrix: workers {1,2} x blocking-threads {0,1,4} each pass a WSGI
conformance sweep and drain on SIGTERM with exit status 0."""

import json
import signal

import pytest

from rawhttp import Conn, build_request, chunked, request
from serverproc import REPO

FILE = REPO / "tests" / "cases" / "requests.tsv"


def conformance_sweep(port):
    assert request(port, "GET", "/").body == b"ok"
    head = request(port, "HEAD", "/big?n=5000")
    assert head.status == 200 and head.body == b"" and head.header("content-length") == "5000"
    body = bytes(range(256)) * 400
    assert request(port, "POST", "/echo/read", body=body).body == body
    with Conn(port) as conn:
        conn.send(build_request("POST", "/echo/iter", [("Transfer-Encoding", "chunked")], chunked(body)))
        assert conn.read_response().body == body
        # pipelining: three requests in one write, answered in order
        conn.send(b"".join(build_request("GET", "/environ?n=%d" % i) for i in range(3)))
        answers = [json.loads(conn.read_response().body)["QUERY_STRING"] for _ in range(3)]
        assert answers == ["n=0", "n=1", "n=2"]
    gen = request(port, "GET", "/generator?n=200")
    assert gen.status == 200 and len(gen.body) > 0
    assert request(port, "GET", "/write").status == 200
    assert request(port, "GET", "/file?path=%s" % FILE).body == FILE.read_bytes()
    assert request(port, "GET", "/error/before").status == 500
    assert request(port, "GET", "/status?code=204").body == b""


@pytest.mark.parametrize("threads", ["0", "1", "4"])
@pytest.mark.parametrize("workers", [1, 2])
def test_topology(start_server, workers, threads):
    server = start_server("conformance:application", "--blocking-threads", threads, workers=workers)
    assert "workers=%d blocking-threads=%s" % (workers, threads) in server.banner
    conformance_sweep(server.port)
    # SIGTERM with a request in flight: it completes, then exit 0.
    with Conn(server.port, timeout=15) as conn:
        conn.send(build_request("GET", "/slow?s=0.5&tag=drain"))
        assert server.stderr.wait_for(__import__("re").compile("slow start tag=drain"), 10)
        server.signal(signal.SIGTERM)
        response = conn.read_response()
        assert response.status == 200
    assert server.wait(15) == 0
