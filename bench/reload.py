#!/usr/bin/env python3
"""Reloads under load: does a SIGHUP lose requests? (issue 7, item 12)

Starts ./m0serve (bench/hello.py, --workers 2 by default), keeps CONNECTIONS
keep-alive connections busy from an asyncio client (each sends its next
request as soon as the previous answer arrives, reconnecting when the server
closes a connection after a Connection: close answer), sends SIGHUP every
INTERVAL seconds for DURATION seconds, and counts every request:

  ok       a complete 200 response;
  failed   anything else: the connection closed or reset before a complete
           response, a timeout, a non-200 status.

Then, when wrk is installed, the same under wrk -c CONNECTIONS, printing
wrk's socket-error line (wrk reuses connections the same way).

    bench/reload.py                      # 200 connections, 10 s, a reload every 2 s
    bench/reload.py --connections 50 --duration 5 --interval 1 --workers 4

Exit status 0 when no request failed (this is a measurement, not a test:
the suite's test_item12 checks the same with a smaller load).
"""

import argparse
import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"

# free_port is the suite's (tests/e2e/serverproc.py: standard library only),
# so this script still runs standalone from any directory.
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
from serverproc import free_port  # noqa: E402


async def one_response(reader):
    """(status, keep): one response read completely, or raises."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length, keep = 0, True
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
        elif name.lower() == "connection" and "close" in value.lower():
            keep = False
    await reader.readexactly(length)
    return status, keep


async def client(port, deadline, counts):
    reader = writer = None
    while time.monotonic() < deadline:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(REQUEST)
            status, keep = await asyncio.wait_for(one_response(reader), 10)
            counts["ok" if status == 200 else "failed"] += 1
            if not keep:
                writer.close()
                writer = None
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, IndexError):
            counts["failed"] += 1
            if writer is not None:
                writer.close()
            writer = None
    if writer is not None:
        writer.close()


async def drive(port, connections, duration, interval, master_pid):
    counts = {"ok": 0, "failed": 0}
    deadline = time.monotonic() + duration
    tasks = [asyncio.ensure_future(client(port, deadline, counts)) for _ in range(connections)]
    reloads = 0
    next_hup = time.monotonic() + interval
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        if time.monotonic() >= next_hup and time.monotonic() < deadline - interval / 2:
            os.kill(master_pid, signal.SIGHUP)
            reloads += 1
            next_hup += interval
    await asyncio.gather(*tasks)
    return counts, reloads


def start(args, port):
    cmd = [args.m0serve, "hello:application", "--app-dir", os.path.join(REPO, "bench"),
           "--bind", "127.0.0.1:%d" % port, "--workers", str(args.workers)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(REQUEST)
                if s.recv(12).startswith(b"HTTP/1.1 200"):
                    return proc, cmd
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("m0serve did not come up on port %d" % port)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between SIGHUPs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--m0serve", default=os.path.join(REPO, "m0serve"))
    args = ap.parse_args()

    port = free_port()
    proc, cmd = start(args, port)
    try:
        counts, reloads = asyncio.run(drive(port, args.connections, args.duration, args.interval, proc.pid))
    finally:
        stop(proc)
    total = counts["ok"] + counts["failed"]
    print("command: %s" % " ".join(cmd))
    print("asyncio client: %d connections, %.0f s, %d reload(s): %d failed / %d requests (%d ok)"
          % (args.connections, args.duration, reloads, counts["failed"], total, counts["ok"]))
    failed = counts["failed"]

    wrk = shutil.which("wrk")
    if wrk:
        port = free_port()
        proc, _ = start(args, port)
        try:
            run = subprocess.Popen([wrk, "-t2", "-c%d" % args.connections, "-d%ds" % int(args.duration),
                                    "http://127.0.0.1:%d/" % port], stdout=subprocess.PIPE, text=True)
            deadline = time.monotonic() + args.duration
            time.sleep(args.interval)
            hups = 0
            while time.monotonic() < deadline - args.interval / 2:
                proc.send_signal(signal.SIGHUP)
                hups += 1
                time.sleep(args.interval)
            out, _ = run.communicate(args.duration + 30)
        finally:
            stop(proc)
        total_m = re.search(r"(\d+) requests in", out)
        errors = re.search(r"Socket errors:.*", out)
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        print("wrk -c%d, %d reload(s): %s requests; %s; non-2xx: %s"
              % (args.connections, hups, total_m.group(1) if total_m else "?",
                 errors.group(0) if errors else "Socket errors: none", non2xx.group(1) if non2xx else 0))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
