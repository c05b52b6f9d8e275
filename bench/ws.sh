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
#              in flight → messages/s delivered;
#   held N (--streams LIST, issue 20): build/bench/hold_client --proto ws holds
#              N sockets (over SOURCES 127.0.0.x source addresses), bytes per
#              idle socket, EVENTS paced events → publish->delivery p50/p99
#              (client and kernel), the worker's CPU per delivery, and with
#              --churn RATE the churn phase (RSS and descriptors after it).
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/ws.sh [options]

Options:
  --quick            2,000 idle sockets, 500 burst events
  --servers LIST     comma-separated subset/order of: m0serve,uvicorn,granian (default all)
  --streams LIST     also hold N sockets per count with the C client (e.g. 10000,100000)
  --churn RATE       with --streams: RATE disconnects and connects a second for
                     CHURN_SECONDS after the events (ABRUPT of them RSTs)
  --no-python        skip the idle/broadcast runs of bench/ws_clients.py
  --markdown FILE    also write the results as a markdown report to FILE
  --log-dir DIR      keep server logs and the raw client JSON in DIR
  -h, --help         show this help

Environment:
  IDLE=10000 SOCKETS=1000 EVENTS=20 INTERVAL=0.2 BURST=2000 PER=32 WINDOW=256
  BLOCKING_THREADS=2       m0serve --blocking-threads
  SERVER_CPU=0 CLIENT_CPU=1 STARTUP_TIMEOUT=15 CLIENT_TIMEOUT=300
  NOFILE=max(65536, N+4096) (a count the limit cannot hold runs capped at it - 512)
  CHURN_SECONDS=10 ABRUPT=0.5 SOURCES=8 BATCH=512   (the C client)
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
NOFILE=${NOFILE:-}
CHURN_SECONDS=${CHURN_SECONDS:-10}
ABRUPT=${ABRUPT:-0.5}
SOURCES=${SOURCES:-8}
BATCH=${BATCH:-512}
STREAMS=""
CHURN=0
PY_RUNS=1
PYTHON=${PYTHON:-/usr/bin/python3}
SERVERS=m0serve,uvicorn,granian
MARKDOWN=""
LOG_DIR=""

while (($#)); do
    case $1 in
        --quick) IDLE=2000; BURST=500; SHIFT=1 ;;
        --streams|--streams=*) take_value STREAMS "a LIST" "$@" ;;
        --churn|--churn=*) take_value CHURN "a RATE" "$@" ;;
        --no-python) PY_RUNS=0; SHIFT=1 ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done

check_uints IDLE SOCKETS EVENTS BURST PER WINDOW BLOCKING_THREADS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT CLIENT_TIMEOUT CHURN CHURN_SECONDS SOURCES BATCH
[[ -z $NOFILE ]] || check_uints NOFILE
[[ $ABRUPT =~ ^(0(\.[0-9]+)?|1(\.0*)?)$ ]] || die "ABRUPT must be a fraction between 0 and 1"
HELD=()
[[ -z $STREAMS ]] || IFS=, read -r -a HELD <<<"$STREAMS"
for n in "${HELD[@]}"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "bad --streams count: $n"; done
[[ $INTERVAL =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "INTERVAL must be a number"
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do case $s in m0serve|uvicorn|granian) ;; *) die "unknown server: $s" ;; esac; done

resolve_paths
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$PYTHON"

