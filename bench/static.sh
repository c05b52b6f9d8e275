#!/usr/bin/env bash
# bench/static.sh — static files: m0serve --static vs nginx (the ceiling) vs
# WhiteNoise (under gunicorn and under uvicorn) vs Granian's static route,
# a 1 KiB and a 1 MiB file, keep-alive, same run (issue 11).
#
# Each server is started pinned to one core (SERVER_CPU, default 0) with one
# worker process, probed (status and exact bytes of both files), warmed up,
# then loaded by wrk pinned to another core (CLIENT_CPU, default 1), one URL
# at a time. Servers that are missing or fail to start are reported and
# skipped. See bench/README.md.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/static.sh [options]

Options:
  --markdown FILE    also write the results as a markdown report to FILE
  --servers LIST     comma-separated subset/order of:
                     m0serve,nginx,whitenoise-gunicorn,whitenoise-uvicorn,granian
                     (default: all five, in that order)
  --duration SECS    wrk measurement duration per file (default: $DURATION or 8)
  --log-dir DIR      keep server logs and raw wrk output in DIR
  -h, --help         show this help

Environment:
  M0SERVE=./m0serve        m0serve binary
  M0SERVE_ARGS=            extra m0serve options, appended
  DURATION=8 WARMUP=2      seconds per file: measurement, warm-up
  CONNECTIONS=32 THREADS=1 wrk connections and threads
  SERVER_CPU=0 CLIENT_CPU=1
  STARTUP_TIMEOUT=20       seconds to wait for a server to answer
  PYTHON=/usr/bin/python3  interpreter for helper one-liners
  BENCH_VENV=.venv-bench   gunicorn, uvicorn, granian, Django, WhiteNoise (make bench-venv)
  NGINX=/usr/sbin/nginx WRK=wrk
EOF
}

PROG=static.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-20}
PYTHON=${PYTHON:-/usr/bin/python3}
NGINX=${NGINX:-/usr/sbin/nginx}
WRK=${WRK:-wrk}
SERVERS=m0serve,nginx,whitenoise-gunicorn,whitenoise-uvicorn,granian
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
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl cmp ps "$WRK" "$PYTHON"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0static.XXXXXX")
common_traps

# The files: the same bytes for every server. 1k.css is text (a typical
# small asset), 1m.bin random bytes.
STATIC=$TMP/static
mkdir -p "$STATIC"
"$PYTHON" - "$STATIC" <<'PY'
import os, random, sys
d = sys.argv[1]
rnd = random.Random(11)
line = "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(63)) + "\n"
open(os.path.join(d, "1k.css"), "w").write((line * 16)[:1024])
open(os.path.join(d, "1m.bin"), "wb").write(rnd.randbytes(1 << 20))
PY
FILES=(1k.css 1m.bin)
declare -A LABEL=([1k.css]="1 KiB" [1m.bin]="1 MiB")

declare -A STATUS RPS P50 P99 ERRS NOTE CMD OCPU CCPU
log_path() { printf '%s/%s.%s\n' "$TMP" "$1" "$2"; }

# The server answers both files with 200 and their exact bytes, and keeps
# the connection between two requests.
probe() {
    local name=$1 base=$2 f conns
    for f in "${FILES[@]}"; do
        if ! curl -sS --max-time 5 -o "$TMP/$name.$f" -w '%{http_code}' "$base/$f" 2>/dev/null | grep -qx 200; then
            NOTE[$name]+="probe of $f failed; "
        elif ! cmp -s "$TMP/$name.$f" "$STATIC/$f"; then
            NOTE[$name]+="$f: wrong bytes; "
        fi
    done
    conns=$(curl -s --max-time 5 -o /dev/null -o /dev/null -w '%{num_connects}\n' "$base/1k.css" "$base/1k.css" 2>/dev/null | tr '\n' ' ') || true
    [[ $conns == "1 0 " ]] || NOTE[$name]+="no keep-alive (connects: $conns); "
}

