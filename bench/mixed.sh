#!/usr/bin/env bash
# bench/mixed.sh — fast-route latency while slow requests hold handler threads.
#
# One worker process per server, pinned to SERVER_CPU (default 0):
#   m0serve --blocking-threads 8, gunicorn sync, gunicorn gthread --threads 8,
#   uWSGI --http-socket --processes 1 --threads 8
# all serving bench/mixed_app.py.  wrk (CLIENT_CPU, default 1) measures
# /fast twice: idle, and while bench/slow_load.py keeps 6 requests to
# /slow?s=1.5 in flight for the whole run.  A second section measures the
# cost of handing requests to m0serve's handler-thread pool (hello world,
# --blocking-threads 0 vs 1, 2, 8).
#
# See bench/README.md.  Run from anywhere.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/mixed.sh [options]

Options:
  --markdown FILE    also write the results as a markdown report to FILE
  --servers LIST     comma-separated subset/order of:
                     m0serve,gunicorn-sync,gunicorn-gthread,uwsgi (default: these), and the
                     peers of bench/peers.sh (uvicorn,granian,bjoern,fastwsgi,socketify,
                     pyruvate: POOL_THREADS threads where they have them)
  --duration SECS    wrk measurement seconds per run (default: $DURATION or 8)
  --no-handoff       skip the handoff-cost section
  --handoff-only     only the handoff-cost section
  --log-dir DIR      keep server logs, raw wrk output and slow-client summaries
  -h, --help         show this help

Environment:
  DURATION=8               wrk seconds per measurement (idle, loaded, handoff)
  WARMUP=1                 wrk warm-up seconds before the idle run (0 disables)
  CONNECTIONS=8            wrk connections for /fast
  POOL_THREADS=8           --blocking-threads / --threads for the pooled servers
  SLOW_CONCURRENCY=6       slow requests kept in flight during the loaded run
  SLOW_SECONDS=1.5         /slow?s= value
  HANDOFF_THREADS="0 1 2 8"  m0serve --blocking-threads values for the handoff section
  HANDOFF_CONNECTIONS=32   wrk connections for the handoff section
  SERVER_CPU=0 CLIENT_CPU=1 STARTUP_TIMEOUT=15
  BENCH_VENV=.venv-bench   venv with the PyPI peers (make bench-venv; requirements/bench.txt)
  M0SERVE=./m0serve GUNICORN=$BENCH_VENV/bin/gunicorn UWSGI=uwsgi WRK=wrk PYTHON=/usr/bin/python3
EOF
}

PROG=mixed.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-8}
WARMUP=${WARMUP:-1}
CONNECTIONS=${CONNECTIONS:-8}
POOL_THREADS=${POOL_THREADS:-8}
SLOW_CONCURRENCY=${SLOW_CONCURRENCY:-6}
SLOW_SECONDS=${SLOW_SECONDS:-1.5}
HANDOFF_THREADS=${HANDOFF_THREADS:-0 1 2 8}
HANDOFF_CONNECTIONS=${HANDOFF_CONNECTIONS:-32}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-15}
PYTHON=${PYTHON:-/usr/bin/python3}
UWSGI=${UWSGI:-uwsgi}
WRK=${WRK:-wrk}
SERVERS=m0serve,gunicorn-sync,gunicorn-gthread,uwsgi
MARKDOWN=""
LOG_DIR=""
DO_MIXED=1
DO_HANDOFF=1

while (($#)); do
    case $1 in
        --duration|--duration=*) take_value DURATION SECS "$@" ;;
        --no-handoff) DO_HANDOFF=0; SHIFT=1 ;;
        --handoff-only) DO_MIXED=0; SHIFT=1 ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done

