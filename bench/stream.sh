#!/usr/bin/env bash
# bench/stream.sh — streamed WSGI responses (issue 8): time to first byte and
# throughput of generator bodies, m0serve vs gunicorn gthread vs uWSGI threads.
#
# Every server runs bench/stream_app.py with one worker process pinned to
# SERVER_CPU; the clients run on CLIENT_CPU:
#
#   m0serve           default flags (elastic pool)
#   m0serve-before    M0SERVE_BEFORE, when set (commit d68fd40: bodies held
#                     back until 64 KB or the end of the generator)
#   gunicorn-gthread  --worker-class gthread --threads 8
#   uwsgi             --http-socket --processes 1 --threads 8
#
# Per server (a fresh one per round):
#   /mb   a generator yielding 1 MiB in 4 KiB blocks: time to first byte and
#         to the end (bench/stream_client.py ttfb, one request at a time), and
#         throughput (wrk -c8: responses/s and MiB/s)
#   /sse  a generator yielding an event every 100 ms (20 events): N streams at
#         once (8, the peers' thread count, and 32): time to the first event,
#         per-event lag, events/s (bench/stream_client.py sse)
#
# See bench/README.md.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/stream.sh [options]

Options:
  --servers LIST     comma-separated subset/order of:
                     m0serve,m0serve-before,gunicorn-gthread,uwsgi
                     (default: all; m0serve-before only with M0SERVE_BEFORE)
  --rounds N         repeat every server N times, round-robin; medians reported (default 1)
  --duration SECS    wrk seconds for the /mb throughput (default: $DURATION or 8)
  --markdown FILE    also write the results as a markdown report to FILE
  --log-dir DIR      keep server logs, wrk output and client JSON
  -h, --help         show this help

Environment:
  DURATION=8 WARMUP=2      wrk seconds / warm-up seconds (/mb)
  STREAM_CONNECTIONS=8     wrk connections for /mb
  MB_KB=1024 MB_BLOCK=4096 body size (KiB) and block size (bytes) of /mb
  TTFB_REQUESTS=50         sequential /mb requests for the time-to-first-byte figures
  SSE_STREAMS=8,32         concurrent SSE streams (one run per count)
  SSE_EVENTS=20 SSE_INTERVAL=0.1
  POOL_THREADS=8           gunicorn --threads / uWSGI --threads
  SERVER_CPU=0 CLIENT_CPU=1 STARTUP_TIMEOUT=20
  M0SERVE=./m0serve M0SERVE_BEFORE= BENCH_VENV=.venv-bench GUNICORN=$BENCH_VENV/bin/gunicorn
  UWSGI=uwsgi WRK=wrk PYTHON=/usr/bin/python3 (runs the client)
EOF
}

PROG=stream.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
STREAM_CONNECTIONS=${STREAM_CONNECTIONS:-8}
MB_KB=${MB_KB:-1024}
MB_BLOCK=${MB_BLOCK:-4096}
TTFB_REQUESTS=${TTFB_REQUESTS:-50}
SSE_STREAMS=${SSE_STREAMS:-8,32}
SSE_EVENTS=${SSE_EVENTS:-20}
SSE_INTERVAL=${SSE_INTERVAL:-0.1}
POOL_THREADS=${POOL_THREADS:-8}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-20}
PYTHON=${PYTHON:-/usr/bin/python3}
UWSGI=${UWSGI:-uwsgi}
WRK=${WRK:-wrk}
ROUNDS=1
SERVERS=""
MARKDOWN=""
LOG_DIR=""

while (($#)); do
    case $1 in
        --rounds|--rounds=*) take_value ROUNDS N "$@" ;;
        --duration|--duration=*) take_value DURATION SECS "$@" ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done
check_uints DURATION WARMUP STREAM_CONNECTIONS MB_KB MB_BLOCK TTFB_REQUESTS SSE_EVENTS POOL_THREADS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT ROUNDS
((DURATION > 0 && ROUNDS > 0 && SSE_EVENTS > 0 && TTFB_REQUESTS > 0)) || die "DURATION, --rounds, SSE_EVENTS and TTFB_REQUESTS must be > 0"
[[ $SSE_INTERVAL =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SSE_INTERVAL must be a number"
IFS=, read -r -a COUNTS <<<"$SSE_STREAMS"
for n in "${COUNTS[@]}"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "bad SSE stream count: $n"; done
if [[ -n ${M0SERVE_BEFORE:-} ]]; then M0SERVE_BEFORE=$(abs_from_invoke "$M0SERVE_BEFORE"); fi
if [[ -z $SERVERS ]]; then
    SERVERS=m0serve${M0SERVE_BEFORE:+,m0serve-before},gunicorn-gthread,uwsgi
fi
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do
    case $s in m0serve|m0serve-before|gunicorn-gthread|uwsgi) ;; *) die "unknown server in --servers: $s" ;; esac
