#!/usr/bin/env python3
"""bench/cpu_ab.py — two m0serve binaries compared by requests per server
CPU-second, in alternating rounds (issue 30): on a machine other work shares,
raw req/s follows the load of the moment; the CPU the server itself spent on
the requests it answered does much less.

    M0SERVE_BEFORE=/path/old/m0serve M0SERVE=./m0serve bench/cpu_ab.py APP ROUNDS SECONDS [m0serve args...]
    bench/cpu_ab.py hello:application 12 3

Each round starts each binary with --workers 1 on CPU 0 (the bench venv as
VIRTUAL_ENV), warms it up for 1 s with wrk on CPU 1, reads the CPU ticks
(utime + stime, /proc) of the server's processes, runs wrk -t1 -c32 for
SECONDS (/fast for a mixed app, else /), reads them again, stops the server.
Prints each round, the medians, and the median of the paired ratios."""
import os, re, signal, socket, subprocess, sys, time, statistics
app, rounds, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = sys.argv[4:]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bins = {"before": os.path.abspath(os.environ["M0SERVE_BEFORE"]),
        "after": os.path.abspath(os.environ.get("M0SERVE", os.path.join(ROOT, "m0serve")))}
env = dict(os.environ, VIRTUAL_ENV=os.path.abspath(os.environ.get("BENCH_VENV", os.path.join(ROOT, ".venv-bench"))))
for k in list(env):
    if k.startswith("M0_"): del env[k]
HZ = os.sysconf("SC_CLK_TCK")
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def tree(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [pid] + [int(x) for x in out]
def ticks(pids):
    t = 0
    for p in pids:
        try:
            f = open("/proc/%d/stat" % p).read().rsplit(")", 1)[1].split()
            t += int(f[11]) + int(f[12])
        except FileNotFoundError:
            pass
    return t
res = {k: [] for k in bins}
for r in range(rounds):
    for name, b in bins.items():
        port = free_port()
        srv = subprocess.Popen(["taskset", "-c", "0", b, app, "--app-dir", os.path.join(ROOT, "bench"), "--bind", "127.0.0.1:%d" % port, "--workers", "1"] + extra,
                               env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close(); break
            except OSError:
                time.sleep(0.05)
        path = "/fast" if "mixed" in app else "/"
        subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c32", "-d1s", "http://127.0.0.1:%d%s" % (port, path)], capture_output=True)
        pids = tree(srv.pid)
        t0 = ticks(pids); w0 = time.time()
        out = subprocess.run(["taskset", "-c", "1", "wrk", "-t1", "-c32", "-d%ds" % secs, "http://127.0.0.1:%d%s" % (port, path)], capture_output=True, text=True).stdout
        t1 = ticks(pids); w1 = time.time()
        n = int(re.search(r"(\d+) requests in", out).group(1))
        cpu = (t1 - t0) / HZ
        srv.send_signal(signal.SIGTERM); srv.wait(20)
        res[name].append((n / cpu, n / (w1 - w0), cpu / (w1 - w0)))
        print("%s round %d: %.0f req/server-CPU-s, %.0f req/s, server %.0f%% of a CPU" % (name, r + 1, n / cpu, n / (w1 - w0), 100 * cpu / (w1 - w0)), flush=True)
for name in bins:
    v = sorted(x[0] for x in res[name]); rs = sorted(x[1] for x in res[name])
    print("%s: req per server CPU-second median %.0f (range %.0f-%.0f, spread %.0f%%); req/s median %.0f" % (
        name, statistics.median(v), v[0], v[-1], 100 * (v[-1] - v[0]) / statistics.median(v), statistics.median(rs)))
b, a = statistics.median(x[0] for x in res["before"]), statistics.median(x[0] for x in res["after"])
print("after/before (per server CPU-second): %.3f" % (a / b))
pairs = sorted(res["after"][i][0] / res["before"][i][0] for i in range(rounds))
print("paired after/before per round: median %.3f (range %.3f-%.3f)" % (statistics.median(pairs), pairs[0], pairs[-1]))
