"""A CPU-bound pure-Python WSGI view (bench/threads.sh): about MS ms of
arithmetic per request (?ms=MS, default 5), measured in the thread's own
CPU time, so two views on two cores each cost what one alone does when
they truly run in parallel."""

import time


def application(environ, start_response):
    ms = 5
    for part in environ.get("QUERY_STRING", "").split("&"):
        if part.startswith("ms="):
            ms = int(part[3:])
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x += i * i
    body = b"%d\n" % (x % 7)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
