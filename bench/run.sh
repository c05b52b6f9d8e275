#!/usr/bin/env bash
# bench/run.sh — hello-world HTTP benchmark: m0serve vs uWSGI vs gunicorn vs nginx.
#
# Each server is started pinned to one core (SERVER_CPU, default 0), probed
# until it answers, warmed up, then loaded by wrk pinned to another core
# (CLIENT_CPU, default 1) with 1 thread and 32 keep-alive connections.
# Servers that are missing or fail to start are reported and skipped.
#
# See bench/README.md for details.  Run from anywhere; paths are resolved
# relative to the repository root.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/run.sh [options]

Options:
  --markdown FILE    also write the results as a markdown report to FILE
  --servers LIST     comma-separated subset/order of: m0serve,uwsgi,gunicorn,nginx, and
                     the peers of bench/peers.sh: m0serve-inline,uvicorn,granian,bjoern,
                     fastwsgi,socketify,pyruvate (default: the first four, in that order;
                     bench/wsgi_table.sh runs them all, on more apps)
  --duration SECS    wrk measurement duration (default: $DURATION or 10)
  --log-dir DIR      keep server logs and raw wrk output in DIR
  -h, --help         show this help

Environment:
  M0SERVE=./m0serve        m0serve binary (relative paths: invocation dir, else repo root)
  M0SERVE_ARGS=            extra m0serve options, appended (e.g. "--blocking-threads 0")
  DURATION=10              measurement seconds per server
  WARMUP=2                 warm-up seconds per server (0 disables)
  CONNECTIONS=32           wrk connections
  THREADS=1                wrk threads
  SERVER_CPU=0             core the server (and all its processes) is pinned to
  CLIENT_CPU=1             core wrk is pinned to
  STARTUP_TIMEOUT=15       seconds to wait for a server to answer
  PYTHON=/usr/bin/python3  interpreter used for helper one-liners
  BENCH_VENV=.venv-bench   venv with the PyPI peers (make bench-venv; requirements/bench.txt)
  GUNICORN=$BENCH_VENV/bin/gunicorn UWSGI=uwsgi NGINX=/usr/sbin/nginx WRK=wrk
  UWSGI_HTTP_OPT=--http-socket  uWSGI listener option; --http11-socket enables keep-alive
EOF
}

PROG=run.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-15}
PYTHON=${PYTHON:-/usr/bin/python3}
UWSGI=${UWSGI:-uwsgi}
NGINX=${NGINX:-/usr/sbin/nginx}
WRK=${WRK:-wrk}
UWSGI_HTTP_OPT=${UWSGI_HTTP_OPT:---http-socket}
SERVERS=m0serve,uwsgi,gunicorn,nginx
MARKDOWN=""
LOG_DIR=""

while (($#)); do
    case $1 in
        --duration|--duration=*) take_value DURATION SECS "$@" ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done

check_uints DURATION WARMUP CONNECTIONS THREADS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT
((DURATION > 0)) || die "DURATION must be > 0"
((CONNECTIONS >= THREADS && THREADS > 0)) || die "need CONNECTIONS >= THREADS > 0"

resolve_paths
GUNICORN=${GUNICORN:-$BENCH_VENV/bin/gunicorn}
cd -- "$REPO_ROOT"

check_setup taskset setsid timeout curl ps "$WRK" "$PYTHON"
((SERVER_CPU != CLIENT_CPU)) ||
    printf 'run.sh: warning: server and wrk share CPU %s; numbers will be lower\n' "$SERVER_CPU" >&2

# Every server is started (start_server, bench/common.sh) with setsid, so it
# leads a new session/process group that contains all of its forked
# masters/workers; stopping signals the whole group.  The EXIT trap stops
# wrk and the running server and removes TMP.
TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0bench.XXXXXX")
common_traps

# --------------------------------------------------------------------------
# Result bookkeeping.
# --------------------------------------------------------------------------
declare -A STATUS RPS P50 P99 ERRS KA NOTE CMD WRKCMD SCPU CCPU OCPU
EXPECTED_BODY="Hello, World!"

log_path() { printf '%s/%s.%s\n' "$TMP" "$1" "$2"; }

# Check the response once (status, body, content-type) and whether the
# server keeps the connection alive between two requests.
probe_response() {
    local name=$1 url=$2 hdr body conns
    hdr=$(log_path "$name" probe-headers); body=$(log_path "$name" probe-body)
    if ! curl -sS --max-time 3 -D "$hdr" -o "$body" "$url" 2>/dev/null; then
        NOTE[$name]+="probe request failed; "
        return
    fi
    head -n1 "$hdr" | grep -q ' 200' || NOTE[$name]+="status: $(head -n1 "$hdr" | tr -d '\r'); "
    [[ $(<"$body") == "$EXPECTED_BODY" ]] || NOTE[$name]+="unexpected body; "
    grep -qi '^content-type: *text/plain' "$hdr" || NOTE[$name]+="content-type not text/plain; "
    # Two requests on one curl handle: the second reports 0 new connects if reused.
    conns=$(curl -s --max-time 3 -o /dev/null -o /dev/null -w '%{num_connects}\n' "$url" "$url" 2>/dev/null | tr '\n' ' ') || true
    case $conns in
        "1 0 ") KA[$name]=yes ;;
        "1 1 ") KA[$name]=no
                NOTE[$name]+="closes the connection after every response (no keep-alive): every request includes a TCP connect; " ;;
        *) KA[$name]="?" ;;
    esac
}

