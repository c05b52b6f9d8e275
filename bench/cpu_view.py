"""A CPU-bound pure-Python WSGI view (bench/threads.sh): a fixed amount of
arithmetic per request (?n=N loop iterations, default 100000: about 5 ms on
the GIL build of 3.13 here), so the CPU a request costs compares builds, and
requests per second compare how many run at once."""


def application(environ, start_response):
    n = 100000
    for part in environ.get("QUERY_STRING", "").split("&"):
        if part.startswith("n="):
            n = int(part[2:])
    x = 0
    for i in range(n):
        x += i * i
    body = b"%d\n" % (x % 7)
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
