"""Streamed WSGI responses for the streaming tests (issue 8).

  /gated?gate=P&n=N        block "b1", then waits for the file P before each
                           further block ("b2".."bN"); no Content-Length
  /gated-sized?gate=P      Content-Length: 4, blocks "b1" then (after P) "b2"
  /threads?n=N&sleep=S     N blocks, each the ident of the thread producing it
                           on a line padded to 64 KiB (one block per hand-over)
  /big?mb=N                N MiB in 64 KiB blocks, no Content-Length
  /ticks?tag=T&every=S     a block every S seconds forever; close() logs
                           "stream: closed tag=T" to stderr
  /raise-mid               one block, then an exception
  /echo                    reads the body (100-continue: the app asks for it)
  /no-read                 answers 401 without reading the body
  /pid                     the worker pid
"""

import os
import sys
import threading
import time
from urllib.parse import parse_qs


def _q(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _wait_for(path, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError("gate %s never opened" % path)
        time.sleep(0.005)


class Ticks:
    """An endless iterable whose close() is observable."""

    def __init__(self, tag, every):
        self.tag, self.every, self.n = tag, every, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.n:
            time.sleep(self.every)
        self.n += 1
        return b"tick %d\n" % self.n

    def close(self):
        print("stream: closed tag=%s" % self.tag, file=sys.stderr, flush=True)


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = _q(environ)
    if path == "/gated":
        start_response("200 OK", [("Content-Type", "text/plain")])

        def body():
            yield b"b1"
            for i in range(2, int(q.get("n", "2")) + 1):
                _wait_for(q["gate"] + str(i))
                yield b"b%d" % i
        return body()
    if path == "/gated-sized":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])

        def sized():
            yield b"b1"
            _wait_for(q["gate"] + "2")
            yield b"b2"
        return sized()
    if path == "/threads":
        start_response("200 OK", [("Content-Type", "text/plain")])

        def idents():
            for _ in range(int(q.get("n", "20"))):
                time.sleep(float(q.get("sleep", "0.01")))
                yield (b"%d" % threading.get_ident()).ljust(65535) + b"\n"
        return idents()
    if path == "/big":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        block = b"z" * 65536
        return (block for _ in range(int(q.get("mb", "100")) * 16))
    if path == "/ticks":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return Ticks(q.get("tag", "-"), float(q.get("every", "0.2")))
    if path == "/raise-mid":
        start_response("200 OK", [("Content-Type", "text/plain")])

        def broken():
            yield b"first"
            raise RuntimeError("the generator broke mid-stream")
        return broken()
    if path == "/echo":
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "application/octet-stream"),
                                  ("Content-Length", str(len(body)))])
        return [body]
    if path == "/no-read":
        start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("Content-Length", "6")])
        return [b"denied"]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
