"""The interpreter's own speed, with no HTTP in the figure (bench/interp.sh):
the same pure-Python loop (bench/cpu_view.py's) and a JSON round trip, timed
inside the process that runs them.

As a WSGI app (m0serve interp:application): GET /?bench=loop|json&n=N runs
one and answers "<thread CPU seconds> <wall seconds>" for that call alone.
As a script (/usr/bin/python3 bench/interp.py loop|json N [once]): the same
call (after a warm-up call, as the server is warm, unless "once": callgrind
counts), the same answer. So m0serve linked either way and the
distribution's python3 run identical bytecode, and only the interpreter's
machine code differs.
"""
import json
import sys
import time

PAYLOAD = {
    "id": 12345, "name": "m0serve", "tags": ["wsgi", "asgi", "sse", "websocket"],
    "ratio": 0.625, "active": True, "owner": None,
    "items": [{"sku": "A-%d" % i, "qty": i, "price": i * 1.25} for i in range(20)],
}


def loop(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def json_roundtrip(n):
    out = None
    for _ in range(n):
        out = json.loads(json.dumps(PAYLOAD))
    return out


BENCHES = {"loop": loop, "json": json_roundtrip}


def timed(name, n):
    fn = BENCHES[name]
    c0, w0 = time.thread_time(), time.perf_counter()
    fn(n)
    c1, w1 = time.thread_time(), time.perf_counter()
    return "%.6f %.6f\n" % (c1 - c0, w1 - w0)


def application(environ, start_response):
    args = dict(p.split("=", 1) for p in environ.get("QUERY_STRING", "").split("&") if "=" in p)
    name = args.get("bench", "loop")
    if name not in BENCHES:
        start_response("400 Bad Request", [("Content-Type", "text/plain")])
        return [b"bench: loop or json\n"]
    body = timed(name, int(args.get("n", "1000000"))).encode()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


if __name__ == "__main__":
    if sys.argv[3:4] != ["once"]:
        timed(sys.argv[1], int(sys.argv[2]))
    sys.stdout.write(timed(sys.argv[1], int(sys.argv[2])))