bench_one() {   # bench_one NAME STOPSIG PORT -- CMD...
    local name=$1 stopsig=$2 port=$3; shift 4
    local base="http://127.0.0.1:$port/static" slog rc=0 f key wout out rps p50 p99 errs detail t0 t1 ticks0 ticks1 s0 s1
    slog=$(log_path "$name" server.log)
    CMD[$name]=$(q taskset -c "$SERVER_CPU" "$@")
    NOTE[$name]=""
    printf '\n== %s\n$ %s\n' "$name" "${CMD[$name]}"
    start_server "$name" "$stopsig" "$SERVER_CPU" "$slog" "$@"
    wait_http "$base/1k.css" "$STARTUP_TIMEOUT" || rc=$?
    if ((rc)); then
        STATUS[$name]="failed to start ($( ((rc == 2)) && echo "no answer within ${STARTUP_TIMEOUT}s" || echo exited))"
        stop_server
        printf '   %s; last lines of its log:\n' "${STATUS[$name]}"
        tail -n 15 "$slog" | sed 's/^/   | /'
        return 0
    fi
    probe "$name" "http://127.0.0.1:$port/static"
    STATUS[$name]=ok
    for f in "${FILES[@]}"; do
        key=$name/$f
        wout=$(log_path "$name" "$f.wrk.txt")
        if ((WARMUP > 0)); then run_wrk "$THREADS" "$CONNECTIONS" "$WARMUP" "$base/$f" "$wout.warmup" || true; fi
        s0=$(cpu_snapshot); ticks0=$(session_ticks "$SERVER_SID"); t0=$(now_ms)
        if run_wrk "$THREADS" "$CONNECTIONS" "$DURATION" "$base/$f" "$wout" && out=$(parse_wrk "$wout" 3 strict); then
            s1=$(cpu_snapshot); ticks1=$(session_ticks "$SERVER_SID"); t1=$(now_ms)
            IFS=$'\t' read -r rps p50 p99 _ errs detail <<<"$out"
            RPS[$key]=$rps; P50[$key]=$p50; P99[$key]=$p99; ERRS[$key]=$errs
            [[ -z ${detail:-} ]] || NOTE[$name]+="$f: $detail; "
            OCPU[$key]=$(awk -v a="$ticks0" -v b="$ticks1" -v hz="$CLK_TCK" -v ms=$((t1 - t0)) \
                'BEGIN { if (ms > 0 && hz > 0) printf "%.0f", 100 * (b - a) / hz / (ms / 1000); else printf "?" }')
            CCPU[$key]=$(cpu_busy "$s0" "$s1" "$CLIENT_CPU")
            printf '   %-6s %8s req/s  p50 %s ms  p99 %s ms  errors %s  server %s%% CPU, wrk core %s%%\n' \
                "${LABEL[$f]}" "$rps" "$p50" "$p99" "$errs" "${OCPU[$key]}" "${CCPU[$key]}"
            if [[ ${CCPU[$key]} =~ ^[0-9]+$ ]] && ((CCPU[$key] >= 95)); then
                NOTE[$name]+="$f: wrk core ${CCPU[$key]}% busy (client-bound); "
            fi
        else
            STATUS[$name]="wrk failed on $f"
            sed 's/^/   | /' "$wout"
        fi
    done
    session_alive "$SERVER_SID" || NOTE[$name]+="server died during the run; "
    stop_server
}

skip() { STATUS[$1]="missing: $2"; NOTE[$1]=""; printf '\n== %s\n   skipped: %s\n' "$1" "$2"; }

run_m0serve() {
    [[ -x $M0SERVE ]] || { skip m0serve "$M0SERVE not built"; return; }
    local port extra=()
    port=$(free_port)
    if [[ -n ${M0SERVE_ARGS:-} ]]; then read -r -a extra <<<"$M0SERVE_ARGS"; fi
    bench_one m0serve TERM "$port" -- "$M0SERVE" --static "/static=$STATIC" --bind "127.0.0.1:$port" \
        --workers 1 "${extra[@]}"
}

run_nginx() {
    command -v "$NGINX" >/dev/null 2>&1 || { skip nginx "$NGINX not found"; return; }
    local port dir mod temps=""
    port=$(free_port)
    dir=$TMP/nginx; mkdir -p "$dir"
    for mod in client_body proxy fastcgi uwsgi scgi; do
        if [[ $mod == client_body ]] || ! "$NGINX" -V 2>&1 | grep -q -- "--without-http_${mod}_module"; then
            temps+="    ${mod}_temp_path $dir/${mod}_temp;"$'\n'
        fi
    done
    # Debian's defaults for serving files (sendfile, tcp_nopush), the
    # access log off as for every server here, keep-alive not capped.
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
$temps
    server {
        listen 127.0.0.1:$port;
        location /static/ { alias $STATIC/; }
    }
}
EOF
    bench_one nginx TERM "$port" -- "$NGINX" -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
}

venv_has() { [[ -x $BENCH_PY ]] && "$BENCH_PY" -c "import $1" 2>/dev/null; }