check_uints DURATION WARMUP CONNECTIONS POOL_THREADS SLOW_CONCURRENCY HANDOFF_CONNECTIONS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT
((DURATION > 0)) || die "DURATION must be > 0"
[[ $SLOW_SECONDS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SLOW_SECONDS must be a number"
for b in $HANDOFF_THREADS; do [[ $b =~ ^[0-9]+$ ]] || die "HANDOFF_THREADS: not an integer: $b"; done

resolve_paths
GUNICORN=${GUNICORN:-$BENCH_VENV/bin/gunicorn}

cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$WRK" "$PYTHON"

# shellcheck source=bench/peers.sh
. "$SCRIPT_DIR/peers.sh"
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do
    case " m0serve gunicorn-sync gunicorn-gthread uwsgi $PEER_NAMES " in *" $s "*) ;; *) die "unknown server in --servers: $s" ;; esac
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0mixed.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

FAST_BODY="fast"

# ---------------------------------------------------------------------------
# Section 1: fast route, idle vs with slow requests in flight.
# ---------------------------------------------------------------------------
declare -A STATUS CMD NOTE I_RPS I_P50 I_P99 I_ERR I_REQ L_RPS L_P50 L_P99 L_ERR L_REQ SLOW

server_cmd() {   # server_cmd NAME PORT -> sets SCMD (array) and STOPSIG
    local name=$1 port=$2
    case $name in
        m0serve)
            SCMD=("$M0SERVE" mixed_app:application --app-dir bench --bind "127.0.0.1:$port"
                  --workers 1 --blocking-threads "$POOL_THREADS")
            STOPSIG=TERM ;;
        gunicorn-sync)
            SCMD=("$GUNICORN" --workers 1 --worker-class sync --bind "127.0.0.1:$port"
                  --chdir bench --log-level warning mixed_app:application)
            STOPSIG=INT ;;
        gunicorn-gthread)
            SCMD=("$GUNICORN" --workers 1 --worker-class gthread --threads "$POOL_THREADS"
                  --bind "127.0.0.1:$port" --chdir bench --log-level warning mixed_app:application)
            STOPSIG=INT ;;
        uwsgi)
            SCMD=("$UWSGI" --plugin python3 --http-socket "127.0.0.1:$port" --master --processes 1
                  --threads "$POOL_THREADS" --pythonpath bench --module mixed_app:application
                  --need-app --disable-logging --die-on-term)
            STOPSIG=INT ;;
        *)  # issue 29's peers (bench/peers.sh), with POOL_THREADS where they take threads
            peer_cmd "$name" mixed_app:application "$port" "$POOL_THREADS" ;;
    esac
}

server_missing() {
    case $1 in
        m0serve) [[ -x $M0SERVE ]] || { printf '%s not found or not executable (run make)' "$M0SERVE"; return 0; } ;;
        gunicorn-*) command -v "$GUNICORN" >/dev/null 2>&1 || { printf '%s not found (run make bench-venv)' "$GUNICORN"; return 0; } ;;
        uwsgi) command -v "$UWSGI" >/dev/null 2>&1 || { printf '%s not found' "$UWSGI"; return 0; } ;;
        *) peer_cmd "$1" mixed_app:application 1 || { printf '%s' "$PEER_WHY"; return 0; } ;;
    esac
    return 1
}

# record NAME PREFIX FILE: parse wrk output into I_* or L_*
record() {
    local name=$1 pre=$2 file=$3 line rps p50 p99 reqs errs detail
    if ! line=$(parse_wrk "$file"); then
        printf '   wrk printed no result; output:\n'; sed 's/^/   | /' "$file"
        NOTE[$name]+="$pre: wrk printed no result; "
        return 1
    fi
    IFS=$'\t' read -r rps p50 p99 reqs errs detail <<<"$line"
    declare -n R=${pre}_RPS P5=${pre}_P50 P9=${pre}_P99 E=${pre}_ERR N=${pre}_REQ
    R[$name]=$rps; P5[$name]=$p50; P9[$name]=$p99; E[$name]=$errs; N[$name]=$reqs
    [[ -z $detail ]] || NOTE[$name]+="$([[ $pre == I ]] && echo idle || echo loaded) $detail; "
    if [[ $reqs == 0 ]]; then
        NOTE[$name]+="$([[ $pre == I ]] && echo idle || echo loaded): wrk completed 0 requests in ${DURATION}s (no latency figures; wrk counts no error for a request still unanswered at the end); "
    fi
    printf '   %s req/s, p50 %s ms, p99 %s ms, %s requests, errors %s\n' "$rps" "$p50" "$p99" "$reqs" "$errs"
}