done

resolve_paths
GUNICORN=${GUNICORN:-$BENCH_VENV/bin/gunicorn}
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$WRK" "$PYTHON"
while read -r v; do unset "$v"; done < <(compgen -e | grep '^M0_' || true)   # default flags

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0stream.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

MB_BYTES=$((MB_KB * 1024))
MB_PATH="/mb?kb=$MB_KB&block=$MB_BLOCK"
SSE_PATH="/sse?n=$SSE_EVENTS&interval=$SSE_INTERVAL"

server_cmd() {   # server_cmd NAME PORT -> SCMD, STOPSIG
    case $1 in
        m0serve) SCMD=("$M0SERVE" stream_app:application --app-dir bench --bind "127.0.0.1:$2" --workers 1); STOPSIG=TERM ;;
        m0serve-before) SCMD=("$M0SERVE_BEFORE" stream_app:application --app-dir bench --bind "127.0.0.1:$2" --workers 1); STOPSIG=TERM ;;
        gunicorn-gthread)
            SCMD=("$GUNICORN" --workers 1 --worker-class gthread --threads "$POOL_THREADS" --bind "127.0.0.1:$2"
                  --chdir bench --log-level warning stream_app:application); STOPSIG=INT ;;
        uwsgi)
            SCMD=("$UWSGI" --plugin python3 --http-socket "127.0.0.1:$2" --master --processes 1 --threads "$POOL_THREADS"
                  --pythonpath bench --module stream_app:application --need-app --disable-logging --die-on-term); STOPSIG=INT ;;
    esac
}
server_missing() {
    case $1 in
        m0serve) [[ -x $M0SERVE ]] || { printf '%s not found (run make)' "$M0SERVE"; return 0; } ;;
        m0serve-before) [[ -x ${M0SERVE_BEFORE:-} ]] || { printf 'M0SERVE_BEFORE not set or not executable'; return 0; } ;;
        gunicorn-gthread) command -v "$GUNICORN" >/dev/null 2>&1 || { printf '%s not found (run make bench-venv)' "$GUNICORN"; return 0; } ;;
        uwsgi) command -v "$UWSGI" >/dev/null 2>&1 || { printf '%s not found' "$UWSGI"; return 0; } ;;
    esac
    return 1
}

declare -A STATUS CMD NOTE
declare -A T_HEAD T_BODY T_TOTAL T_OK MB_RPS MB_P50 MB_P99 MB_ERR S_FIRST S_FIRST99 S_LAG S_LAG99 S_EPS S_DONE NOISE_N
NOISY_RUNS=0
note() { NOTE[$1]+="$2; "; }
after_noise() {   # after_noise NAME WHAT KEY
    if noisy; then
        NOISY_RUNS=$((NOISY_RUNS + 1)); NOISE_N[$3]=$((${NOISE_N[$3]:-0} + 1))
        note "$1" "$2 noisy: $(noise_desc "$SERVER_CPU" "$CLIENT_CPU")"
        printf '   warning: noisy measurement\n' >&2
    fi
}

