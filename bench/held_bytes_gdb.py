"""bench/held_bytes_gdb.py — heap bytes a running worker keeps per held
connection, counted allocation by allocation (a gdb Python script).

    gdb -p WORKER_PID -batch -x bench/held_bytes_gdb.py
    M0_SERVER_EXPR='...' gdb -p WORKER_PID -batch -x bench/held_bytes_gdb.py

Walks the worker's connection slots (M0_SERVER_EXPR, an expression for its
struct m0_server *; by default the server m0_serve_run runs, found on the
loop thread's stack), and for every
HELD slot adds up the glibc malloc chunk size (the size word before the
pointer, flag bits cleared) of what hangs off it: the job, the runner's state,
the hold, its outbox, the WebSocket state and the request-time buffers a hold
should have released. Prints the totals and the mean per held connection.

Compare with the worker's RSS per connection (bench/realtime.sh): the
difference is allocator fragmentation and the pages of the per-slot tables.
Fields the code no longer has are skipped (the layout is being reshaped), so
read the output's names, not just its sum. The worker is stopped while gdb
reads it (about a second per 10,000 connections).
"""

import os

import gdb

HELD = 5  # enum m0_conn_state: M0_CONN_HELD

inf = gdb.selected_inferior()


def chunk(ptr):
    p = int(ptr)
    if p == 0:
        return 0
    word = int.from_bytes(inf.read_memory(p - 8, 8).tobytes(), "little")
    return word & ~7


def get(value, *path):
    """value.a.b... or None when a field is gone."""
    try:
        for name in path:
            value = value[name]
        return value
    except gdb.error:
        return None


def find_server():
    """The struct m0_server * of the loop: M0_SERVER_EXPR, or the argument
    of m0_serve_run on some thread's stack (no process global holds it)."""
    expr = os.environ.get("M0_SERVER_EXPR")
    if expr:
        return gdb.parse_and_eval(expr)
    for thread in inf.threads():
        thread.switch()
        frame = gdb.newest_frame()
        while frame is not None:
            if frame.name() == "m0_serve_run":
                return frame.read_var("s")
            frame = frame.older()
    raise gdb.GdbError("m0_serve_run is on no thread's stack: set M0_SERVER_EXPR")


def main():
    server = find_server().dereference()
    n = int(server["nconns"])
    chunks = get(server, "chunks")
    if chunks is not None:
        # The slot table in chunks made on demand (conn.h): slot i is
        # chunks[i >> 12][i & 4095]; only the chunks made so far exist.
        shift = 12
        made = int(server["nchunks"])
        n = min(n, made << shift)

        def slot(i):
            return chunks[i >> shift][i & ((1 << shift) - 1)]
    else:
        conns = server["conns"]

        def slot(i):
            return conns[i]
    totals = {}
    held = ws_held = 0

    def add(name, v):
        totals[name] = totals.get(name, 0) + v

    fields = [
        ("job", ("job",)),
        ("job.rstate[0] (the WSGI runner's state)", ("job", "rstate", 0)),
        ("job.rstate[1] (the ASGI runner's state)", ("job", "rstate", 1)),
        ("job.req.arena (first block)", ("job", "req", "arena", "head")),
        ("job.head.lines", ("job", "head", "lines", "data")),
        ("job.resp.out", ("job", "resp", "out", "data")),
        ("job.ch.q", ("job", "ch", "q", "data")),
        ("job.ch.inq", ("job", "ch", "inq", "data")),
        ("conn.in", ("in", "data")),
        ("conn.out", ("out", "data")),
        ("conn.http.field", ("http", "field", "data")),
        ("conn.http.value", ("http", "value", "data")),
        ("job.http.field", ("job", "http", "field", "data")),
        ("job.http.value", ("job", "http", "value", "data")),
        ("hold (a WebSocket: struct m0_wshold)", ("hold",)),
        ("hold.outbox", ("hold", "outbox", "data")),
    ]
    # A WebSocket's hold is a struct m0_wshold (its struct m0_hold first).
    ws_ops = int(gdb.parse_and_eval("&m0_ws_hold_ops"))
    wshold = gdb.lookup_type("struct m0_wshold").pointer()
    ws_fields = [
        ("hold.req (a WebSocket's handshake snapshot)", ("req",)),
        ("hold.parser.msg (a WebSocket's message)", ("parser", "msg", "data")),
    ]
    for i in range(n):
        c = slot(i)
        if int(c["state"]) != HELD:
            continue
        held += 1
        hold = get(c, "hold")
        ws = None
        if hold is not None and int(hold) != 0 and int(hold.dereference()["ops"]) == ws_ops:
            ws_held += 1
            ws = hold.cast(wshold).dereference()
            for name, path in ws_fields:
                v = get(ws, *path)
                if v is not None and v.type.code == gdb.TYPE_CODE_PTR:
                    add(name, chunk(v))
        for name, path in fields:
            # Follow pointers only while they are set.
            v = c
            ok = True
            for step in path:
                if isinstance(step, str) and v.type.code == gdb.TYPE_CODE_PTR:
                    if int(v) == 0:
                        ok = False
                        break
                    v = v.dereference()
                v = get(v, step)
                if v is None:
                    ok = False
                    break
            if ok and v.type.code == gdb.TYPE_CODE_PTR:
                add(name, chunk(v))
    print("held connections: %d (%d WebSockets) of %d slots made; the slot itself: %d B each (not a malloc of its own)"
          % (held, ws_held, n, gdb.lookup_type("struct m0_conn").sizeof))
    for name, _ in fields + ws_fields:
        if name in totals:
            print("  %-42s %12d B  %8.1f B per held" % (name, totals[name], totals[name] / max(held, 1)))
    print("  %-42s %12d B  %8.1f B per held" % ("sum", sum(totals.values()), sum(totals.values()) / max(held, 1)))


main()