# wrk_result FILE NAME: fill RPS/P50/P99/ERRS (latencies in ms, 3 decimals).
wrk_result() {
    local out rps p50 p99 errs detail
    out=$(parse_wrk "$1" 3 strict) || return 1
    IFS=$'\t' read -r rps p50 p99 _ errs detail <<<"$out"
    RPS[$2]=$rps; P50[$2]=$p50; P99[$2]=$p99; ERRS[$2]=$errs
    [[ -z ${detail:-} ]] || NOTE[$2]+="$detail; "
}

# measure SECONDS URL OUTFILE -> exit status of wrk (THREADS x CONNECTIONS)
measure() { run_wrk "$THREADS" "$CONNECTIONS" "$@"; }

# bench_one NAME STOPSIG -- CMD...   (CMD is run pinned to SERVER_CPU)
bench_one() {
    local name=$1 stopsig=$2 port=$3; shift 4
    local url="http://127.0.0.1:$port/" slog wout rc=0 snap0 snap1 ticks0 ticks1 t0 t1 irq
    slog=$(log_path "$name" server.log); wout=$(log_path "$name" wrk.txt)
    CMD[$name]=$(q taskset -c "$SERVER_CPU" "$@")
    WRKCMD[$name]=$(wrk_cmd "$THREADS" "$CONNECTIONS" "$DURATION" "$url")
    NOTE[$name]=""
    printf '\n== %s\n$ %s\n' "$name" "${CMD[$name]}"

    start_server "$name" "$stopsig" "$SERVER_CPU" "$slog" "$@"
    wait_http "$url" "$STARTUP_TIMEOUT" any || rc=$?
    if ((rc)); then
        if ((rc == 2)); then
            STATUS[$name]="failed to start (no answer within ${STARTUP_TIMEOUT}s)"
        else
            STATUS[$name]="failed to start (exited)"
        fi
        stop_server
        printf '   %s; last lines of its log:\n' "${STATUS[$name]}"
        tail -n 15 "$slog" | sed 's/^/   | /'
        return 0
    fi

    probe_response "$name" "$url"
    if ((WARMUP > 0)); then
        printf '   warm-up %ss...\n' "$WARMUP"
        measure "$WARMUP" "$url" "$(log_path "$name" warmup.txt)" || true
    fi
    printf '$ %s\n' "${WRKCMD[$name]}"
    snap0=$(cpu_snapshot); ticks0=$(session_ticks "$SERVER_SID"); t0=$(now_ms)
    if measure "$DURATION" "$url" "$wout" && wrk_result "$wout" "$name"; then
        snap1=$(cpu_snapshot); ticks1=$(session_ticks "$SERVER_SID"); t1=$(now_ms)
        SCPU[$name]=$(cpu_busy "$snap0" "$snap1" "$SERVER_CPU")
        CCPU[$name]=$(cpu_busy "$snap0" "$snap1" "$CLIENT_CPU")
        OCPU[$name]=$(awk -v a="$ticks0" -v b="$ticks1" -v hz="$CLK_TCK" -v ms=$((t1 - t0)) \
            'BEGIN { if (ms > 0 && hz > 0) printf "%.0f", 100 * (b - a) / hz / (ms / 1000); else printf "?" }')
        STATUS[$name]=ok
        printf '   %s req/s, p50 %s ms, p99 %s ms; server processes %s%% CPU; busy: CPU %s %s%%, CPU %s %s%%\n' \
            "${RPS[$name]}" "${P50[$name]}" "${P99[$name]}" "${OCPU[$name]}" \
            "$SERVER_CPU" "${SCPU[$name]}" "$CLIENT_CPU" "${CCPU[$name]}"
        if [[ ${CCPU[$name]} =~ ^[0-9]+$ ]] && ((CCPU[$name] >= 95)); then
            NOTE[$name]+="wrk core was ${CCPU[$name]}% busy: result may be client-bound; "
        fi
        irq=$(cpu_busy "$snap0" "$snap1" "$SERVER_CPU" irq)
        if [[ ${SCPU[$name]} =~ ^[0-9]+$ && ${OCPU[$name]} =~ ^[0-9]+$ && $irq =~ ^[0-9]+$ ]] &&
            ((SCPU[$name] - irq - OCPU[$name] >= 10)); then
            NOTE[$name]+="other processes used ~$((SCPU[$name] - irq - OCPU[$name]))% of CPU $SERVER_CPU during the run (noisy); "
        fi
    else
        STATUS[$name]="wrk failed"
        printf '   wrk failed; output:\n'
        sed 's/^/   | /' "$wout"
    fi
    session_alive "$SERVER_SID" || NOTE[$name]+="server died during the run; "

    stop_server
    if [[ $STOP_HOW != clean ]]; then NOTE[$name]+="did not exit on SIG$stopsig within 5s ($STOP_HOW); "; fi
}