# client NAME OUT ARGS...: the Python client pinned to CLIENT_CPU, bounded,
# inside a noise check; 0 when it printed JSON
client() {
    local name=$1 out=$2 rc=0; shift 2
    noise_begin
    timeout -k 5 300 taskset -c "$CLIENT_CPU" "$PYTHON" bench/stream_client.py "$@" >"$out" 2>"$out.err" || rc=$?
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    if ((rc != 0)) || [[ ! -s $out ]]; then
        note "$name" "client failed (exit $rc): $(tail -n 2 "$out.err" | tr '\n' ' ' | cut -c1-200)"
        return 1
    fi
}
jget() { "$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    v = d
    for part in k.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    print("-" if v is None else (json.dumps(v) if isinstance(v, dict) else v))' "$@"; }

run_server() {   # run_server NAME ROUND
    local name=$1 r=$2 key="$1#$2" port base slog why out n line
    printf '\n== %s (round %s)\n' "$name" "$r"
    if why=$(server_missing "$name"); then STATUS[$name]="missing: $why"; printf '   skipped: %s\n' "$why"; return; fi
    port=$(free_port); base="http://127.0.0.1:$port"
    server_cmd "$name" "$port"
    CMD[$name]=$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")
    printf '$ %s\n' "${CMD[$name]}"
    slog=$TMP/$name.$r.server.log
    start_server "$name" "$STOPSIG" "$SERVER_CPU" "$slog" "${SCMD[@]}"
    if ! wait_http "$base/ping" "$STARTUP_TIMEOUT"; then
        STATUS[$name]="failed to start"; printf '   failed to start; log:\n'; tail -n 15 "$slog" | sed 's/^/   | /'
        stop_server; return
    fi
    STATUS[$name]=ok

    # /mb: time to first byte, one request at a time.
    out=$TMP/$name.$r.ttfb.json
    if client "$name" "$out" ttfb --url "$base$MB_PATH" -n "$TTFB_REQUESTS" --expect-bytes "$MB_BYTES"; then
        read -r T_HEAD[$key] T_BODY[$key] T_TOTAL[$key] T_OK[$key] < <(jget "$out" ttfb_head_ms.p50 ttfb_body_ms.p50 total_ms.p50 ok | paste -sd' ')
        [[ $(jget "$out" errors) == "{}" ]] || note "$name" "round $r /mb errors: $(jget "$out" errors)"
        printf '   /mb one at a time: first byte %s ms, first body byte %s ms, whole 1 MiB %s ms (p50 of %s ok)\n' \
            "${T_HEAD[$key]}" "${T_BODY[$key]}" "${T_TOTAL[$key]}" "${T_OK[$key]}"
    fi
    after_noise "$name" "round $r /mb ttfb" "$key"

    # /mb: throughput.
    if ((WARMUP > 0)); then run_wrk 1 "$STREAM_CONNECTIONS" "$WARMUP" "$base$MB_PATH" "$TMP/$name.$r.warmup.txt" || true; fi
    measure_wrk "$STREAM_CONNECTIONS" "$DURATION" "$base$MB_PATH" "$TMP/$name.$r.mb.txt" || note "$name" "round $r: wrk printed no result"
    MB_RPS[$key]=$M_RPS; MB_P50[$key]=$M_P50; MB_P99[$key]=$M_P99; MB_ERR[$key]=$M_ERR
    [[ -z $M_DETAIL ]] || note "$name" "round $r /mb wrk: $M_DETAIL"
    printf '   /mb wrk -c%s: %s responses/s = %s MiB/s, p50 %s ms, p99 %s ms, errors %s\n' "$STREAM_CONNECTIONS" "$M_RPS" \
        "$(awk -v r="$M_RPS" -v kb="$MB_KB" 'BEGIN { printf "%.0f", r * kb / 1024 }')" "$M_P50" "$M_P99" "$M_ERR"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"
    if [[ -n $M_NOISE ]]; then NOISY_RUNS=$((NOISY_RUNS + 1)); NOISE_N[$key]=$((${NOISE_N[$key]:-0} + 1)); note "$name" "round $r /mb wrk noisy: $M_NOISE"; fi
    if ((M_CLIENT_BOUND)); then note "$name" "round $r /mb wrk: client core ${CLI_CORE_BUSY}% busy (may be client-bound)"; fi

    # /sse: N streams at once.
    for n in "${COUNTS[@]}"; do
        out=$TMP/$name.$r.sse$n.json
        if client "$name" "$out" sse --url "$base$SSE_PATH" -c "$n" --events "$SSE_EVENTS"; then
            IFS=$'\t' read -r S_FIRST[$key/$n] S_FIRST99[$key/$n] S_LAG[$key/$n] S_LAG99[$key/$n] S_EPS[$key/$n] S_DONE[$key/$n] < <(
                jget "$out" first_event_ms.p50 first_event_ms.p99 lag_ms.p50 lag_ms.p99 events_per_s complete | paste -sd $'\t')
            [[ $(jget "$out" errors) == "{}" ]] || note "$name" "round $r sse x$n errors: $(jget "$out" errors)"
            printf '   /sse x%s: first event p50 %s ms, p99 %s ms; lag p50 %s ms, p99 %s ms; %s events/s; %s/%s streams complete\n' "$n" \
                "${S_FIRST[$key/$n]}" "${S_FIRST99[$key/$n]}" "${S_LAG[$key/$n]}" "${S_LAG99[$key/$n]}" "${S_EPS[$key/$n]}" "${S_DONE[$key/$n]}" "$n"
        fi
        after_noise "$name" "round $r sse x$n" "$key"
    done
    printf '   worker threads at the end: %s\n' "$(thread_count "$(only_child_or_self "$SERVER_SID")")"
    session_alive "$SERVER_SID" || note "$name" "round $r: server died"
    stop_server
    [[ $STOP_HOW == clean ]] || note "$name" "round $r: did not exit on SIG$STOPSIG within 5 s ($STOP_HOW)"
}

# ---------------------------------------------------------------------------
host_info
M0_VERSION=$(m0serve_version built)
PEER_VERSIONS="$(ver "$GUNICORN" --version); uWSGI $(ver "$UWSGI" --version); $(ver "$WRK" -v)"
BENCH_VENV_VERSIONS=$(bench_venv_versions)
BEFORE_VERSION=""
if [[ -n ${M0SERVE_BEFORE:-} ]]; then
    BEFORE_VERSION="git $(git -C "$(dirname -- "$M0SERVE_BEFORE")" rev-parse --short HEAD 2>/dev/null || echo '?'), binary $M0SERVE_BEFORE"
fi
printf 'm0serve streaming benchmark (WSGI generators)\nhost: %s\nm0serve: %s\n' "$HOST_INFO" "$M0_VERSION"
[[ -z $BEFORE_VERSION ]] || printf 'm0serve-before: %s\n' "$BEFORE_VERSION"
printf 'peers: %s\nbench venv %s\n' "$PEER_VERSIONS" "$BENCH_VENV_VERSIONS"
printf 'topology: servers on CPU %s (1 worker), clients on CPU %s; %s round(s)\n' "$SERVER_CPU" "$CLIENT_CPU" "$ROUNDS"
background_load "$SERVER_CPU" "$CLIENT_CPU"

for ((r = 1; r <= ROUNDS; r++)); do
    for s in "${ORDER[@]}"; do run_server "$s" "$r"; done
done

# ---- report ---------------------------------------------------------------
vals() { local -n A=$1; local r; for ((r = 1; r <= ROUNDS; r++)); do printf '%s\n' "${A[$2#$r${3:-}]:--}"; done; }
med() { median $(vals "$@"); }
noisy_rounds() { local r n=0; for ((r = 1; r <= ROUNDS; r++)); do ((${NOISE_N[$1#$r]:-0} == 0)) || n=$((n + 1)); done; printf '%s/%s' "$n" "$ROUNDS"; }
mibs() { awk -v r="$1" -v kb="$MB_KB" 'BEGIN { if (r ~ /^[0-9.]+$/) printf "%.0f", r * kb / 1024; else printf "-" }'; }
MB_HEAD="| server | first byte ms | first body byte ms | whole body ms | responses/s (wrk -c$STREAM_CONNECTIONS) | MiB/s | p50 ms | p99 ms | errors | noisy rounds |"
MB_SEP='|---|---:|---:|---:|---:|---:|---:|---:|---|---|'
SSE_HEAD='| server | streams | first event p50 ms | first event p99 ms | lag p50 ms | lag p99 ms | events/s | complete streams |'
SSE_SEP='|---|---:|---:|---:|---:|---:|---:|---|'
mb_row() {
    local s=$1
    if [[ ${STATUS[$s]:-} != ok ]]; then printf '| %s | %s |||||||||\n' "$s" "${STATUS[$s]:-not run}"; return; fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$(med T_HEAD "$s")" "$(med T_BODY "$s")" "$(med T_TOTAL "$s")" \
        "$(med MB_RPS "$s")" "$(mibs "$(med MB_RPS "$s")")" "$(med MB_P50 "$s")" "$(med MB_P99 "$s")" \
        "$(vals MB_ERR "$s" | paste -sd';' | sed 's/;/; /g')" "$(noisy_rounds "$s")"
}
sse_row() {
    local s=$1 n=$2
    [[ ${STATUS[$s]:-} == ok ]] || return 0
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$n" "$(med S_FIRST "$s" "/$n")" "$(med S_FIRST99 "$s" "/$n")" \
        "$(med S_LAG "$s" "/$n")" "$(med S_LAG99 "$s" "/$n")" "$(med S_EPS "$s" "/$n")" \
        "$(vals S_DONE "$s" "/$n" | sed "s|\$|/$n|" | paste -sd';' | sed 's/;/, /g')"
}
printf '\n/mb: %s KiB in %s-byte blocks; first byte / body / whole = p50 of %s sequential requests; throughput with wrk -t1 -c%s -d%ss (medians of %s round(s))\n%s\n%s\n' \
    "$MB_KB" "$MB_BLOCK" "$TTFB_REQUESTS" "$STREAM_CONNECTIONS" "$DURATION" "$ROUNDS" "$MB_HEAD" "$MB_SEP"
for s in "${ORDER[@]}"; do mb_row "$s"; done
printf '\n/sse: %s events %ss apart per stream, N streams at once (medians of %s round(s))\n%s\n%s\n' "$SSE_EVENTS" "$SSE_INTERVAL" "$ROUNDS" "$SSE_HEAD" "$SSE_SEP"
for n in "${COUNTS[@]}"; do for s in "${ORDER[@]}"; do sse_row "$s" "$n"; done; done
if ((NOISY_RUNS)); then
    printf '\nwarning: %s measurement(s) had other processes on the pinned cores (see notes); re-run on a quiet machine\n' "$NOISY_RUNS"
fi
print_notes "${ORDER[@]}"
printf '\ncommands (run from %s; PORT is a free port):\n' "$REPO_ROOT"
for s in "${ORDER[@]}"; do [[ -z ${CMD[$s]:-} ]] || printf '  %s: %s\n' "$s" "${CMD[$s]}"; done
CLIENT_LINES=(
    "$(q taskset -c "$CLIENT_CPU" "$PYTHON" bench/stream_client.py ttfb --url "http://127.0.0.1:PORT$MB_PATH" -n "$TTFB_REQUESTS" --expect-bytes "$MB_BYTES")"
    "$(wrk_cmd 1 "$STREAM_CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT$MB_PATH")"
)
for n in "${COUNTS[@]}"; do
    CLIENT_LINES+=("$(q taskset -c "$CLIENT_CPU" "$PYTHON" bench/stream_client.py sse --url "http://127.0.0.1:PORT$SSE_PATH" -c "$n" --events "$SSE_EVENTS")")
done
for l in "${CLIENT_LINES[@]}"; do printf '  client: %s\n' "$l"; done
if [[ -n $LOG_DIR ]]; then printf '\nlogs, wrk output and client JSON: %s\n' "$LOG_DIR"; fi

# shellcheck disable=SC2016  # backticks are markdown, not expansions
markdown_report() {
    local s n l
    md_header 'm0serve streaming benchmark: WSGI generator bodies'
    printf -- '- m0serve: %s (default flags: elastic pool)\n' "$M0_VERSION"
    [[ -z $BEFORE_VERSION ]] || printf -- '- m0serve-before: %s\n' "$BEFORE_VERSION"
    printf -- '- peers: %s; gunicorn gthread and uWSGI with %s threads\n' "$PEER_VERSIONS" "$POOL_THREADS"
    printf -- '- bench venv: %s\n' "$BENCH_VENV_VERSIONS"
    printf -- '- topology: 1 worker pinned to CPU %s; clients pinned to CPU %s; 127.0.0.1; %s round(s), a fresh server per round; medians\n' "$SERVER_CPU" "$CLIENT_CPU" "$ROUNDS"
    printf -- '- background load: %s\n' "$BACKGROUND"
    if ((NOISY_RUNS)); then printf -- '- **%s measurement(s) had other processes on the pinned cores** (see the notes)\n' "$NOISY_RUNS"; fi
    printf '\n## A 1 MiB generator (`/mb`, %s-byte blocks)\n\nFirst byte, first body byte and whole body: p50 of %s sequential requests (`bench/stream_client.py ttfb`, `Connection: close`). Throughput: `wrk -t1 -c%s -d%ss`.\n\n%s\n%s\n' \
        "$MB_BLOCK" "$TTFB_REQUESTS" "$STREAM_CONNECTIONS" "$DURATION" "$MB_HEAD" "$MB_SEP"
    for s in "${ORDER[@]}"; do mb_row "$s"; done
    printf '\n## SSE by generator (`/sse`: %s events, %ss apart)\n\nN streams opened at once (`bench/stream_client.py sse`). First event = from the request to the first event; lag = receive time − the `time.time()` at which the generator yielded the event; events/s = events delivered / time to the last one.\n\n%s\n%s\n' \
        "$SSE_EVENTS" "$SSE_INTERVAL" "$SSE_HEAD" "$SSE_SEP"
    for n in "${COUNTS[@]}"; do for s in "${ORDER[@]}"; do sse_row "$s" "$n"; done; done
    md_notes "${ORDER[@]}"
    printf '\nCommands (run from the repository root; PORT is a free port):\n\n```sh\n'
    for s in "${ORDER[@]}"; do [[ -z ${CMD[$s]:-} ]] || printf '# %s\n%s &\n' "$s" "${CMD[$s]}"; done
    for l in "${CLIENT_LINES[@]}"; do printf '%s\n' "$l"; done
    printf '```\n'
}
write_markdown markdown_report