run_whitenoise-gunicorn() {
    venv_has "whitenoise, django, gunicorn" || { skip whitenoise-gunicorn "gunicorn/Django/WhiteNoise not in $BENCH_VENV (make bench-venv)"; return; }
    local port
    port=$(free_port)
    # gthread: the gunicorn worker that keeps connections alive.
    bench_one whitenoise-gunicorn INT "$port" -- env BENCH_STATIC_DIR="$STATIC" \
        "$BENCH_VENV/bin/gunicorn" --workers 1 --worker-class gthread --threads 4 --bind "127.0.0.1:$port" \
        --chdir bench --log-level warning whitenoise_site:application
}

run_whitenoise-uvicorn() {
    venv_has "whitenoise, django, uvicorn, uvloop, httptools" || { skip whitenoise-uvicorn "uvicorn/Django/WhiteNoise not in $BENCH_VENV (make bench-venv)"; return; }
    local port
    port=$(free_port)
    bench_one whitenoise-uvicorn TERM "$port" -- env BENCH_STATIC_DIR="$STATIC" \
        "$BENCH_PY" -m uvicorn --app-dir bench whitenoise_site:asgi_application --host 127.0.0.1 --port "$port" \
        --workers 1 --loop uvloop --http httptools --log-level warning --no-access-log
}

run_granian() {
    [[ -x $BENCH_VENV/bin/granian ]] || { skip granian "granian not in $BENCH_VENV (make bench-venv)"; return; }
    local port
    port=$(free_port)
    # The application is never called: the Rust side answers /static.
    bench_one granian TERM "$port" -- "$BENCH_VENV/bin/granian" --interface wsgi --host 127.0.0.1 --port "$port" \
        --workers 1 --working-dir bench --static-path-route /static --static-path-mount "$STATIC" \
        --no-access-log --log-level warning hello:application
}

IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do
    case $s in m0serve|nginx|whitenoise-gunicorn|whitenoise-uvicorn|granian) ;; *) die "unknown server: $s" ;; esac
done

host_info
declare -A VERSION
VERSION[m0serve]=$(m0serve_version git)
if command -v "$NGINX" >/dev/null 2>&1; then VERSION[nginx]=$(ver "$NGINX" -v); fi
if [[ -x $BENCH_PY ]]; then
    VERSION[whitenoise-gunicorn]=$("$BENCH_PY" -c 'import importlib.metadata as m; print("whitenoise %s, Django %s, gunicorn %s" % (m.version("whitenoise"), m.version("Django"), m.version("gunicorn")))' 2>/dev/null || echo "?")
    VERSION[whitenoise-uvicorn]=$("$BENCH_PY" -c 'import importlib.metadata as m; print("whitenoise %s, Django %s, uvicorn %s (uvloop, httptools)" % (m.version("whitenoise"), m.version("Django"), m.version("uvicorn")))' 2>/dev/null || echo "?")
    VERSION[granian]=$("$BENCH_PY" -c 'import importlib.metadata as m; print("granian %s" % m.version("granian"))' 2>/dev/null || echo "?")
fi
WRK_VERSION=$(ver "$WRK" -v)

printf 'm0serve static-file benchmark\nhost: %s\n' "$HOST_INFO"
printf 'topology: server on CPU %s (1 worker), wrk on CPU %s; wrk -t%s -c%s -d%ss --latency per file (warm-up %ss)\n' \
    "$SERVER_CPU" "$CLIENT_CPU" "$THREADS" "$CONNECTIONS" "$DURATION" "$WARMUP"
printf 'versions:\n'
for s in "${ORDER[@]}"; do printf '  %-19s %s\n' "$s" "${VERSION[$s]:-not found}"; done
printf '  %-19s %s\n' wrk "$WRK_VERSION"
background_load "$SERVER_CPU" "$CLIENT_CPU" short

for s in "${ORDER[@]}"; do "run_$s"; done

if [[ -n $LOG_DIR ]]; then mkdir -p "$LOG_DIR"; cp -r "$TMP"/. "$LOG_DIR"/; fi

m0_ratio() {   # m0_ratio PEER FILE
    if [[ ${STATUS[m0serve]:-} != ok || -z ${RPS[m0serve/$2]:-} ]]; then printf 'n/a'; return; fi
    if [[ ${STATUS[$1]:-} != ok || -z ${RPS[$1/$2]:-} ]]; then printf 'n/a'; return; fi
    ratio "${RPS[m0serve/$2]}" "${RPS[$1/$2]}"
}
mbps() { awk -v r="${1:-}" 'BEGIN { if (r ~ /^[0-9.]+$/) printf "%.0f", r * 1048576 / 1e6; else printf "-" }'; }

