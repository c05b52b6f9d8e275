"""A WSGI application for the runner lifecycle tests (tests/e2e/test_runners.py).

  /hold-big?n=N&mark=P  an M0-Hold response whose iterable yields N blocks of
                        64 KiB (default 40: over the 1 MiB a hold's body is
                        held back) and, when closed, writes "closed" to P
  /big?n=N&mark=P       the same body without a hold (a plain stream)
  /pid                  the worker pid
"""

import os
from urllib.parse import parse_qs


class Blocks:
    """n blocks of 64 KiB; close() leaves its mark (PEP 3333: always called)."""

    def __init__(self, n, mark):
        self.n = n
        self.mark = mark

    def __iter__(self):
        for _ in range(self.n):
            yield b": " + b"x" * 65536 + b"\n\n"

    def close(self):
        if self.mark:
            with open(self.mark + ".tmp", "w") as f:
                f.write("closed")
            os.rename(self.mark + ".tmp", self.mark)


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path in ("/hold-big", "/big"):
        headers = [("Content-Type", "text/event-stream")]
        if path == "/hold-big":
            headers += [("M0-Hold", "stream"), ("M0-Channel", "big")]
        start_response("200 OK", headers)
        return Blocks(int(q.get("n", "40")), q.get("mark"))
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