# --------------------------------------------------------------------------
# Per-server launchers.
# --------------------------------------------------------------------------
skip() { STATUS[$1]="missing: $2"; NOTE[$1]=""; printf '\n== %s\n   skipped: %s\n' "$1" "$2"; }

run_m0serve() {
    local port
    if [[ ! -e $M0SERVE ]]; then skip m0serve "$M0SERVE not found (not built yet?)"; return; fi
    if [[ ! -x $M0SERVE ]]; then skip m0serve "$M0SERVE is not executable"; return; fi
    port=$(free_port)
    local extra=()
    if [[ -n ${M0SERVE_ARGS:-} ]]; then read -r -a extra <<<"$M0SERVE_ARGS"; fi
    bench_one m0serve TERM "$port" -- \
        "$M0SERVE" hello:application --app-dir bench --bind "127.0.0.1:$port" --workers 1 "${extra[@]}"
}

run_uwsgi() {
    local port
    command -v "$UWSGI" >/dev/null 2>&1 || { skip uwsgi "$UWSGI not found"; return; }
    port=$(free_port)
    # SIGINT is uWSGI's "kill the whole stack" signal; --die-on-term makes
    # SIGTERM (used by the cleanup path as well) do the same.
    bench_one uwsgi INT "$port" -- \
        "$UWSGI" --plugin python3 "$UWSGI_HTTP_OPT" "127.0.0.1:$port" \
        --master --processes 1 --pythonpath bench --module hello:application \
        --need-app --disable-logging --die-on-term
}

run_gunicorn() {
    local port
    command -v "$GUNICORN" >/dev/null 2>&1 || { skip gunicorn "$GUNICORN not found (run make bench-venv)"; return; }
    port=$(free_port)
    # SIGINT = quick shutdown for gunicorn.
    bench_one gunicorn INT "$port" -- \
        "$GUNICORN" --workers 1 --worker-class sync --bind "127.0.0.1:$port" \
        --chdir bench --log-level warning hello:application
}