# Server CPU (% of one core, all its processes) beside each figure: with the
# client core saturated (1 MiB above all: wrk copies every byte), what the
# server spent per request is the comparison that remains.
printf '\n%-19s | %9s %7s %7s %5s | %9s %7s %7s %8s %5s | %s\n' server "1K req/s" "p50 ms" "p99 ms" "cpu%" \
    "1M req/s" "p50 ms" "p99 ms" "MB/s" "cpu%" status
for s in "${ORDER[@]}"; do
    printf '%-19s | %9s %7s %7s %5s | %9s %7s %7s %8s %5s | %s\n' "$s" \
        "$(cell "${RPS[$s/1k.css]:-}")" "$(cell "${P50[$s/1k.css]:-}")" "$(cell "${P99[$s/1k.css]:-}")" \
        "$(cell "${OCPU[$s/1k.css]:-}")" \
        "$(cell "${RPS[$s/1m.bin]:-}")" "$(cell "${P50[$s/1m.bin]:-}")" "$(cell "${P99[$s/1m.bin]:-}")" \
        "$(mbps "${RPS[$s/1m.bin]:-}")" "$(cell "${OCPU[$s/1m.bin]:-}")" "${STATUS[$s]}"
done
printf '\nratios (m0serve req/s / peer req/s), 1 KiB and 1 MiB:\n'
for p in "${ORDER[@]}"; do
    [[ $p == m0serve ]] && continue
    printf '  m0/%-19s %s  %s\n' "$p" "$(m0_ratio "$p" 1k.css)" "$(m0_ratio "$p" 1m.bin)"
done
printf '  (targets: >= 0.8 x nginx on both sizes, >= 5 x WhiteNoise)\n'
print_notes "${ORDER[@]}"
printf '\ncommands (run from %s; STATIC is a temporary directory with the two files):\n' "$REPO_ROOT"
for s in "${ORDER[@]}"; do [[ -z ${CMD[$s]:-} ]] || printf '  %s: %s\n' "$s" "${CMD[$s]}"; done
printf '  client: %s\n' "$(wrk_cmd "$THREADS" "$CONNECTIONS" "$DURATION" 'http://127.0.0.1:PORT/static/{1k.css,1m.bin}')"

# shellcheck disable=SC2016
markdown_report() {
    local s p
    md_header 'm0serve static-file benchmark'
    printf -- '- topology: server pinned to CPU %s (one worker process), wrk pinned to CPU %s, 127.0.0.1, keep-alive\n' "$SERVER_CPU" "$CLIENT_CPU"
    printf -- '- load: `wrk -t%s -c%s -d%ss --latency` per file, after a %ss warm-up; files: 1k.css (1,024 bytes), 1m.bin (1,048,576 bytes), no Accept-Encoding\n' \
        "$THREADS" "$CONNECTIONS" "$DURATION" "$WARMUP"
    printf -- '- tools: %s\n- background load: %s\n' "$WRK_VERSION" "$BACKGROUND"
    printf '\n| server | 1 KiB req/s | p50 ms | p99 ms | server CPU %% | 1 MiB req/s | p50 ms | p99 ms | MB/s | server CPU %% | version |\n'
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n'
    for s in "${ORDER[@]}"; do
        printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" \
            "$(cell "${RPS[$s/1k.css]:-}")" "$(cell "${P50[$s/1k.css]:-}")" "$(cell "${P99[$s/1k.css]:-}")" \
            "$(cell "${OCPU[$s/1k.css]:-}")" \
            "$(cell "${RPS[$s/1m.bin]:-}")" "$(cell "${P50[$s/1m.bin]:-}")" "$(cell "${P99[$s/1m.bin]:-}")" \
            "$(mbps "${RPS[$s/1m.bin]:-}")" "$(cell "${OCPU[$s/1m.bin]:-}")" \
            "$(cell "${VERSION[$s]:-}") ${STATUS[$s]/#ok/}"
    done
    printf '\n| m0serve / peer | 1 KiB | 1 MiB |\n|---|---:|---:|\n'
    for p in "${ORDER[@]}"; do
        [[ $p == m0serve ]] || printf '| %s | %s | %s |\n' "$p" "$(m0_ratio "$p" 1k.css)" "$(m0_ratio "$p" 1m.bin)"
    done
    md_notes "${ORDER[@]}"
    printf '\nCommands (run from the repository root; STATIC is a temporary directory holding the two files):\n\n```sh\n'
    for s in "${ORDER[@]}"; do [[ -z ${CMD[$s]:-} ]] || printf '# %s\n%s\n' "$s" "${CMD[$s]}"; done
    printf '%s\n```\n' "$(wrk_cmd "$THREADS" "$CONNECTIONS" "$DURATION" 'http://127.0.0.1:PORT/static/1k.css')"
}
write_markdown markdown_report
