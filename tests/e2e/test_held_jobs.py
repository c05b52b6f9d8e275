"""A held connection keeps no job (issue 20): the request's job goes back to
the loop's cache when the hold begins, and a WebSocket whose messages go to
a view takes one for each message. The message's request still speaks for
the client the handshake spoke for."""

import json
import time

from rawhttp import request
from wsraw import RawWS

OP_TEXT = 0x1


def health(port):
    return json.loads(request(port, "GET", "/health").body)


def wait_websockets(port, n, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        got = health(port)["websockets"]
        if got == n or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_issue20_a_message_to_an_idle_socket_speaks_for_the_handshakes_client(start_server):
    # A trusted proxy names the client on the handshake; the requests made
    # meanwhile (from the proxy itself) name nobody, so a cached job still
    # carries 127.0.0.1 and http.
    server = start_server("realtime_app:application", "--realtime", "--forwarded-allow-ips", "127.0.0.1",
                          workers=1)
    ws = RawWS(server.port, "/wsclient", headers=[("X-Forwarded-For", "198.51.100.7"),
                                                  ("X-Forwarded-Proto", "https")])
    try:
        assert ws.status == 101
        assert wait_websockets(server.port, 1) == 1     # held: its job is back in the cache
        for i in range(3):
            # Other requests meanwhile take (and give back) the cached jobs.
            assert request(server.port, "GET", "/pid").status == 200
            ws.send(OP_TEXT, b"m%d" % i)
            assert ws.recv_data().payload == b"POST 198.51.100.7 https"
    finally:
        ws.close()
    assert wait_websockets(server.port, 0) == 0