run_nginx() {
    local port dir mod temps=""
    command -v "$NGINX" >/dev/null 2>&1 || { skip nginx "$NGINX not found"; return; }
    port=$(free_port)
    dir=$TMP/nginx; mkdir -p "$dir"
    # Keep every temp path in our directory (only for modules compiled in).
    for mod in client_body proxy fastcgi uwsgi scgi; do
        if [[ $mod == client_body ]] || ! "$NGINX" -V 2>&1 | grep -q -- "--without-http_${mod}_module"; then
            temps+="    ${mod}_temp_path $dir/${mod}_temp;"$'\n'
        fi
    done
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;

events {
    worker_connections 1024;
}

http {
    access_log off;
$temps
    server {
        listen 127.0.0.1:$port;
        default_type text/plain;
        location / {
            return 200 "$EXPECTED_BODY";
        }
    }
}
EOF
    bench_one nginx TERM "$port" -- "$NGINX" -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
}

# The other peers (issue 29): started as bench/peers.sh says.
# shellcheck source=bench/peers.sh
. "$SCRIPT_DIR/peers.sh"
run_peer() {
    local port
    port=$(free_port)
    if ! peer_cmd "$1" hello:application "$port"; then skip "$1" "$PEER_WHY"; return; fi
    bench_one "$1" "$STOPSIG" "$port" -- "${SCMD[@]}"
}

# --------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do
    case " m0serve uwsgi gunicorn nginx $PEER_NAMES " in *" $s "*) ;; *) die "unknown server in --servers: $s" ;; esac
done

host_info
declare -A VERSION
VERSION[m0serve]=$(m0serve_version git)
if command -v "$UWSGI" >/dev/null 2>&1; then VERSION[uwsgi]="uWSGI $(ver "$UWSGI" --version)"; fi
if command -v "$GUNICORN" >/dev/null 2>&1; then VERSION[gunicorn]=$(ver "$GUNICORN" --version); fi
if command -v "$NGINX" >/dev/null 2>&1; then VERSION[nginx]=$(ver "$NGINX" -v); fi
WRK_VERSION=$(ver "$WRK" -v)
PY_VERSION=$(ver "$PYTHON" --version)
BENCH_VENV_VERSIONS=$(bench_venv_versions)

printf 'm0serve hello-world benchmark\n'
printf 'host: %s\n' "$HOST_INFO"
printf 'topology: server on CPU %s, wrk on CPU %s; wrk -t%s -c%s -d%ss --latency (warm-up %ss)\n' \
    "$SERVER_CPU" "$CLIENT_CPU" "$THREADS" "$CONNECTIONS" "$DURATION" "$WARMUP"

printf 'versions:\n'
for s in "${ORDER[@]}"; do printf '  %-9s %s\n' "$s" "${VERSION[$s]:-$(peer_version "$s")}"; done
printf '  %-9s %s\n' wrk "$WRK_VERSION" python "$PY_VERSION"
printf '  bench venv %s\n' "$BENCH_VENV_VERSIONS"

background_load "$SERVER_CPU" "$CLIENT_CPU" short

for s in "${ORDER[@]}"; do
    case $s in m0serve|uwsgi|gunicorn|nginx) "run_$s" ;; *) run_peer "$s" ;; esac
done

if [[ -n $LOG_DIR ]]; then
    mkdir -p "$LOG_DIR"
    cp -r "$TMP"/. "$LOG_DIR"/
fi

# ---- report ---------------------------------------------------------------
peer_ratio() {   # peer_ratio PEER -> "1.23" or "n/a (...)"
    local peer=$1
    if [[ ${STATUS[m0serve]:-} != ok ]]; then printf 'n/a (m0serve not measured)'; return; fi
    if [[ ${STATUS[$peer]:-} != ok ]]; then printf 'n/a (%s not measured)' "$peer"; return; fi
    ratio "${RPS[m0serve]}" "${RPS[$peer]}"
}

cpus() { if [[ -n ${SCPU[$1]:-} ]]; then printf '%s/%s' "${SCPU[$1]}" "${CCPU[$1]}"; else printf -- -; fi; }

