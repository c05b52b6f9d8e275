#!/usr/bin/env bash
# bench/ws.sh — held WebSockets: memory per idle socket, broadcast throughput
# and publish->delivery latency, m0serve --realtime (a WSGI view approves,
# the C loop holds) beside uvicorn (--ws websockets) and Granian (--interface
# asgi --ws) serving the same broadcast endpoint as raw ASGI, same run.
#
# For each server a fresh server per measurement, pinned to SERVER_CPU
# (default 0), one worker:
#   m0serve ws_app:application --realtime --workers 1 --blocking-threads 2
#   .venv-bench/bin/python -m uvicorn --app-dir bench asgi_ws:app --workers 1
#       --loop uvloop --http httptools --ws websockets --no-access-log
#   .venv-bench/bin/granian --interface asgi --ws --workers 1 asgi_ws:app
#       (run from bench/)
# and bench/ws_clients.py pinned to CLIENT_CPU (default 1):
#   idle:      open IDLE sockets (10,000), worker VmRSS before/after;
#   broadcast: open SOCKETS sockets (1,000); EVENTS (20) events 200 ms apart
#              → publish->delivery p50/p99; then BURST events (2,000) as fast
#              as the server delivers them under a window of WINDOW events
#              in flight → messages/s delivered.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/ws.sh [options]

Options:
  --quick            2,000 idle sockets, 500 burst events
  --servers LIST     comma-separated subset/order of: m0serve,uvicorn,granian (default all)
  --markdown FILE    also write the results as a markdown report to FILE
  --log-dir DIR      keep server logs and the raw client JSON in DIR
  -h, --help         show this help

Environment:
  IDLE=10000 SOCKETS=1000 EVENTS=20 INTERVAL=0.2 BURST=2000 PER=32 WINDOW=256
  BLOCKING_THREADS=2       m0serve --blocking-threads
  SERVER_CPU=0 CLIENT_CPU=1 STARTUP_TIMEOUT=15 CLIENT_TIMEOUT=300 NOFILE=65536
  M0SERVE=./m0serve PYTHON=/usr/bin/python3 (runs the client)
  BENCH_VENV=.venv-bench   uvicorn, uvloop, httptools, websockets, granian (make bench-venv)
EOF
}

PROG=ws.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

IDLE=${IDLE:-10000}
SOCKETS=${SOCKETS:-1000}
EVENTS=${EVENTS:-20}
INTERVAL=${INTERVAL:-0.2}
BURST=${BURST:-2000}
PER=${PER:-32}
WINDOW=${WINDOW:-256}
BLOCKING_THREADS=${BLOCKING_THREADS:-2}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-15}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-300}
NOFILE=${NOFILE:-65536}
PYTHON=${PYTHON:-/usr/bin/python3}
SERVERS=m0serve,uvicorn,granian
MARKDOWN=""
LOG_DIR=""

while (($#)); do
    case $1 in
        --quick) IDLE=2000; BURST=500; SHIFT=1 ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done

check_uints IDLE SOCKETS EVENTS BURST PER WINDOW BLOCKING_THREADS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT CLIENT_TIMEOUT NOFILE
[[ $INTERVAL =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "INTERVAL must be a number"
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do case $s in m0serve|uvicorn|granian) ;; *) die "unknown server: $s" ;; esac; done

resolve_paths
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$PYTHON"

hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < NOFILE)); then ulimit -Hn "$NOFILE" 2>/dev/null || true; hard=$(ulimit -Hn); fi
if [[ $hard == unlimited ]] || ((hard >= NOFILE)); then ulimit -Sn "$NOFILE"; else ulimit -Sn "$hard"; fi
SOFT=$(ulimit -Sn)
FD_NOTE="ulimit -n: soft $SOFT, hard $(ulimit -Hn)"
if [[ $SOFT != unlimited ]] && ((SOFT < IDLE + 256)); then
    printf 'ws.sh: warning: ulimit -n is %s, too low for %s sockets\n' "$SOFT" "$IDLE" >&2
    FD_NOTE+=" (too low for $IDLE sockets)"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0ws.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

