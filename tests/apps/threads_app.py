"""Views that show whether Python runs on two threads of one worker at once
(tests/e2e/test_threads.py).

/gil          sys._is_gil_enabled() inside the view, its thread and process
/barrier?n=N  meets N-1 other views at a threading.Barrier (timeout: 503); the
              request's X-* headers as the environ has them
/spin?n=N     arrives, then spins in pure Python (never releasing anything)
              until N views have arrived or 3 s pass: "met" or "alone". With
              a GIL and a switch interval longer than the spin, the second
              view cannot even start while the first spins; without it,
              both spin at once.
/cpu?ms=M     about M ms of pure-Python work (the benchmark's CPU-bound view)
/sleep?ms=M   sleeps M ms (a view that blocks its thread); with &mark=PATH it
              first writes its time.monotonic() to PATH; with &gate=PATH it
              ends as soon as PATH exists (M ms at most)
/publish?channel=C   publishes one event (m0pub.publish) and says its id
/stream?channel=C    an M0-Hold: stream on channel C
/stop-loop    stops the event loop that serves it, as a failure would while its
              worker serves: /dev/null takes the place of that loop's epoll
              descriptor (the one watching this connection), as in an
              application that clobbers descriptors it does not own; with
              &gate=PATH it first holds its loop until PATH exists (10 s at
              most: 503)
/publish-threads?n=N N threads, one after another, each publishing one
                     60 KB event and ending; the worker's RSS in KiB after

Every answer names the process, the thread and the event loop (--threads)
the view ran for (m0.loop_index()).
"""

import json
import os

import m0
import sys
import threading
import time

sys.setswitchinterval(60.0)

_lock = threading.Lock()
_barriers = {}
_arrived = [0]


def _barrier(n):
    with _lock:
        b = _barriers.get(n)
        if b is None or b.broken:
            b = _barriers[n] = threading.Barrier(n, timeout=10)
        return b


def _json(start_response, obj, status="200 OK"):
    body = json.dumps(obj).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def _arg(environ, name, default):
    for part in environ.get("QUERY_STRING", "").split("&"):
        k, _, v = part.partition("=")
        if k == name and v:
            return int(v)
    return default


def _clobber_epoll_of(server_port, remote_port):
    """/dev/null in place of the epoll descriptor that watches this process's
    TCP connection server_port <- remote_port (/proc: the connection's socket
    inode, its descriptor, the eventpoll whose fdinfo lists it)."""
    with open("/proc/self/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    inode = next(r[9] for r in rows if int(r[1].split(":")[1], 16) == server_port
                 and int(r[2].split(":")[1], 16) == remote_port)

    def links():
        for fd in os.listdir("/proc/self/fd"):
            try:
                yield int(fd), os.readlink("/proc/self/fd/" + fd)
            except OSError:
                pass
    conn = next(fd for fd, link in links() if link == "socket:[%s]" % inode)
    for fd, link in links():
        if link == "anon_inode:[eventpoll]":
            with open("/proc/self/fdinfo/%d" % fd) as f:
                if any(line.split()[:2] == ["tfd:", str(conn)] for line in f):
                    null = os.open("/dev/null", os.O_RDONLY)
                    os.dup2(null, fd)
                    os.close(null)
                    return
    raise RuntimeError("no epoll watches descriptor %d" % conn)


def app(environ, start_response):
    path = environ["PATH_INFO"]
    me = {"pid": os.getpid(), "thread": threading.get_ident(), "loop": m0.loop_index()}
    if path == "/gil":
        gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
        return _json(start_response, dict(me, gil_enabled=gil))
    if path == "/barrier":
        try:
            _barrier(_arg(environ, "n", 2)).wait()
        except threading.BrokenBarrierError:
            return _json(start_response, dict(me, met=False), "503 Service Unavailable")
        xs = {k: v for k, v in environ.items() if k.startswith("HTTP_X_")}
        return _json(start_response, dict(me, met=True, headers=xs))
    if path == "/spin":
        n = _arg(environ, "n", 2)
        with _lock:
            _arrived[0] += 1
        deadline = time.monotonic() + 3.0
        spins = 0
        while _arrived[0] < n and time.monotonic() < deadline:
            spins += 1
        return _json(start_response, dict(me, met=_arrived[0] >= n, spins=spins))
    if path == "/spin-reset":
        _arrived[0] = 0
        return _json(start_response, me)
    if path == "/cpu":
        end = time.thread_time() + _arg(environ, "ms", 5) / 1000.0
        x = 0
        while time.thread_time() < end:
            for i in range(200):
                x += i * i
        return _json(start_response, dict(me, x=x % 7))
    if path == "/sleep":
        mark = environ.get("QUERY_STRING", "").partition("mark=")[2].partition("&")[0]
        if mark:
            with open(mark, "w") as f:
                f.write(repr(time.monotonic()))
        gate = environ.get("QUERY_STRING", "").partition("gate=")[2].partition("&")[0]
        seconds = _arg(environ, "ms", 100) / 1000.0
        deadline = time.monotonic() + seconds
        if not gate:
            time.sleep(seconds)
        while gate and not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.005)
        return _json(start_response, me)
    if path == "/publish":
        import m0pub
        channel = environ.get("QUERY_STRING", "").partition("channel=")[2] or "c"
        return _json(start_response, dict(me, id=m0pub.publish(channel, "hello")))
    if path == "/publish-threads":
        import m0pub
        big = "x" * 60000
        for _ in range(_arg(environ, "n", 1)):
            t = threading.Thread(target=m0pub.publish, args=("threads", big))
            t.start()
            t.join()
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
        return _json(start_response, dict(me, rss_kib=rss))
    if path == "/stop-loop":
        gate = environ.get("QUERY_STRING", "").partition("gate=")[2].partition("&")[0]
        deadline = time.monotonic() + 10.0
        while gate and not os.path.exists(gate):
            if time.monotonic() > deadline:
                return _json(start_response, dict(me, gate="timeout"), "503 Service Unavailable")
            time.sleep(0.005)
        _clobber_epoll_of(int(environ["SERVER_PORT"]), int(environ["REMOTE_PORT"]))
        return _json(start_response, me)
    if path == "/stream":
        channel = environ.get("QUERY_STRING", "").partition("channel=")[2] or "c"
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"),
                                  ("M0-Channel", channel)])
        return [b": loop %d\n\n" % m0.loop_index()]
    return _json(start_response, me)