printf '\n%-9s %8s %8s %8s %-16s %-10s %-8s %-9s %s\n' server req/s "p50 ms" "p99 ms" errors keep-alive "srv cpu%" "cores% s/c" status
for s in "${ORDER[@]}"; do
    printf '%-9s %8s %8s %8s %-16s %-10s %-8s %-9s %s\n' "$s" "$(cell "${RPS[$s]:-}")" "$(cell "${P50[$s]:-}")" \
        "$(cell "${P99[$s]:-}")" "$(cell "${ERRS[$s]:-}")" "$(cell "${KA[$s]:-}")" "$(cell "${OCPU[$s]:-}")" \
        "$(cpus "$s")" "${STATUS[$s]}"
done
printf '\nratios (m0serve req/s / peer req/s):\n'
for p in uwsgi gunicorn nginx; do
    if [[ " ${ORDER[*]} " == *" $p "* ]]; then printf '  m0/%-9s %s\n' "$p" "$(peer_ratio "$p")"; fi
done

print_notes "${ORDER[@]}"

printf '\ncommands (run from %s):\n' "$REPO_ROOT"
for s in "${ORDER[@]}"; do
    [[ -n ${CMD[$s]:-} ]] || continue
    printf '  %s:\n    server: %s\n    client: %s\n' "$s" "${CMD[$s]}" "${WRKCMD[$s]}"
done
if [[ -f $TMP/nginx/nginx.conf ]]; then
    printf '  generated nginx.conf (temporary dir %s):\n' "$TMP/nginx"
    sed 's/^/    | /' "$TMP/nginx/nginx.conf"
fi
if [[ -n $LOG_DIR ]]; then printf '\nlogs and raw wrk output: %s\n' "$LOG_DIR"; fi

# shellcheck disable=SC2016  # backticks are markdown, not expansions
markdown_report() {
    local s p
    md_header 'm0serve hello-world benchmark'
    printf -- '- topology: server pinned to CPU %s, wrk pinned to CPU %s, 127.0.0.1\n' "$SERVER_CPU" "$CLIENT_CPU"
    printf -- '- load: `wrk -t%s -c%s -d%ss --latency`, after a %ss warm-up\n' "$THREADS" "$CONNECTIONS" "$DURATION" "$WARMUP"
    printf -- '- app: `bench/hello.py` (13-byte text/plain body); nginx: `return 200 "%s"`\n' "$EXPECTED_BODY"
    printf -- '- tools: %s; %s\n' "$WRK_VERSION" "$PY_VERSION"
    printf -- '- bench venv: %s\n' "$BENCH_VENV_VERSIONS"
    printf -- '- background load: %s\n' "$BACKGROUND"
    printf '\n| server | req/s | p50 (ms) | p99 (ms) | errors | keep-alive | server CPU %% | core busy %% server/wrk | status | version |\n'
    printf '|---|---:|---:|---:|---:|:---:|---:|:---:|---|---|\n'
    for s in "${ORDER[@]}"; do
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$(cell "${RPS[$s]:-}")" \
            "$(cell "${P50[$s]:-}")" "$(cell "${P99[$s]:-}")" "$(cell "${ERRS[$s]:-}")" \
            "$(cell "${KA[$s]:-}")" "$(cell "${OCPU[$s]:-}")" "$(cpus "$s")" "${STATUS[$s]//|/\\|}" \
            "$(cell "${VERSION[$s]:-}")"
    done
    printf '\n| ratio | value |\n|---|---:|\n'
    for p in uwsgi gunicorn nginx; do
        if [[ " ${ORDER[*]} " == *" $p "* ]]; then printf '| m0serve / %s | %s |\n' "$p" "$(peer_ratio "$p")"; fi
    done
    md_notes "${ORDER[@]}"
    printf '\nCommands (run from the repository root):\n\n```sh\n'
    for s in "${ORDER[@]}"; do
        [[ -n ${CMD[$s]:-} ]] || continue
        printf '# %s\n%s &\n%s\n' "$s" "${CMD[$s]}" "${WRKCMD[$s]}"
    done
    printf '```\n'
    if [[ -f $TMP/nginx/nginx.conf ]]; then
        printf '\nGenerated `nginx.conf` (in a temporary directory, removed afterwards):\n\n```nginx\n'
        cat "$TMP/nginx/nginx.conf"
        printf '```\n'
    fi
}
write_markdown markdown_report
