#!/usr/bin/env bash
# bench/tls.sh — TLS (issue 31): m0serve over TLS beside plain m0serve, nginx
# (Debian's), uvicorn (--ssl-certfile) and Granian (--ssl-certificate), one
# worker each, the server pinned to SERVER_CPU (0), the client to CLIENT_CPU
# (1), the same ECDSA P-256 certificate for everyone and each side's default
# TLS 1.3 suite (the negotiated one is printed per server).
#
#   keep-alive hello   wrk -t1 -c32, 13-byte body (m0serve: bench/hello.py
#                      WSGI; uvicorn/Granian: bench/asgi_hello.py; nginx: return 200)
#   static 100 KiB     wrk -t1 -c32, one file (m0serve --static, nginx alias)
#   full handshakes/s  wrk -t1 -c32 with "Connection: close": a new connection,
#                      full handshake, one request each
#   new/resumed conn/s openssl s_time -new / -reuse (one blocking client)
#   idle TLS stream    worker RSS per idle SSE stream (bench/tls_streams.py,
#                      Python ssl clients; STREAMS of them), TLS and plain
#
# Usage: bench/tls.sh [--duration SECS] [--markdown FILE] [--log-dir DIR]
# Environment: DURATION=5 WARMUP=1 CONNECTIONS=32 STREAMS=2000 SERVER_CPU=0 CLIENT_CPU=1
set -uo pipefail
PROG=bench/tls.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNECTIONS=${CONNECTIONS:-32}
STREAMS=${STREAMS:-2000}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-20}
PYTHON=${PYTHON:-/usr/bin/python3}
NGINX=${NGINX:-/usr/sbin/nginx}
WRK=${WRK:-wrk}
SERVERS=""
MARKDOWN=""
LOG_DIR=""
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

while (($#)); do
    case $1 in
        --duration|--duration=*) take_value DURATION SECS "$@" ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done
check_uints DURATION WARMUP CONNECTIONS STREAMS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT
resolve_paths
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl openssl ps "$WRK" "$PYTHON"
BENCH_VENV_ABS=$(cd -- "$BENCH_VENV" 2>/dev/null && pwd) || die "no $BENCH_VENV (make bench-venv)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0tls.XXXXXX")
chmod 755 "$TMP"        # nginx's worker runs as nobody: it must reach the static file
common_traps
CERT=$TMP/cert.pem KEY=$TMP/key.pem
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$KEY" -out "$CERT" -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null || die "openssl req failed"
mkdir -p "$TMP/static"
head -c 102400 /dev/urandom >"$TMP/static/100k.bin"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

declare -A R
row() { R[$1/$2]=$3; }

# wrk_rps URL OUT [HEADER] -> req/s (warm-up first)
wrk_rps() {
    local url=$1 out=$2 hdr=${3:-} args=()
    [[ -n $hdr ]] && args=(-H "$hdr")
    timeout -k 5 $((WARMUP + 30)) taskset -c "$CLIENT_CPU" "$WRK" -t1 -c"$CONNECTIONS" -d"${WARMUP}s" "${args[@]}" "$url" >/dev/null 2>&1 || true
    timeout -k 5 $((DURATION + 30)) taskset -c "$CLIENT_CPU" "$WRK" -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency "${args[@]}" "$url" >"$out" 2>&1
    # A figure counts only when every answer was a 2xx/3xx and no socket
    # failed: a server answering 403 fast is no benchmark.
    local line rps errs
    line=$(parse_wrk "$out" 2) || { echo "-"; return; }
    rps=$(cut -f1 <<<"$line"); errs=$(cut -f5 <<<"$line")
    if [[ -n $errs && $errs != 0 ]]; then echo "$rps ($errs errors)"; else echo "$rps"; fi
}

# s_time_cps PORT MODE(-new|-reuse) -> connections per second
s_time_cps() {
    timeout -k 5 $((DURATION + 30)) taskset -c "$CLIENT_CPU" openssl s_time -connect "127.0.0.1:$1" "$2" \
        -time "$DURATION" -www / 2>&1 | tee "$TMP/stime$2.$1.txt" | awk '/connections in [0-9.]+ real seconds/ { if ($4 > 0) printf "%.0f\n", $1 / $4; exit }'
}

worker_of() {   # the newest child of the session's leader (m0serve's worker)
    pgrep -P "$SERVER_SID" -n 2>/dev/null || true
}

bench_server() {   # bench_server NAME SCHEME PORT STATIC(0|1) -- CMD...
    local name=$1 scheme=$2 port=$3 static=$4; shift 5
    local base=$scheme://127.0.0.1:$port v
    printf '\n== %s\n$ %s\n' "$name" "$(q taskset -c "$SERVER_CPU" "$@")"
    start_server "$name" TERM "$SERVER_CPU" "$TMP/$name.log" "$@"
    if ! CURL_CA_BUNDLE=$CERT wait_http "$base/" "$STARTUP_TIMEOUT"; then
        printf '   failed to start:\n'; tail -n 10 "$TMP/$name.log" | sed 's/^/   | /'; stop_server; return
    fi
    if [[ $scheme == https ]]; then
        v=$(openssl s_client -connect "127.0.0.1:$port" -servername localhost </dev/null 2>/dev/null |
            awk '/^New,/ {print $2 " " $5; exit}')
        printf '   negotiated: %s\n' "$v"
    fi
    row "$name" hello "$(wrk_rps "$base/" "$TMP/$name.hello.wrk")"
    printf '   keep-alive hello: %s req/s\n' "${R[$name/hello]}"
    if ((static)); then
        row "$name" static "$(wrk_rps "$base/static/100k.bin" "$TMP/$name.static.wrk")"
        printf '   static 100 KiB: %s req/s\n' "${R[$name/static]}"
    fi
    if [[ $scheme == https ]]; then
        row "$name" close "$(wrk_rps "$base/" "$TMP/$name.close.wrk" "Connection: close")"
        printf '   new connections (wrk, Connection: close): %s/s\n' "${R[$name/close]}"
        row "$name" new "$(s_time_cps "$port" -new)"
        row "$name" reuse "$(s_time_cps "$port" -reuse)"
        printf '   s_time -new %s/s, -reuse %s/s\n' "${R[$name/new]}" "${R[$name/reuse]}"
    fi
    stop_server
}