# check_noise NAME PHASE: after noise_end, print the server-core figures and
# note a run during which other processes used the server's core.
NOISY_RUNS=0
check_noise() {
    noise_line "$SERVER_CPU" "$CLIENT_CPU"
    if [[ $CLI_CORE_BUSY =~ ^[0-9]+$ ]] && ((CLI_CORE_BUSY >= 95)); then
        NOTE[$1]+="$2: client core $CLI_CORE_BUSY% busy, result may be client-bound; "
    fi
    if noisy; then
        NOTE[$1]+="$2 run noisy: $(noise_desc "$SERVER_CPU" "$CLIENT_CPU"); "
        NOISY_RUNS=$((NOISY_RUNS + 1))
        printf '   warning: noisy run (other processes on the pinned cores)\n' >&2
    fi
}

# fast_run NAME PHASE PREFIX BASE: one measured wrk run on BASE/fast (PHASE
# idle or loaded), recorded into PREFIX_*.
fast_run() {
    local name=$1 phase=$2 pre=$3 base=$4
    printf '   %-7s $ %s\n' "$phase:" "$(wrk_cmd 1 "$CONNECTIONS" "$DURATION" "$base/fast")"
    noise_begin
    run_wrk 1 "$CONNECTIONS" "$DURATION" "$base/fast" "$TMP/$name.$phase.txt" || NOTE[$name]+="$phase wrk exit status $?; "
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    record "$name" "$pre" "$TMP/$name.$phase.txt" || true
    check_noise "$name" "$phase"
}

mixed_one() {
    local name=$1 port base slog why slow_out slow_ready slow_sid i
    NOTE[$name]=""
    printf '\n== %s\n' "$name"
    if why=$(server_missing "$name"); then STATUS[$name]="missing: $why"; printf '   skipped: %s\n' "$why"; return; fi
    port=$(free_port); base="http://127.0.0.1:$port"
    server_cmd "$name" "$port"
    CMD[$name]=$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")
    printf '$ %s\n' "${CMD[$name]}"
    slog=$TMP/$name.server.log
    start_server "$name" "$STOPSIG" "$SERVER_CPU" "$slog" "${SCMD[@]}"
    if ! wait_http "$base/fast" "$STARTUP_TIMEOUT"; then
        STATUS[$name]="failed to start"
        printf '   failed to start; last lines of its log:\n'; tail -n 15 "$slog" | sed 's/^/   | /'
        stop_server; return
    fi
    [[ $(curl -s --max-time 3 "$base/fast") == "$FAST_BODY" ]] || NOTE[$name]+="unexpected /fast body; "
    curl -s --max-time 5 "$base/slow?s=0" | grep -q slept || NOTE[$name]+="/slow?s=0 probe failed; "

    if ((WARMUP > 0)); then run_wrk 1 "$CONNECTIONS" "$WARMUP" "$base/fast" "$TMP/$name.warmup.txt" || true; fi

    fast_run "$name" idle I "$base"

    # Loaded: slow requests in flight for the whole wrk run.
    slow_out=$TMP/$name.slow.json; slow_ready=$TMP/$name.slow.ready
    setsid taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "$base/slow?s=$SLOW_SECONDS" \
        -c "$SLOW_CONCURRENCY" --max-seconds $((DURATION + 60)) --out "$slow_out" --ready "$slow_ready" \
        >"$TMP/$name.slow.log" 2>&1 </dev/null &
    slow_sid=$!; track_session "$slow_sid" TERM
    for ((i = 0; i < 100; i++)); do [[ -e $slow_ready ]] && break; sleep 0.1; done
    [[ -e $slow_ready ]] || NOTE[$name]+="slow client: not all $SLOW_CONCURRENCY requests sent within 10 s; "
    sleep 0.2
    fast_run "$name" loaded L "$base"
    kill -s TERM "$slow_sid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do [[ -e $slow_out ]] && break; sleep 0.1; done
    stop_session "$slow_sid" TERM 2; untrack_session "$slow_sid"
    if [[ -e $slow_out ]]; then
        SLOW[$name]=$("$PYTHON" - "$slow_out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
errs = sum(d["errors"].values())
lat = d["latency_ms"]
s = "%d ok" % d["ok"]
if errs:
    s += ", %d err (%s)" % (errs, ", ".join("%s: %d" % kv for kv in d["errors"].items()))
if lat["p50"] is not None:
    s += ", p50 %.0f ms" % lat["p50"]
s += ", %d in flight at stop" % d["in_flight_at_stop"]
print(s)
PY
)
    else
        SLOW[$name]="no summary"
        NOTE[$name]+="slow client wrote no summary (log: $(tr '\n' ' ' <"$TMP/$name.slow.log" | cut -c1-200)); "
    fi
    printf '   slow client (%s x /slow?s=%s): %s\n' "$SLOW_CONCURRENCY" "$SLOW_SECONDS" "${SLOW[$name]}"

    session_alive "$SERVER_SID" || NOTE[$name]+="server died during the run; "
    STATUS[$name]=ok
    stop_server
    if [[ $STOP_HOW != clean ]]; then NOTE[$name]+="did not exit on SIG$STOPSIG within 5 s ($STOP_HOW); "; fi
}