if ((${#HELD[@]})); then
    build_bench_tools || die "cannot build the C bench tools (bench/hold_client.c) with ${CC:-cc}"
fi
MAXN=$IDLE
for n in "${HELD[@]}"; do ((n > MAXN)) && MAXN=$n; done
if [[ -z $NOFILE ]]; then NOFILE=$((MAXN + 4096 > 65536 ? MAXN + 4096 : 65536)); fi
raise_nofile "$NOFILE"                                # the hard limit needs CAP_SYS_RESOURCE
FD_CAP=$([[ $SOFT == unlimited ]] && echo 1000000000 || echo $((SOFT - 512)))
if ((MAXN > FD_CAP)); then
    printf 'ws.sh: warning: ulimit -n is %s (hard %s; raising it needs CAP_SYS_RESOURCE): counts above %s sockets run capped at %s\n' \
        "$SOFT" "$HARD" "$FD_CAP" "$FD_CAP" >&2
    FD_NOTE+=" (too low for $MAXN sockets: capped at $FD_CAP)"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0ws.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

declare -A STATUS CMD CLIENTCMD NOTE RES
NOISY_RUNS=0

server_cmd() {   # server_cmd NAME PORT [N] -> SCMD
    local n=${3:-$IDLE}
    case $1 in
        m0serve)
            SCMD=("$M0SERVE" ws_app:application --app-dir bench --bind "127.0.0.1:$2" --realtime
                  --workers 1 --blocking-threads "$BLOCKING_THREADS" --max-connections $((n + 1024))) ;;
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

summarize_held() {   # hold_client JSON -> tab-separated fields
    "$PYTHON" - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
f = lambda v, fmt="%.2f": "-" if v is None else fmt % v
lat, klat = d.get("latency_ms", {}), d.get("kernel_latency_ms", {})
notes = []
if d.get("errors"):
    notes.append("client: " + ", ".join("%s x%d" % kv for kv in sorted(d["errors"].items())))
if d.get("publish", {}).get("errors"):
    notes.append("publish: " + "; ".join(d["publish"]["errors"]))
if d.get("streams_missing_events"):
    notes.append("%d sockets missed events" % d["streams_missing_events"])
ch = d.get("churn")
if ch:
    kb = lambda v: "-" if v is None else "%.1f" % (v / 1024.0)
    notes.append("churn %s/s for %ss: %s closed (%s RST), %s reopened, %s failed, %s open after; RSS %s -> %s MiB; worker fds %s -> %s" % (
        ch.get("rate"), ch.get("seconds"), ch.get("closed"), ch.get("closed_abrupt"), ch.get("reopened"), ch.get("failed"),
        ch.get("open_after"), kb(ch.get("rss_before_kb")), kb(ch.get("rss_after_kb")), ch.get("fds_before"), ch.get("fds_after")))
print("\t".join([
    "%d/%d" % (d.get("opened", 0), d.get("requested", 0)),
    f((d.get("rss_before_kb") or 0) / 1024), f((d.get("rss_held_kb") or 0) / 1024),
    f(d.get("rss_per_stream_bytes"), "%d"), f(d.get("open_seconds")),
    f(lat.get("p50")), f(lat.get("p99")), f(klat.get("p50")), f(klat.get("p99")),
    "%d/%d" % (d.get("deliveries", 0), d.get("deliveries_expected", 0)),
    f(d.get("cpu_us_per_delivery")),
    "; ".join(notes),
]))
PY
}

run_one() {   # run_one SERVER MODE(idle|broadcast|held-N)
    local name=$1 mode=$2 key="$1/$2" port base slog wp out rc=0 why cl_sid n
    NOTE[$key]=""
    printf '\n== %s, %s\n' "$name" "$mode"
    if ! why=$(server_ready "$name"); then STATUS[$key]=$why; printf '   skipped: %s\n' "$why"; return; fi
    case $mode in idle) n=$IDLE ;; broadcast) n=$SOCKETS ;; held-*) n=${mode#held-} ;; esac
    if ((n > FD_CAP)); then
        NOTE[$key]+="ulimit -n $SOFT: run with $FD_CAP of the $n sockets; "
        printf '   ulimit -n %s: capped at %s sockets\n' "$SOFT" "$FD_CAP"
        n=$FD_CAP
    fi
    port=$(free_port); base="http://127.0.0.1:$port"
    server_cmd "$name" "$port" "$n"
    CMD[$name]=$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")
    CMD[$key]=${CMD[$name]}
    printf '$ %s\n' "${CMD[$name]}"
    slog=$TMP/$name-$mode.server.log
    start_server "$name" TERM "$SERVER_CPU" "$slog" "${SCMD[@]}"
    if ! wait_http "$base/ping" "$STARTUP_TIMEOUT"; then
        STATUS[$key]="failed to start"; tail -n 15 "$slog" | sed 's/^/   | /'; stop_server; return
    fi
    curl -s --max-time 5 -o /dev/null "$base/publish?n=1&seq=-1" || NOTE[$key]+="warm-up publish failed; "
    wp=$(worker_pid)
    out=$TMP/$name-$mode.client.json
    local ccmd
    if [[ $mode == held-* ]]; then
        ccmd=("$HOLD_CLIENT" --proto ws --path /ws --port "$port" -n "$n" --rss-pid "$wp" --events "$EVENTS"
              --interval "$INTERVAL" --sources "$SOURCES" --batch "$BATCH")
        if ((CHURN > 0)); then ccmd+=(--churn "$CHURN" --churn-seconds "$CHURN_SECONDS" --abrupt "$ABRUPT"); fi
    else
        ccmd=("$PYTHON" bench/ws_clients.py --port "$port" -n "$n" --rss-pid "$wp")
        if [[ $mode == broadcast ]]; then
            ccmd+=(--events "$EVENTS" --interval "$INTERVAL" --burst "$BURST" --per "$PER" --window "$WINDOW")
        fi
    fi
    if [[ $name == m0serve ]]; then ccmd+=(--health-path /health); fi
    CLIENTCMD[$key]=$(q taskset -c "$CLIENT_CPU" "${ccmd[@]}")
    CLIENTCMD[$key]=${CLIENTCMD[$key]//$REPO_ROOT/\$PWD}
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
    elif [[ $mode == held-* ]]; then
        RES[$key]=$(summarize_held "$out"); STATUS[$key]=ok
        local f; IFS=$'\t' read -r -a f <<<"${RES[$key]}"
        printf '   opened %s in %s s; RSS %s -> %s MiB = %s B/socket; latency p50 %s ms, p99 %s ms (kernel-rx %s / %s); delivered %s; worker CPU %s us per delivery\n' \
            "${f[0]}" "${f[4]}" "${f[1]}" "${f[2]}" "${f[3]}" "${f[5]}" "${f[6]}" "${f[7]}" "${f[8]}" "${f[9]}" "${f[10]}"
        [[ -z ${f[11]:-} ]] || { NOTE[$key]+="${f[11]}; "; printf '   %s\n' "${f[11]}"; }
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

for s in "${ORDER[@]}"; do
    if ((PY_RUNS)); then run_one "$s" idle; run_one "$s" broadcast; fi
    for n in "${HELD[@]}"; do run_one "$s" "held-$n"; done
done

field() { local -a f; IFS=$'\t' read -r -a f <<<"${RES[$1]:-}"; printf '%s' "${f[$2]:--}"; }
KEYS=()
for s in "${ORDER[@]}"; do
    if ((PY_RUNS)); then KEYS+=("$s/idle" "$s/broadcast"); fi
    for n in "${HELD[@]}"; do KEYS+=("$s/held-$n"); done
done
if ((${#HELD[@]})); then
    printf '\nheld sockets (build/bench/hold_client --proto ws; %s paced events):\n' "$EVENTS"
    printf '%-8s %8s | %-13s %9s %9s %8s | %8s %8s %8s %8s | %-15s %7s\n' server sockets opened "RSS0 MiB" "held MiB" "B/sock" \
        "p50 ms" "p99 ms" "kp50 ms" "kp99 ms" delivered "cpu us"
    for s in "${ORDER[@]}"; do
        for n in "${HELD[@]}"; do
            k=$s/held-$n
            if [[ ${STATUS[$k]:-} != ok ]]; then printf '%-8s %8s %s\n' "$s" "$n" "${STATUS[$k]:-not run}"; continue; fi
            printf '%-8s %8s | %-13s %9s %9s %8s | %8s %8s %8s %8s | %-15s %7s\n' "$s" "$n" \
                "$(field "$k" 0)" "$(field "$k" 1)" "$(field "$k" 2)" "$(field "$k" 3)" "$(field "$k" 5)" "$(field "$k" 6)" \
                "$(field "$k" 7)" "$(field "$k" 8)" "$(field "$k" 9)" "$(field "$k" 10)"
        done
    done
    printf '(cpu us = the worker'"'"'s utime + stime over the events phase / deliveries; issue 20 target: <= 1024 B per idle socket.)\n'
fi

if ((PY_RUNS)); then
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
fi

RATIO_LINES=()
for peer in uvicorn granian; do
    ((PY_RUNS)) && [[ " ${ORDER[*]} " == *" m0serve "* && " ${ORDER[*]} " == *" $peer "* ]] || continue
    RATIO_LINES+=("$peer / m0serve: bytes/socket $(ratio "$(field "$peer/idle" 3)" "$(field m0serve/idle 3)"); m0serve / $peer: msg/s $(ratio "$(field m0serve/broadcast 9)" "$(field "$peer/broadcast" 9)"); $peer / m0serve: CPU per message $(ratio "$(field "$peer/broadcast" 12)" "$(field m0serve/broadcast 12)"); $peer / m0serve: p99 $(ratio "$(field "$peer/broadcast" 6)" "$(field m0serve/broadcast 6)"), kernel-rx p99 $(ratio "$(field "$peer/broadcast" 8)" "$(field m0serve/broadcast 8)")")
done
if ((${#RATIO_LINES[@]})); then printf '\nratios (> 1: m0serve uses less / delivers more or sooner):\n'; printf '  %s\n' "${RATIO_LINES[@]}"; fi
((NOISY_RUNS == 0)) || printf '\nwarning: %s run(s) had other processes on the pinned cores\n' "$NOISY_RUNS"
print_notes "${KEYS[@]}"
printf '\ncommands (from %s; PORT/PID per run):\n' "$REPO_ROOT"
for s in "${ORDER[@]}"; do
    [[ -z ${CMD[$s/idle]:-} ]] || printf '  %s:\n    server: %s\n    idle: %s\n    broadcast: %s\n' "$s" "${CMD[$s/idle]}" \
        "${CLIENTCMD[$s/idle]:-}" "${CLIENTCMD[$s/broadcast]:-}"
    for n in "${HELD[@]}"; do
        [[ -z ${CMD[$s/held-$n]:-} ]] || printf '    held %s: %s\n      client: %s\n' "$n" "${CMD[$s/held-$n]}" "${CLIENTCMD[$s/held-$n]}"
    done
done

# shellcheck disable=SC2016
markdown_report() {
    local s l
    md_header 'm0serve WebSocket benchmark: idle sockets and broadcast'
    printf -- '- topology: server pinned to CPU %s (1 worker), client `bench/ws_clients.py` pinned to CPU %s, 127.0.0.1; %s\n' "$SERVER_CPU" "$CLIENT_CPU" "$FD_NOTE"
    printf -- '- m0serve: %s; peers: %s\n' "$M0_VERSION" "$PEERS"
    printf -- '- background load: %s\n' "$BACKGROUND"
    ((NOISY_RUNS == 0)) || printf -- '- **%s run(s) had other processes on the pinned cores** (see the notes)\n' "$NOISY_RUNS"
    if ((PY_RUNS)); then
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
    fi
    if ((${#RATIO_LINES[@]})); then printf '\n'; for l in "${RATIO_LINES[@]}"; do printf -- '- %s\n' "$l"; done; fi
    if ((${#HELD[@]})); then
        printf '\nHeld sockets (`build/bench/hold_client --proto ws`, %s paced events; target <= 1024 B per idle socket):\n\n' "$EVENTS"
        printf '| server | sockets | opened | RSS before (MiB) | RSS held (MiB) | bytes/socket | p50 (ms) | p99 (ms) | kernel-rx p50 (ms) | kernel-rx p99 (ms) | delivered | worker CPU per delivery (µs) |\n'
        printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
        local n k
        for s in "${ORDER[@]}"; do
            for n in "${HELD[@]}"; do
                k=$s/held-$n
                printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$n" "$(field "$k" 0)" "$(field "$k" 1)" \
                    "$(field "$k" 2)" "$(field "$k" 3)" "$(field "$k" 5)" "$(field "$k" 6)" "$(field "$k" 7)" "$(field "$k" 8)" \
                    "$(field "$k" 9)" "$(field "$k" 10)"
            done
        done
    fi
    md_notes "${KEYS[@]}"
    printf '\nCommands (from the repository root, after `ulimit -n %s`):\n\n```sh\n' "$SOFT"
    for s in "${ORDER[@]}"; do
        [[ -z ${CMD[$s/idle]:-} ]] || printf '# %s\n%s &\n%s\n%s\n' "$s" "${CMD[$s/idle]}" "${CLIENTCMD[$s/idle]:-}" "${CLIENTCMD[$s/broadcast]:-}"
        for n in "${HELD[@]}"; do
            [[ -z ${CMD[$s/held-$n]:-} ]] || printf '# %s, %s held sockets\n%s &\n%s\n' "$s" "$n" "${CMD[$s/held-$n]}" "${CLIENTCMD[$s/held-$n]}"
        done
    done
    printf '```\n'
}
write_markdown markdown_report