declare -A STATUS CMD CLIENTCMD NOTE RES
NOISY_RUNS=0

server_cmd() {   # server_cmd NAME PORT -> SCMD
    case $1 in
        m0serve)
            SCMD=("$M0SERVE" ws_app:application --app-dir bench --bind "127.0.0.1:$2" --realtime
                  --workers 1 --blocking-threads "$BLOCKING_THREADS" --max-connections $((IDLE + 1024))) ;;
        uvicorn)
            SCMD=("$BENCH_PY" -m uvicorn --app-dir bench asgi_ws:app --host 127.0.0.1 --port "$2"
                  --workers 1 --loop uvloop --http httptools --ws websockets --no-access-log
                  --log-level warning --backlog 4096) ;;
        granian)   # imports asgi_ws from its working directory
            local gran=$BENCH_VENV/bin/granian
            [[ $gran == /* ]] || gran=$REPO_ROOT/$gran
            SCMD=(env -C bench "$gran" --interface asgi --ws --workers 1
                  --host 127.0.0.1 --port "$2" --no-access-log --log-level warning --backlog 4096 asgi_ws:app) ;;
    esac
}

server_ready() {   # the peers' prerequisites
    case $1 in
        m0serve) [[ -x $M0SERVE ]] || { echo "missing: $M0SERVE (run make)"; return 1; } ;;
        uvicorn) "$BENCH_PY" -c 'import uvicorn, uvloop, httptools, websockets' 2>/dev/null ||
                     { echo "missing: uvicorn/uvloop/httptools/websockets in $BENCH_VENV (make bench-venv)"; return 1; } ;;
        granian) [[ -x $BENCH_VENV/bin/granian ]] || { echo "missing: granian in $BENCH_VENV (make bench-venv)"; return 1; } ;;
    esac
}

# The process whose RSS is measured: the server's only child (m0serve's and
# Granian's worker), else the server itself (uvicorn --workers 1).
worker_pid() {
    local kids
    mapfile -t kids < <(ps -o pid= --ppid "$SERVER_SID" 2>/dev/null | tr -d ' ')
    if ((${#kids[@]} == 1)) && [[ -n ${kids[0]} ]]; then printf '%s\n' "${kids[0]}"; else printf '%s\n' "$SERVER_SID"; fi
}

summarize() {   # JSON -> tab-separated fields
    "$PYTHON" - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = lambda v, fmt="%.2f": "-" if v is None else fmt % v
lat, thr = d.get("latency", {}), d.get("throughput", {})
notes = []
if d.get("errors"):
    notes.append("client: " + ", ".join("%s x%d" % kv for kv in sorted(d["errors"].items())))
for part in (lat, thr):
    if part.get("errors"):
        notes.append("; ".join(part["errors"]))
if thr and thr.get("delivered") != thr.get("expected"):
    notes.append("throughput delivered %s of %s" % (thr.get("delivered"), thr.get("expected")))
if lat and lat.get("deliveries") != lat.get("expected"):
    notes.append("latency delivered %s of %s" % (lat.get("deliveries"), lat.get("expected")))
print("\t".join([
    "%d/%d" % (d.get("opened", 0), d.get("requested", 0)),
    f((d.get("rss_before_kb") or 0) / 1024), f((d.get("rss_held_kb") or 0) / 1024),
    f(d.get("rss_per_socket_bytes"), "%d"), f(d.get("open_seconds")),
    f(lat.get("p50_ms")), f(lat.get("p99_ms")), f(lat.get("kernel_p50_ms")), f(lat.get("kernel_p99_ms")),
    f(thr.get("messages_per_s"), "%d"), f(thr.get("seconds")),
    f(thr.get("server_cpu_pct"), "%d"), f(thr.get("server_us_per_msg")),
    "; ".join(notes),
]))
PY
}

run_one() {   # run_one SERVER MODE(idle|broadcast)
    local name=$1 mode=$2 key="$1/$2" port base slog wp out rc=0 why cl_sid n
    NOTE[$key]=""
    printf '\n== %s, %s\n' "$name" "$mode"
    if ! why=$(server_ready "$name"); then STATUS[$key]=$why; printf '   skipped: %s\n' "$why"; return; fi
    port=$(free_port); base="http://127.0.0.1:$port"
    server_cmd "$name" "$port"
    CMD[$name]=$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")
    printf '$ %s\n' "${CMD[$name]}"
    slog=$TMP/$name-$mode.server.log
    start_server "$name" TERM "$SERVER_CPU" "$slog" "${SCMD[@]}"
    if ! wait_http "$base/ping" "$STARTUP_TIMEOUT"; then
        STATUS[$key]="failed to start"; tail -n 15 "$slog" | sed 's/^/   | /'; stop_server; return
    fi
    curl -s --max-time 5 -o /dev/null "$base/publish?n=1&seq=-1" || NOTE[$key]+="warm-up publish failed; "
    wp=$(worker_pid)
    out=$TMP/$name-$mode.client.json
    if [[ $mode == idle ]]; then n=$IDLE; else n=$SOCKETS; fi
    local ccmd=("$PYTHON" bench/ws_clients.py --port "$port" -n "$n" --rss-pid "$wp")
    if [[ $mode == broadcast ]]; then
        ccmd+=(--events "$EVENTS" --interval "$INTERVAL" --burst "$BURST" --per "$PER" --window "$WINDOW")
    fi
    if [[ $name == m0serve ]]; then ccmd+=(--health-path /health); fi
    CLIENTCMD[$key]=$(q taskset -c "$CLIENT_CPU" "${ccmd[@]}")
    printf '$ %s\n' "${CLIENTCMD[$key]}"
    noise_begin
    setsid timeout -k 5 "$CLIENT_TIMEOUT" taskset -c "$CLIENT_CPU" "${ccmd[@]}" >"$out" 2>"$TMP/$name-$mode.client.err" </dev/null &
    cl_sid=$!; track_session "$cl_sid" TERM
    wait "$cl_sid" || rc=$?
    untrack_session "$cl_sid"
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"
    if noisy; then NOTE[$key]+="noisy run: $(noise_desc "$SERVER_CPU" "$CLIENT_CPU"); "; NOISY_RUNS=$((NOISY_RUNS + 1)); fi
    if ((rc != 0)) || [[ ! -s $out ]]; then
        STATUS[$key]="client failed (exit $rc)"; tail -n 10 "$TMP/$name-$mode.client.err" | sed 's/^/   | /'
    else
        RES[$key]=$(summarize "$out"); STATUS[$key]=ok
        local f; IFS=$'\t' read -r -a f <<<"${RES[$key]}"
        printf '   opened %s in %s s; RSS %s -> %s MiB = %s B/socket' "${f[0]}" "${f[4]}" "${f[1]}" "${f[2]}" "${f[3]}"
        [[ $mode == idle ]] || printf '; latency p50 %s ms, p99 %s ms (kernel-rx %s / %s); broadcast %s msg/s over %s s (server CPU %s%%, %s us/msg)' \
            "${f[5]}" "${f[6]}" "${f[7]}" "${f[8]}" "${f[9]}" "${f[10]}" "${f[11]}" "${f[12]}"
        printf '\n'
        [[ -z ${f[13]:-} ]] || { NOTE[$key]+="${f[13]}; "; printf '   %s\n' "${f[13]}"; }
    fi
    if ! session_alive "$SERVER_SID"; then NOTE[$key]+="server died; "; tail -n 15 "$slog" | sed 's/^/   | /'; fi
    if grep -qiE 'traceback|too many open files' "$slog"; then
        NOTE[$key]+="server log: $(grep -iE 'traceback|too many open files' "$slog" | head -n 2 | tr '\n' ' ' | cut -c1-200); "
    fi
    stop_server
    [[ $STOP_HOW == clean ]] || NOTE[$key]+="did not exit on SIGTERM within 5 s; "
}

host_info
M0_VERSION=$(m0serve_version built)
PEERS=$("$BENCH_PY" -c 'import importlib.metadata as md, sys; print("uvicorn %s (uvloop %s, httptools %s, websockets %s), granian %s; Python %s" % (md.version("uvicorn"), md.version("uvloop"), md.version("httptools"), md.version("websockets"), md.version("granian"), sys.version.split()[0]))' 2>/dev/null || echo "peers: ?")
printf 'm0serve WebSocket benchmark\nhost: %s\nm0serve: %s\npeers: %s\n' "$HOST_INFO" "$M0_VERSION" "$PEERS"
printf 'topology: server on CPU %s (1 worker), client bench/ws_clients.py on CPU %s\n%s\n' "$SERVER_CPU" "$CLIENT_CPU" "$FD_NOTE"
background_load "$SERVER_CPU" "$CLIENT_CPU"

for s in "${ORDER[@]}"; do run_one "$s" idle; run_one "$s" broadcast; done

field() { local -a f; IFS=$'\t' read -r -a f <<<"${RES[$1]:-}"; printf '%s' "${f[$2]:--}"; }
KEYS=()
for s in "${ORDER[@]}"; do KEYS+=("$s/idle" "$s/broadcast"); done

printf '\n%-8s | %-13s %9s %9s %8s | %9s %5s %7s | %9s %9s %9s %9s\n' server "idle opened" "RSS0 MiB" "held MiB" "B/sock" \
    "msg/s" "srv%" "us/msg" "p50 ms" "p99 ms" "kp50 ms" "kp99 ms"
for s in "${ORDER[@]}"; do
    printf '%-8s | %-13s %9s %9s %8s | %9s %5s %7s | %9s %9s %9s %9s\n' "$s" \
        "$(field "$s/idle" 0)" "$(field "$s/idle" 1)" "$(field "$s/idle" 2)" "$(field "$s/idle" 3)" \
        "$(field "$s/broadcast" 9)" "$(field "$s/broadcast" 11)" "$(field "$s/broadcast" 12)" \
        "$(field "$s/broadcast" 5)" "$(field "$s/broadcast" 6)" "$(field "$s/broadcast" 7)" "$(field "$s/broadcast" 8)"
done
printf '(B/sock = (RSS held - RSS before) / opened with %s idle sockets; msg/s = frames delivered to %s sockets / seconds from the\n' "$IDLE" "$SOCKETS"
printf ' first publish to the last frame read, %s events under a window of %s; srv%%/us/msg = the server worker'"'"'s CPU share during that\n' "$BURST" "$WINDOW"
printf ' burst and its CPU time per message delivered; p50/p99 = read time - publish time over %s paced events\n' "$EVENTS"
printf ' x %s sockets; kp50/kp99 the same with the kernel receive timestamp (the fan-out without the client'"'"'s read lag).)\n' "$SOCKETS"

RATIO_LINES=()
for peer in uvicorn granian; do
    [[ " ${ORDER[*]} " == *" m0serve "* && " ${ORDER[*]} " == *" $peer "* ]] || continue
    RATIO_LINES+=("$peer / m0serve: bytes/socket $(ratio "$(field "$peer/idle" 3)" "$(field m0serve/idle 3)"); m0serve / $peer: msg/s $(ratio "$(field m0serve/broadcast 9)" "$(field "$peer/broadcast" 9)"); $peer / m0serve: CPU per message $(ratio "$(field "$peer/broadcast" 12)" "$(field m0serve/broadcast 12)"); $peer / m0serve: p99 $(ratio "$(field "$peer/broadcast" 6)" "$(field m0serve/broadcast 6)"), kernel-rx p99 $(ratio "$(field "$peer/broadcast" 8)" "$(field m0serve/broadcast 8)")")
done
if ((${#RATIO_LINES[@]})); then printf '\nratios (> 1: m0serve uses less / delivers more or sooner):\n'; printf '  %s\n' "${RATIO_LINES[@]}"; fi
((NOISY_RUNS == 0)) || printf '\nwarning: %s run(s) had other processes on the pinned cores\n' "$NOISY_RUNS"
print_notes "${KEYS[@]}"
printf '\ncommands (from %s; PORT/PID per run):\n' "$REPO_ROOT"
for s in "${ORDER[@]}"; do
    [[ -z ${CMD[$s]:-} ]] || printf '  %s:\n    server: %s\n    idle: %s\n    broadcast: %s\n' "$s" "${CMD[$s]}" \
        "${CLIENTCMD[$s/idle]:-}" "${CLIENTCMD[$s/broadcast]:-}"
done

# shellcheck disable=SC2016
markdown_report() {
    local s l
    md_header 'm0serve WebSocket benchmark: idle sockets and broadcast'
    printf -- '- topology: server pinned to CPU %s (1 worker), client `bench/ws_clients.py` pinned to CPU %s, 127.0.0.1; %s\n' "$SERVER_CPU" "$CLIENT_CPU" "$FD_NOTE"
    printf -- '- m0serve: %s; peers: %s\n' "$M0_VERSION" "$PEERS"
    printf -- '- background load: %s\n' "$BACKGROUND"
    ((NOISY_RUNS == 0)) || printf -- '- **%s run(s) had other processes on the pinned cores** (see the notes)\n' "$NOISY_RUNS"
    printf '\n| server | idle sockets opened | RSS before (MiB) | RSS held (MiB) | bytes/socket | broadcast msg/s (%s sockets) | server CPU %% | CPU µs/msg | p50 (ms) | p99 (ms) | kernel-rx p50 (ms) | kernel-rx p99 (ms) |\n' "$SOCKETS"
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
    for s in "${ORDER[@]}"; do
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" \
            "$(field "$s/idle" 0)" "$(field "$s/idle" 1)" "$(field "$s/idle" 2)" "$(field "$s/idle" 3)" \
            "$(field "$s/broadcast" 9)" "$(field "$s/broadcast" 11)" "$(field "$s/broadcast" 12)" \
            "$(field "$s/broadcast" 5)" "$(field "$s/broadcast" 6)" "$(field "$s/broadcast" 7)" "$(field "$s/broadcast" 8)"
    done
    printf '\nBytes/socket = (RSS held - RSS before) / opened, %s idle sockets, one worker. Broadcast: %s events to %s sockets, published in requests of %s while fewer than %s events are missing on the slowest socket; msg/s = frames delivered / (last frame read - first publish); server CPU %% and CPU µs/msg: the worker process'"'"'s CPU time during that burst (a share under 100%% means the single-threaded Python client, on its own core, set the pace; µs/msg does not depend on it). Latency: %s events %ss apart, read time (and kernel receive timestamp) minus the `time.time()` in the event.\n' \
        "$IDLE" "$BURST" "$SOCKETS" "$PER" "$WINDOW" "$EVENTS" "$INTERVAL"
    if ((${#RATIO_LINES[@]})); then printf '\n'; for l in "${RATIO_LINES[@]}"; do printf -- '- %s\n' "$l"; done; fi
    md_notes "${KEYS[@]}"
    printf '\nCommands (from the repository root, after `ulimit -n %s`):\n\n```sh\n' "$SOFT"
    for s in "${ORDER[@]}"; do
        [[ -z ${CMD[$s]:-} ]] || printf '# %s\n%s &\n%s\n%s\n' "$s" "${CMD[$s]}" "${CLIENTCMD[$s/idle]:-}" "${CLIENTCMD[$s/broadcast]:-}"
    done
    printf '```\n'
}
write_markdown markdown_report