# ---------------------------------------------------------------------------
# Section 2: handoff cost (hello world, m0serve --blocking-threads N).
# ---------------------------------------------------------------------------
declare -A H_RPS H_P50 H_P99 H_ERR H_CMD H_STATUS
handoff_one() {
    local bt=$1 port base slog line rps p50 p99 reqs errs detail
    printf '\n== m0serve --blocking-threads %s (hello world)\n' "$bt"
    if [[ ! -x $M0SERVE ]]; then H_STATUS[$bt]="missing"; printf '   skipped: %s not found\n' "$M0SERVE"; return; fi
    port=$(free_port); base="http://127.0.0.1:$port/"
    SCMD=("$M0SERVE" hello:application --app-dir bench --bind "127.0.0.1:$port" --workers 1 --blocking-threads "$bt")
    H_CMD[$bt]=$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")
    printf '$ %s\n' "${H_CMD[$bt]}"
    slog=$TMP/handoff-$bt.server.log
    start_server m0serve TERM "$SERVER_CPU" "$slog" "${SCMD[@]}"
    if ! wait_http "$base" "$STARTUP_TIMEOUT"; then
        H_STATUS[$bt]="failed to start"; printf '   failed to start\n'; tail -n 15 "$slog" | sed 's/^/   | /'
        stop_server; return
    fi
    if ((WARMUP > 0)); then run_wrk 1 "$HANDOFF_CONNECTIONS" "$WARMUP" "$base" "$TMP/handoff-$bt.warmup.txt" || true; fi
    printf '$ %s\n' "$(wrk_cmd 1 "$HANDOFF_CONNECTIONS" "$DURATION" "$base")"
    noise_begin
    run_wrk 1 "$HANDOFF_CONNECTIONS" "$DURATION" "$base" "$TMP/handoff-$bt.txt" || true
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    if line=$(parse_wrk "$TMP/handoff-$bt.txt"); then
        IFS=$'\t' read -r rps p50 p99 reqs errs detail <<<"$line"
        H_RPS[$bt]=$rps; H_P50[$bt]=$p50; H_P99[$bt]=$p99; H_ERR[$bt]=$errs; H_STATUS[$bt]=ok
        printf '   %s req/s, p50 %s ms, p99 %s ms, errors %s\n' "$rps" "$p50" "$p99" "$errs"
        noise_line "$SERVER_CPU" "$CLIENT_CPU"
        if noisy; then
            H_STATUS[$bt]="ok (noisy: $(noise_desc "$SERVER_CPU" "$CLIENT_CPU"))"; NOISY_RUNS=$((NOISY_RUNS + 1))
        elif [[ $CLI_CORE_BUSY =~ ^[0-9]+$ ]] && ((CLI_CORE_BUSY >= 95)); then
            H_STATUS[$bt]="ok (client core $CLI_CORE_BUSY% busy: may be client-bound)"
        fi
    else
        H_STATUS[$bt]="wrk failed"; sed 's/^/   | /' "$TMP/handoff-$bt.txt"
    fi
    session_alive "$SERVER_SID" || H_STATUS[$bt]+=" (server died)"
    stop_server
}