m0=("$M0SERVE" hello:application --app-dir bench --workers 1 --static "/static=$TMP/static")
tlsargs=(--certfile "$CERT" --keyfile "$KEY")

p=$(free_port); bench_server m0serve-plain http "$p" 1 -- "${m0[@]}" --bind "127.0.0.1:$p"
p=$(free_port); bench_server m0serve-tls https "$p" 1 -- "${m0[@]}" --bind "127.0.0.1:$p" "${tlsargs[@]}"

p=$(free_port)
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx/nginx.conf" <<NGX
worker_processes 1;
daemon off;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:$p ssl;
        ssl_certificate $CERT;
        ssl_certificate_key $KEY;
        ssl_protocols TLSv1.2 TLSv1.3;
        location = / { default_type text/plain; return 200 "Hello, World!"; }
        location /static/ { alias $TMP/static/; }
    }
}
NGX
if command -v "$NGINX" >/dev/null 2>&1; then
    bench_server nginx https "$p" 1 -- "$NGINX" -p "$TMP/nginx" -e "$TMP/nginx/error.log" -c "$TMP/nginx/nginx.conf"
fi
p=$(free_port)
bench_server uvicorn https "$p" 0 -- "$BENCH_PY" -m uvicorn --app-dir bench asgi_hello:app --host 127.0.0.1 --port "$p" \
    --workers 1 --loop uvloop --http httptools --no-access-log --log-level warning --ssl-certfile "$CERT" --ssl-keyfile "$KEY"
p=$(free_port)
bench_server granian https "$p" 0 -- "$BENCH_VENV/bin/granian" --interface asgi --host 127.0.0.1 --port "$p" --workers 1 \
    --loop uvloop --working-dir bench --log-level warning --ssl-certificate "$CERT" --ssl-keyfile "$KEY" asgi_hello:app

# Idle SSE streams: worker RSS per stream, TLS and plain.
for mode in plain tls; do
    p=$(free_port)
    args=("$M0SERVE" rt_app:application --app-dir bench --workers 1 --realtime --blocking-threads 2 --max-connections $((STREAMS + 200)) --bind "127.0.0.1:$p")
    scheme=http; flag=()
    if [[ $mode == tls ]]; then args+=("${tlsargs[@]}"); scheme=https; flag=(--tls); fi
    printf '\n== idle SSE streams, %s (%s)\n' "$mode" "$STREAMS"
    start_server "streams-$mode" TERM "$SERVER_CPU" "$TMP/streams-$mode.log" "${args[@]}"
    if CURL_CA_BUNDLE=$CERT wait_http "$scheme://127.0.0.1:$p/" "$STARTUP_TIMEOUT" any; then
        w=$(worker_of)
        out=$(taskset -c "$CLIENT_CPU" "$PYTHON" bench/tls_streams.py --port "$p" --pid "$w" -n "$STREAMS" "${flag[@]}" 2>&1) || true
        printf '   %s\n' "$out"
        row "streams" "$mode" "$(sed -n 's/.*"kib_per_stream": \([0-9.-]*\).*/\1/p' <<<"$out")"
    fi
    stop_server
done
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
{
    printf '\n| server (1 worker, TLS 1.3 unless plain) | keep-alive hello req/s | static 100 KiB req/s | new conn/s (wrk, Connection: close) | s_time -new conn/s | s_time -reuse conn/s |\n'
    printf '|---|---:|---:|---:|---:|---:|\n'
    for s in m0serve-plain m0serve-tls nginx uvicorn granian; do
        printf '| %s | %s | %s | %s | %s | %s |\n' "$s" "${R[$s/hello]:--}" "${R[$s/static]:--}" "${R[$s/close]:--}" \
            "${R[$s/new]:--}" "${R[$s/reuse]:--}"
    done
    printf '\nidle SSE stream, worker RSS each (%s streams): plain %s KiB, TLS %s KiB\n' "$STREAMS" "${R[streams/plain]:--}" "${R[streams/tls]:--}"
    printf 'ratios: keep-alive TLS/plain %s; m0serve-tls/nginx: hello %s, full handshakes (wrk) %s, s_time -new %s, -reuse %s\n' \
        "$(ratio "${R[m0serve-tls/hello]:-}" "${R[m0serve-plain/hello]:-}")" \
        "$(ratio "${R[m0serve-tls/hello]:-}" "${R[nginx/hello]:-}")" \
        "$(ratio "${R[m0serve-tls/close]:-}" "${R[nginx/close]:-}")" \
        "$(ratio "${R[m0serve-tls/new]:-}" "${R[nginx/new]:-}")" \
        "$(ratio "${R[m0serve-tls/reuse]:-}" "${R[nginx/reuse]:-}")"
    printf 'load average before: %s, after: %s; wrk -t1 -c%s -d%ss (warm-up %ss); s_time -time %s\n' \
        "$LOAD0" "$LOAD1" "$CONNECTIONS" "$DURATION" "$WARMUP" "$DURATION"
} | tee "$TMP/table.md"
if [[ -n $MARKDOWN ]]; then cp "$TMP/table.md" "$MARKDOWN"; fi
