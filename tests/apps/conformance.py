"""WSGI conformance app driven by tests/e2e.

Serve with ``m0serve conformance:application --app-dir tests/apps``.

Every route except the ones listed in RAW_ROUTES runs inside
``wsgiref.validate.validator``, so a server that breaks PEP 3333 (wrong
environ types, bad input object, not calling close(), ...) turns the
request into an error the tests can see.  Two routes bypass the validator
on purpose:

* ``/echo/read`` calls ``wsgi.input.read()`` without a size, which the
  validator forbids although servers commonly support it;
* ``/file`` returns the server's own ``wsgi.file_wrapper`` object; wrapped in
  the validator's iterator the server could no longer recognise it.

Routes (dispatch is on the first path segment):

  /                       200 "ok" (any method, body ignored)
  /environ[/...]          JSON of the str-valued environ keys plus wsgi.*
  /echo/MODE              echo the request body, read with MODE:
                          read | readn[?n=N] | readline | readlines | iter
  /ignore-body            200 without reading the request body
  /generator?n=N          body produced by a generator (no Content-Length)
  /write                  body sent via the write() callable, then returned
  /file?path=ABS          wsgi.file_wrapper over the file at ABS
  /error/before           raises before start_response            -> 500
  /error/after            raises after the first body chunk       -> abort
  /error/replace          start_response again with exc_info      -> 500
  /status?code=N          empty response with status N (e.g. 204, 304)
  /tracked, /closecount   iterable whose close() is counted; the count
  /pid[?s=SEC]            the worker pid, after an optional sleep
  /slow?s=SEC[&tag=T]     logs "conformance: slow start tag=T", sleeps
  /big?n=BYTES            BYTES bytes of pattern(), with Content-Length
"""

import json
import os
import sys
import time
from urllib.parse import parse_qs
from wsgiref.validate import validator

REASONS = {
    200: "OK",
    204: "No Content",
    304: "Not Modified",
    404: "Not Found",
    500: "Internal Server Error",
}
CHUNK = 64 * 1024
_BLOCK = bytes(range(256)) * (CHUNK // 256)
_closed = 0


def pattern(n):
    """The deterministic body of /big?n=N (the tests build the same)."""
    return (_BLOCK * (n // len(_BLOCK) + 1))[:n]


def _query(environ):
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _text(start_response, body, status="200 OK", ctype="text/plain"):
    if isinstance(body, str):
        body = body.encode("utf-8")
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]


def index(environ, start_response):
    return _text(start_response, "ok")


def environ_dump(environ, start_response):
    data = {k: v for k, v in environ.items() if isinstance(v, str)}
    data["wsgi.version"] = list(environ["wsgi.version"])
    for key in ("wsgi.multithread", "wsgi.multiprocess", "wsgi.run_once"):
        data[key] = environ[key]
    return _text(start_response, json.dumps(data), ctype="application/json")


def _read_all(inp, mode, environ):
    if mode == "read":
        return inp.read()
    if mode == "readn":
        size = int(_query(environ).get("n", "8192"))
        parts = []
        while True:
            chunk = inp.read(size)
            if not chunk:
                return b"".join(parts)
            assert len(chunk) <= size, "read(n) returned more than n bytes"
            parts.append(chunk)
    if mode == "readline":
        parts = []
        while True:
            line = inp.readline()
            if not line:
                return b"".join(parts)
            parts.append(line)
    if mode == "readlines":
        return b"".join(inp.readlines())
    if mode == "iter":
        return b"".join(inp)
    raise ValueError("unknown echo mode %r" % mode)


def echo(environ, start_response):
    mode = environ["PATH_INFO"].split("/")[2]
    body = _read_all(environ["wsgi.input"], mode, environ)
    return _text(start_response, body, ctype="application/octet-stream")


def ignore_body(environ, start_response):
    return _text(start_response, "ignored")


def generator(environ, start_response):
    count = int(_query(environ).get("n", "5"))
    start_response("200 OK", [("Content-Type", "text/plain")])
    for i in range(count):
        yield b"chunk-%d\n" % i


def write_callable(environ, start_response):
    write = start_response("200 OK", [("Content-Type", "text/plain")])
    write(b"written;")
    return [b"returned"]


def file_body(environ, start_response):
    path = _query(environ)["path"]
    size = os.path.getsize(path)
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(size))])
    return environ["wsgi.file_wrapper"](open(path, "rb"), 32768)


def error(environ, start_response):
    kind = environ["PATH_INFO"].split("/")[2]
    if kind == "before":
        raise RuntimeError("conformance: deliberate error before start_response")
    if kind == "after":
        return _fail_after_first_chunk(start_response)
    if kind == "replace":
        start_response("200 OK", [("Content-Type", "text/plain")])
        try:
            raise RuntimeError("conformance: deliberate error, replaced")
        except RuntimeError:
            start_response("500 Internal Server Error",
                           [("Content-Type", "text/plain"), ("Content-Length", "8")],
                           sys.exc_info())
        return [b"replaced"]
    raise ValueError("unknown error kind %r" % kind)


def _fail_after_first_chunk(start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    yield b"first chunk\n"
    raise RuntimeError("conformance: deliberate error after the first chunk")


def status(environ, start_response):
    code = int(_query(environ)["code"])
    line = "%d %s" % (code, REASONS.get(code, "Unknown"))
    if code in (204, 304):
        start_response(line, [("X-Status", str(code))])
        return []
    return _text(start_response, line, status=line)


class _Tracked:
    def __iter__(self):
        yield b"tracked"

    def close(self):
        global _closed
        _closed += 1


def tracked(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "7")])
    return _Tracked()


def closecount(environ, start_response):
    return _text(start_response, str(_closed))


def pid(environ, start_response):
    time.sleep(float(_query(environ).get("s", "0")))
    return _text(start_response, str(os.getpid()))


def slow(environ, start_response):
    query = _query(environ)
    seconds = float(query.get("s", "1.5"))
    # One write per line: print() writes text and newline separately, which
    # interleaves across handler threads.
    sys.stderr.write("conformance: slow start tag=%s\n" % query.get("tag", "-"))
    sys.stderr.flush()
    time.sleep(seconds)
    return _text(start_response, "slept %s" % seconds)


def big(environ, start_response):
    size = int(_query(environ)["n"])
    body = pattern(size)
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(size))])
    return [body[i:i + CHUNK] for i in range(0, size, CHUNK)]


def not_found(environ, start_response):
    return _text(start_response, "not found", status="404 Not Found")


ROUTES = {
    "": index,
    "environ": environ_dump,
    "echo": echo,
    "ignore-body": ignore_body,
    "generator": generator,
    "write": write_callable,
    "file": file_body,
    "error": error,
    "status": status,
    "tracked": tracked,
    "closecount": closecount,
    "pid": pid,
    "slow": slow,
    "big": big,
}
RAW_ROUTES = {"/echo/read", "/file"}
_VALIDATED = {name: validator(handler) for name, handler in ROUTES.items()}
_NOT_FOUND = validator(not_found)


def application(environ, start_response):
    path = environ.get("PATH_INFO") or "/"
    name = path.split("/")[1]
    if name not in ROUTES:
        return _NOT_FOUND(environ, start_response)
    if path in RAW_ROUTES:
        return ROUTES[name](environ, start_response)
    return _VALIDATED[name](environ, start_response)