# ---------------------------------------------------------------------------
# Main.
# ---------------------------------------------------------------------------
host_info
M0_VERSION=$(m0serve_version built)
PEER_VERSIONS="$(ver "$GUNICORN" --version); uWSGI $(ver "$UWSGI" --version); $(ver "$WRK" -v)"
BENCH_VENV_VERSIONS=$(bench_venv_versions)
printf 'm0serve mixed fast/slow benchmark\nhost: %s\n' "$HOST_INFO"
printf 'm0serve: %s\n' "$M0_VERSION"
printf 'peers: %s\n' "$PEER_VERSIONS"
printf 'bench venv %s\n' "$BENCH_VENV_VERSIONS"
printf 'topology: servers on CPU %s (1 worker each), wrk and the slow client on CPU %s\n' "$SERVER_CPU" "$CLIENT_CPU"
background_load "$SERVER_CPU" "$CLIENT_CPU"

if ((DO_MIXED)); then
    for s in "${ORDER[@]}"; do mixed_one "$s"; done
fi
if ((DO_HANDOFF)); then
    for bt in $HANDOFF_THREADS; do handoff_one "$bt"; done
fi

# ---- report ---------------------------------------------------------------
pct_of_bt0() {
    local first=${HANDOFF_THREADS%% *}
    awk -v a="${H_RPS[$1]:-}" -v b="${H_RPS[$first]:-}" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.0f%%", 100 * a / b; else printf "n/a" }'
}
BT0=${HANDOFF_THREADS%% *}
SLOW_URL_DESC="$SLOW_CONCURRENCY x /slow?s=$SLOW_SECONDS in flight"

if ((DO_MIXED)); then
    printf '\n/fast with wrk -t1 -c%s -d%ss; "loaded" = %s during the whole wrk run\n' "$CONNECTIONS" "$DURATION" "$SLOW_URL_DESC"
    printf '%-17s | %8s %8s %8s %-14s | %8s %9s %9s %-14s | %s\n' server "idle r/s" "p50 ms" "p99 ms" errors \
        "load r/s" "p50 ms" "p99 ms" errors "p99 load/idle"
    for s in "${ORDER[@]}"; do
        if [[ ${STATUS[$s]:-} != ok ]]; then printf '%-17s | %s\n' "$s" "${STATUS[$s]:-not run}"; continue; fi
        printf '%-17s | %8s %8s %8s %-14s | %8s %9s %9s %-14s | %s\n' "$s" \
            "$(cell "${I_RPS[$s]:-}")" "$(cell "${I_P50[$s]:-}")" "$(cell "${I_P99[$s]:-}")" "$(cell "${I_ERR[$s]:-}")" \
            "$(cell "${L_RPS[$s]:-}")" "$(cell "${L_P50[$s]:-}")" "$(cell "${L_P99[$s]:-}")" "$(cell "${L_ERR[$s]:-}")" \
            "$(ratio "${L_P99[$s]:-}" "${I_P99[$s]:-}")"
    done
    printf '\nslow client during the loaded run (completed /slow requests):\n'
    for s in "${ORDER[@]}"; do [[ -z ${SLOW[$s]:-} ]] || printf '  %-17s %s\n' "$s" "${SLOW[$s]}"; done
    if [[ ${STATUS[m0serve]:-} == ok ]]; then
        printf '\nratios (m0serve / peer):\n'
        for p in "${ORDER[@]}"; do
            [[ $p != m0serve && ${STATUS[$p]:-} == ok ]] || continue
            printf '  %-17s loaded req/s %s, loaded p99 %s (lower is better for m0serve)\n' "m0/$p" \
                "$(ratio "${L_RPS[m0serve]:-}" "${L_RPS[$p]:-}")" "$(ratio "${L_P99[m0serve]:-}" "${L_P99[$p]:-}")"
        done
    fi
