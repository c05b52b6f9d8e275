"""Applications that misbehave the way careless code does (issue 7).

  /append-header        appends a CRLF-injecting header to the list after start_response
  /append-nontuple      appends a non-tuple to the list after start_response
  /header-injection?kind=crlf|lf|nul
                        start_response with a header value that would split
                        the response (CR LF, a bare LF, a NUL)
  /exit?code=N          sys.exit(N) inside the view
  /kbint                raises KeyboardInterrupt inside the view
  /exit-in-body         sys.exit() from inside the response generator
  /fork                 os.fork(); both processes return through the server
                        (body: the child's pid, from the parent)
  /fork-sleep?path=P    os.fork(); the child writes its pid to P and sleeps 30 s
  /write-then-file?path=P
                        write(b"abc"), then return wsgi.file_wrapper over P
  /write-flood?mb=N     N MiB through write() in 64 KiB pieces; logs
                        "fault: write raised" if write() raises (client gone)
  /hold-gated?gate=P&n=N[&entered=E]
                        an M0-Hold response whose generator body (N blocks
                        of 64 KiB, default 4) is produced once the file P exists;
                        the view writes the file E (when given) as it begins to wait
  /status-nonlatin      start_response with a status that is not latin-1
  /header-nonlatin      a header value that is not latin-1
  /pid                  the worker pid
  /crash-at-gate?gate=P the worker aborts (SIGABRT) once the file P exists

Gates are files the test creates: the view polls for them (bounded) so the
test decides when the view proceeds.
"""

import os
import sys
import time
from urllib.parse import parse_qs


def _q(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _wait_for(path, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError("gate %s never opened" % path)
        time.sleep(0.01)


def application(environ, start_response):
    path = environ["PATH_INFO"]
    q = _q(environ)
    if path == "/append-header":
        headers = [("Content-Type", "text/plain"), ("Content-Length", "2")]
        start_response("200 OK", headers)
        headers.append(("X-A", "v\r\nSet-Cookie: injected=1"))
        return [b"ok"]
    if path == "/append-nontuple":
        headers = [("Content-Type", "text/plain"), ("Content-Length", "2")]
        start_response("200 OK", headers)
        headers.append("not a tuple")
        return [b"ok"]
    if path == "/header-injection":
        value = {"crlf": "v\r\nSet-Cookie: injected=1", "lf": "v\nSet-Cookie: injected=1",
                 "nul": "v\x00Set-Cookie: injected=1"}[q["kind"]]
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-A", value), ("Content-Length", "2")])
        return [b"ok"]
    if path == "/crash-at-gate":
        _wait_for(q["gate"])
        os.abort()
    if path == "/exit":
        sys.exit(int(q.get("code", "0")))
    if path == "/kbint":
        raise KeyboardInterrupt
    if path == "/exit-in-body":
        start_response("200 OK", [("Content-Type", "text/plain")])

        def body():
            yield b"first"
            sys.exit(3)
        return body()
    if path == "/fork":
        pid = os.fork()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"child" if pid == 0 else str(pid).encode()]
    if path == "/fork-sleep":
        pid = os.fork()
        if pid == 0:
            with open(q["path"] + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(q["path"] + ".tmp", q["path"])
            time.sleep(30)
            os._exit(0)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(pid).encode()]
    if path == "/write-then-file":
        write = start_response("200 OK", [("Content-Type", "application/octet-stream")])
        write(b"abc")
        return environ["wsgi.file_wrapper"](open(q["path"], "rb"))
    if path == "/write-flood":
        write = start_response("200 OK", [("Content-Type", "application/octet-stream")])
        piece = b"w" * 65536
        try:
            for _ in range(int(q.get("mb", "100")) * 16):
                write(piece)
        except Exception as exc:     # the client left: write() must say so
            print("fault: write raised %s" % type(exc).__name__, file=sys.stderr, flush=True)
            raise
        return []
    if path == "/hold-gated":
        if "entered" in q:
            with open(q["entered"], "w") as f:
                f.write("in")
        _wait_for(q["gate"])
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"),
                                  ("M0-Channel", "gated")])
        return (b": " + b"x" * 65536 + b"\n\n" for _ in range(int(q.get("n", "4"))))
    if path == "/status-nonlatin":
        start_response("200 \u2713K", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    if path == "/header-nonlatin":
        start_response("200 OK", [("Content-Type", "text/plain"), ("X-Check", "\u2713"),
                                  ("Content-Length", "2")])
        return [b"ok"]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(os.getpid()).encode()]