fi
if ((DO_HANDOFF)); then
    printf '\nhandoff cost: bench/hello.py on m0serve, wrk -t1 -c%s -d%ss\n' "$HANDOFF_CONNECTIONS" "$DURATION"
    printf '%-20s %8s %8s %8s %-8s %s\n' "--blocking-threads" "req/s" "p50 ms" "p99 ms" errors "% of bt=$BT0"
    for bt in $HANDOFF_THREADS; do
        if [[ ${H_STATUS[$bt]:-} != ok* ]]; then printf '%-20s %s\n' "$bt" "${H_STATUS[$bt]:-not run}"; continue; fi
        printf '%-20s %8s %8s %8s %-8s %-6s %s\n' "$bt" "${H_RPS[$bt]}" "${H_P50[$bt]}" "${H_P99[$bt]}" "${H_ERR[$bt]}" "$(pct_of_bt0 "$bt")" "${H_STATUS[$bt]#ok}"
    done
fi

if ((NOISY_RUNS)); then
    printf '\nwarning: %s measurement(s) had other processes on the pinned cores (see notes); re-run on a quiet machine\n' "$NOISY_RUNS"
fi
print_notes "${ORDER[@]}"

printf '\ncommands (run from %s):\n' "$REPO_ROOT"
if ((DO_MIXED)); then
    for s in "${ORDER[@]}"; do [[ -z ${CMD[$s]:-} ]] || printf '  %s: %s\n' "$s" "${CMD[$s]}"; done
    printf '  wrk:  %s\n' "$(wrk_cmd 1 "$CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/fast")"
    printf '  slow: %s\n' "$(q taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "http://127.0.0.1:PORT/slow?s=$SLOW_SECONDS" -c "$SLOW_CONCURRENCY" --out FILE)"
fi
if ((DO_HANDOFF)); then
    for bt in $HANDOFF_THREADS; do [[ -z ${H_CMD[$bt]:-} ]] || printf '  handoff bt=%s: %s\n' "$bt" "${H_CMD[$bt]}"; done
    printf '  wrk:  %s\n' "$(wrk_cmd 1 "$HANDOFF_CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/")"
fi
if [[ -n $LOG_DIR ]]; then printf '\nlogs and raw wrk output: %s\n' "$LOG_DIR"; fi

# shellcheck disable=SC2016  # backticks are markdown, not expansions
markdown_report() {
    local s p bt
    md_header 'm0serve mixed fast/slow benchmark'
    printf -- '- topology: every server 1 worker process, pinned to CPU %s; wrk and the slow client pinned to CPU %s; 127.0.0.1\n' "$SERVER_CPU" "$CLIENT_CPU"
    printf -- '- m0serve: %s; %s\n' "$M0_VERSION" "$PEER_VERSIONS"
    printf -- '- bench venv: %s\n' "$BENCH_VENV_VERSIONS"
    printf -- '- background load: %s\n' "$BACKGROUND"
    if ((NOISY_RUNS)); then
        printf -- '- **%s measurement(s) had other processes on the pinned cores** (see the notes and the noise column); re-run on a quiet machine\n' "$NOISY_RUNS"
    fi
    if ((DO_MIXED)); then
        printf '\n## /fast, idle vs. with %s\n\n' "$SLOW_URL_DESC"
        printf '`wrk -t1 -c%s -d%ss --latency` on `/fast` (after a %ss warm-up), first idle, then while `bench/slow_load.py` keeps %s requests to `/slow?s=%s` in flight (each of its %s threads re-issues as soon as its request finishes).\n\n' \
            "$CONNECTIONS" "$DURATION" "$WARMUP" "$SLOW_CONCURRENCY" "$SLOW_SECONDS" "$SLOW_CONCURRENCY"
        printf '| server | idle req/s | idle p50 ms | idle p99 ms | idle errors | loaded req/s | loaded p50 ms | loaded p99 ms | loaded errors | p99 loaded/idle | /slow completed while loaded |\n'
        printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n'
        for s in "${ORDER[@]}"; do
            if [[ ${STATUS[$s]:-} != ok ]]; then printf '| %s | %s |||||||||||\n' "$s" "${STATUS[$s]:-not run}"; continue; fi
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" \
                "$(cell "${I_RPS[$s]:-}")" "$(cell "${I_P50[$s]:-}")" "$(cell "${I_P99[$s]:-}")" "$(cell "${I_ERR[$s]:-}")" \
                "$(cell "${L_RPS[$s]:-}")" "$(cell "${L_P50[$s]:-}")" "$(cell "${L_P99[$s]:-}")" "$(cell "${L_ERR[$s]:-}")" \
                "$(ratio "${L_P99[$s]:-}" "${I_P99[$s]:-}")" "$(cell "${SLOW[$s]:-}")"
        done
        if [[ ${STATUS[m0serve]:-} == ok ]]; then
            printf '\n| ratio | loaded req/s | loaded p99 |\n|---|---:|---:|\n'
            for p in "${ORDER[@]}"; do
                [[ $p != m0serve && ${STATUS[$p]:-} == ok ]] || continue
                printf '| m0serve / %s | %s | %s |\n' "$p" "$(ratio "${L_RPS[m0serve]:-}" "${L_RPS[$p]:-}")" "$(ratio "${L_P99[m0serve]:-}" "${L_P99[$p]:-}")"
            done
        fi
    fi
    if ((DO_HANDOFF)); then
        printf '\n## Handoff cost (hello world)\n\n`bench/hello.py` on m0serve `--workers 1 --blocking-threads N`, `wrk -t1 -c%s -d%ss --latency`.\n\n' "$HANDOFF_CONNECTIONS" "$DURATION"
        printf '| --blocking-threads | req/s | p50 ms | p99 ms | errors | %% of --blocking-threads %s | noise |\n|---:|---:|---:|---:|---:|---:|---|\n' "$BT0"
        for bt in $HANDOFF_THREADS; do
            if [[ ${H_STATUS[$bt]:-} != ok* ]]; then printf '| %s | %s ||||||\n' "$bt" "${H_STATUS[$bt]:-not run}"; continue; fi
            printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$bt" "${H_RPS[$bt]}" "${H_P50[$bt]}" "${H_P99[$bt]}" "${H_ERR[$bt]}" "$(pct_of_bt0 "$bt")" "${H_STATUS[$bt]#ok}"
        done
    fi
    md_notes "${ORDER[@]}"
    printf '\nCommands (run from the repository root; PORT is a free port):\n\n```sh\n'
    if ((DO_MIXED)); then
        for s in "${ORDER[@]}"; do [[ -z ${CMD[$s]:-} ]] || printf '# %s\n%s &\n' "$s" "${CMD[$s]}"; done
        printf '# idle, then loaded:\n%s\n' "$(wrk_cmd 1 "$CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/fast")"
        printf '%s &\n%s\n' "$(q taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "http://127.0.0.1:PORT/slow?s=$SLOW_SECONDS" -c "$SLOW_CONCURRENCY" --out /tmp/slow.json)" \
            "$(wrk_cmd 1 "$CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/fast")"
    fi
    if ((DO_HANDOFF)); then
        for bt in $HANDOFF_THREADS; do [[ -z ${H_CMD[$bt]:-} ]] || printf '# handoff, --blocking-threads %s\n%s &\n' "$bt" "${H_CMD[$bt]}"; done
        printf '%s\n' "$(wrk_cmd 1 "$HANDOFF_CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/")"
    fi
    printf '```\n'
}
write_markdown markdown_report
