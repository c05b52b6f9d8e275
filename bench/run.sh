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
  --servers LIST     comma-separated subset/order of: m0serve,uwsgi,gunicorn,nginx
                     (default: all four, in that order)
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
  GUNICORN=gunicorn UWSGI=uwsgi NGINX=/usr/sbin/nginx WRK=wrk
  UWSGI_HTTP_OPT=--http-socket  uWSGI listener option; --http11-socket enables keep-alive
EOF
}

INVOKE_DIR=$PWD
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-15}
PYTHON=${PYTHON:-/usr/bin/python3}
GUNICORN=${GUNICORN:-gunicorn}
UWSGI=${UWSGI:-uwsgi}
NGINX=${NGINX:-/usr/sbin/nginx}
WRK=${WRK:-wrk}
UWSGI_HTTP_OPT=${UWSGI_HTTP_OPT:---http-socket}
SERVERS=m0serve,uwsgi,gunicorn,nginx
MARKDOWN=""
LOG_DIR=""

die() { printf 'run.sh: %s\n' "$*" >&2; exit 2; }
((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (found $BASH_VERSION)"

while (($#)); do
    case $1 in
        --markdown) (($# >= 2)) || die "--markdown needs a FILE"; MARKDOWN=$2; shift 2 ;;
        --markdown=*) MARKDOWN=${1#*=}; shift ;;
        --servers) (($# >= 2)) || die "--servers needs a LIST"; SERVERS=$2; shift 2 ;;
        --servers=*) SERVERS=${1#*=}; shift ;;
        --duration) (($# >= 2)) || die "--duration needs SECS"; DURATION=$2; shift 2 ;;
        --duration=*) DURATION=${1#*=}; shift ;;
        --log-dir) (($# >= 2)) || die "--log-dir needs a DIR"; LOG_DIR=$2; shift 2 ;;
        --log-dir=*) LOG_DIR=${1#*=}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done

for v in DURATION WARMUP CONNECTIONS THREADS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
((DURATION > 0)) || die "DURATION must be > 0"
((CONNECTIONS >= THREADS && THREADS > 0)) || die "need CONNECTIONS >= THREADS > 0"

# Output files given relative to where the user ran the script.
abs_from_invoke() { if [[ $1 == /* ]]; then printf '%s\n' "$1"; else printf '%s\n' "$INVOKE_DIR/$1"; fi; }
if [[ -n $MARKDOWN ]]; then MARKDOWN=$(abs_from_invoke "$MARKDOWN"); fi
if [[ -n $LOG_DIR ]]; then LOG_DIR=$(abs_from_invoke "$LOG_DIR"); fi

# m0serve: default ./m0serve at the repo root (the command line in the
# report then reads exactly `./m0serve hello:application --app-dir bench ...`).
if [[ -z ${M0SERVE:-} ]]; then
    M0SERVE=./m0serve
elif [[ $M0SERVE == */* && $M0SERVE != /* && -e $INVOKE_DIR/$M0SERVE ]]; then
    M0SERVE=$INVOKE_DIR/$M0SERVE
fi

cd -- "$REPO_ROOT"

for tool in taskset setsid timeout curl ps "$WRK" "$PYTHON"; do
    command -v "$tool" >/dev/null 2>&1 || die "required tool not found: $tool"
done
NCPU=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
((SERVER_CPU < NCPU && CLIENT_CPU < NCPU)) ||
    die "SERVER_CPU=$SERVER_CPU / CLIENT_CPU=$CLIENT_CPU not valid on a $NCPU-CPU machine"
((SERVER_CPU != CLIENT_CPU)) ||
    printf 'run.sh: warning: server and wrk share CPU %s; numbers will be lower\n' "$SERVER_CPU" >&2

# --------------------------------------------------------------------------
# Process management.  Every server is started with setsid, so it leads a
# new session/process group (pgid == sid == pid) that contains all of its
# forked masters/workers; stopping signals the whole group.
# --------------------------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0bench.XXXXXX")
CURRENT_SID=""     # session of the running server, if any
CURRENT_STOPSIG=TERM
WRK_PID=""         # running wrk (warm-up or measurement), if any

# Processes that belong to a server: its session (pgid == sid == leader
# pid) plus every descendant of the leader, in case one of them moved to a
# session of its own.
server_pids() {
    local sid=$1
    ps -e -o pid=,ppid=,sid= 2>/dev/null | awk -v root="$sid" '
        { pid[NR] = $1; ppid[NR] = $2; if ($3 == root) keep[$1] = 1 }
        END {
            keep[root] = 1
            do {
                changed = 0
                for (i = 1; i <= NR; i++)
                    if ((ppid[i] in keep) && !(pid[i] in keep)) { keep[pid[i]] = 1; changed = 1 }
            } while (changed)
            for (p in keep) print p
        }'
}

# True while any of the given pids is a live (non-zombie) process.
pids_alive() {
    (($#)) || return 1
    local list
    list=$(IFS=,; printf '%s' "$*")
    local stats
    stats=$(ps -o stat= -p "$list" 2>/dev/null) || true
    grep -qv -e '^ *Z' -e '^ *$' <<<"$stats"
}

# True while the server started as session $1 has a live process.
session_alive() {
    local pids
    mapfile -t pids < <(server_pids "$1")
    pids_alive "${pids[@]}"
}

# stop_session SID SIGNAL: signal the whole tree, wait up to 5 s, then
# SIGKILL whatever is left.  Sets STOP_HOW to "clean" or "SIGKILL needed".
STOP_HOW=clean
stop_session() {
    local sid=$1 sig=$2 i p pids
    STOP_HOW=clean
    mapfile -t pids < <(server_pids "$sid")
    kill -s "$sig" -- "-$sid" 2>/dev/null || true
    for p in "${pids[@]}"; do kill -s "$sig" "$p" 2>/dev/null || true; done
    for ((i = 0; i < 50; i++)); do
        pids_alive "${pids[@]}" || break
        sleep 0.1
    done
    if pids_alive "${pids[@]}"; then
        STOP_HOW="SIGKILL needed"
        mapfile -t -O "${#pids[@]}" pids < <(server_pids "$sid")
        kill -s KILL -- "-$sid" 2>/dev/null || true
        for p in "${pids[@]}"; do kill -s KILL "$p" 2>/dev/null || true; done
        for ((i = 0; i < 30; i++)); do
            pids_alive "${pids[@]}" || break
            sleep 0.1
        done
    fi
    wait "$sid" 2>/dev/null || true           # reap the leader (our child)
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if [[ -n $WRK_PID ]]; then
        kill -s TERM "$WRK_PID" 2>/dev/null || true
        wait "$WRK_PID" 2>/dev/null || true
    fi
    if [[ -n $CURRENT_SID ]]; then
        stop_session "$CURRENT_SID" "$CURRENT_STOPSIG"
    fi
    rm -rf -- "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# A free 127.0.0.1 port: kernel-assigned ephemeral port, double-checked
# against the listening sockets.
free_port() {
    local port i
    for ((i = 0; i < 20; i++)); do
        port=$("$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()')
        if command -v ss >/dev/null 2>&1; then
            [[ -z $(ss -Htln "sport = :$port" 2>/dev/null) ]] || continue
        fi
        printf '%s\n' "$port"
        return 0
    done
    return 1
}

# --------------------------------------------------------------------------
# Result bookkeeping.
# --------------------------------------------------------------------------
declare -A STATUS RPS P50 P99 ERRS KA NOTE CMD WRKCMD SCPU CCPU OCPU
EXPECTED_BODY="Hello, World!"

q() { local out="" a; for a in "$@"; do out+="${out:+ }$(printf '%q' "$a")"; done; printf '%s\n' "$out"; }

# Milliseconds since the epoch (bash >= 5 EPOCHREALTIME; locale-proof).
now_ms() { local t=${EPOCHREALTIME/[.,]/}; printf '%s\n' "$((10#$t / 1000))"; }

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

# parse_wrk FILE NAME: fill RPS/P50/P99/ERRS (latencies converted to ms).
parse_wrk() {
    local file=$1 name=$2 out detail=""
    out=$(awk '
        function ms(v,   n, u) {
            n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
            if (u == "us") return n / 1000
            if (u == "ms") return n
            if (u == "s")  return n * 1000
            if (u == "m")  return n * 60000
            if (u == "h")  return n * 3600000
            return -1
        }
        /^Requests\/sec:/             { rps = $2 }
        $1 == "50%"                   { p50 = ms($2) }
        $1 == "99%"                   { p99 = ms($2) }
        /Socket errors:/              { gsub(",", ""); err += $4 + $8 + $10; rd = $6; sock = $0; sub(/^ *Socket errors: */, "", sock) }
        /Non-2xx or 3xx responses:/   { err += $NF; non2xx = $NF }
        END {
            if (rps == "" || p50 == "" || p99 == "") exit 1
            detail = ""
            if (sock != "") detail = "socket errors: " sock
            if (non2xx != "") detail = detail (detail == "" ? "" : "; ") "non-2xx/3xx: " non2xx
            e = sprintf("%d", err); if (rd > 0) e = e " +" rd " read"
            printf "%.0f\t%.3f\t%.3f\t%s\t%s\n", rps, p50, p99, e, detail
        }' "$file") || return 1
    local rps p50 p99 errs
    IFS=$'\t' read -r rps p50 p99 errs detail <<<"$out"
    RPS[$name]=$rps; P50[$name]=$p50; P99[$name]=$p99; ERRS[$name]=$errs
    [[ -z ${detail:-} ]] || NOTE[$name]+="$detail; "
}

# cpu_snapshot: "cpuN busy total irq" lines from /proc/stat (clock ticks);
# busy = everything but idle and iowait, irq = irq + softirq (e.g. loopback
# packet processing, which is not charged to any process).
cpu_snapshot() {
    awk '/^cpu[0-9]+ / { t = 0; for (i = 2; i <= NF; i++) t += $i; print $1, t - $5 - $6, t, $7 + $8 }' /proc/stat 2>/dev/null || true
}

# cpu_busy BEFORE AFTER CPU [irq] -> busy (or irq) percentage of that CPU
# between the two snapshots
cpu_busy() {
    local col=2
    if [[ ${4:-} == irq ]]; then col=4; fi
    awk -v want="cpu$3" -v col="$col" -v before="$1" -v after="$2" 'BEGIN {
        n = split(before, b, "\n"); for (i = 1; i <= n; i++) { split(b[i], f, " "); B[f[1]] = f[col]; T[f[1]] = f[3] }
        n = split(after, a, "\n"); for (i = 1; i <= n; i++) { split(a[i], f, " ")
            if (f[1] == want && (f[3] - T[want]) > 0) { printf "%.0f", 100 * (f[col] - B[want]) / (f[3] - T[want]); exit } }
        printf "?" }'
}

# tree_ticks SID: user+system CPU ticks consumed so far by the server's processes.
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
tree_ticks() {
    local p files=()
    for p in $(server_pids "$1"); do
        if [[ -r /proc/$p/stat ]]; then files+=("/proc/$p/stat"); fi
    done
    if ((${#files[@]} == 0)); then echo 0; return; fi
    # Fields after "pid (comm) ": $12 = utime, $13 = stime.
    awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }' "${files[@]}" 2>/dev/null || echo 0
}

# run_wrk SECONDS URL OUTFILE -> exit status of wrk
run_wrk() {
    local secs=$1 url=$2 out=$3 rc=0
    timeout -k 5 $((secs + 30)) taskset -c "$CLIENT_CPU" \
        "$WRK" -t"$THREADS" -c"$CONNECTIONS" -d"${secs}s" --latency "$url" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=""
    return "$rc"
}

# bench_one NAME STOPSIG -- CMD...   (CMD is run pinned to SERVER_CPU)
bench_one() {
    local name=$1 stopsig=$2 port=$3; shift 4
    local url="http://127.0.0.1:$port/" slog wout ready=0 deadline snap0 snap1 ticks0 ticks1 t0 t1 irq
    slog=$(log_path "$name" server.log); wout=$(log_path "$name" wrk.txt)
    CMD[$name]=$(q taskset -c "$SERVER_CPU" "$@")
    WRKCMD[$name]=$(q taskset -c "$CLIENT_CPU" "$WRK" -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$url")
    NOTE[$name]=""
    printf '\n== %s\n$ %s\n' "$name" "${CMD[$name]}"

    CURRENT_STOPSIG=$stopsig
    setsid taskset -c "$SERVER_CPU" "$@" >"$slog" 2>&1 </dev/null &
    CURRENT_SID=$!

    # Poll until it answers; the bound is wall-clock time, not a number of
    # attempts, since an attempt can take up to 1 s against a mute server.
    deadline=$(($(now_ms) + STARTUP_TIMEOUT * 1000))
    while (($(now_ms) < deadline)); do
        session_alive "$CURRENT_SID" || break
        if curl -s -o /dev/null --max-time 1 "$url" 2>/dev/null; then ready=1; break; fi
        sleep 0.1
    done
    if ((!ready)); then
        if session_alive "$CURRENT_SID"; then
            STATUS[$name]="failed to start (no answer within ${STARTUP_TIMEOUT}s)"
        else
            STATUS[$name]="failed to start (exited)"
        fi
        stop_session "$CURRENT_SID" "$stopsig"; CURRENT_SID=""
        printf '   %s; last lines of its log:\n' "${STATUS[$name]}"
        tail -n 15 "$slog" | sed 's/^/   | /'
        return 0
    fi

    probe_response "$name" "$url"
    if ((WARMUP > 0)); then
        printf '   warm-up %ss...\n' "$WARMUP"
        run_wrk "$WARMUP" "$url" "$(log_path "$name" warmup.txt)" || true
    fi
    printf '$ %s\n' "${WRKCMD[$name]}"
    snap0=$(cpu_snapshot); ticks0=$(tree_ticks "$CURRENT_SID"); t0=$(now_ms)
    if run_wrk "$DURATION" "$url" "$wout" && parse_wrk "$wout" "$name"; then
        snap1=$(cpu_snapshot); ticks1=$(tree_ticks "$CURRENT_SID"); t1=$(now_ms)
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
    session_alive "$CURRENT_SID" || NOTE[$name]+="server died during the run; "

    stop_session "$CURRENT_SID" "$stopsig"; CURRENT_SID=""
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
    command -v "$GUNICORN" >/dev/null 2>&1 || { skip gunicorn "$GUNICORN not found"; return; }
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

# --------------------------------------------------------------------------
# Main.
# --------------------------------------------------------------------------
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do
    case $s in m0serve|uwsgi|gunicorn|nginx) ;; *) die "unknown server in --servers: $s" ;; esac
done

ver() { local v; v=$(timeout 5 "$@" 2>&1 | head -n1) || true; printf '%s\n' "${v:-unknown}"; }
CPU_MODEL=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
HOST_INFO="${CPU_MODEL:-unknown CPU}, $NCPU CPUs, Linux $(uname -r)"
declare -A VERSION
VERSION[m0serve]="git $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no commit)')"
if [[ -n $(git -C "$REPO_ROOT" status --porcelain -- src include Makefile 2>/dev/null) ]]; then
    VERSION[m0serve]+=" + uncommitted changes"
fi
if command -v "$UWSGI" >/dev/null 2>&1; then VERSION[uwsgi]="uWSGI $(ver "$UWSGI" --version)"; fi
if command -v "$GUNICORN" >/dev/null 2>&1; then VERSION[gunicorn]=$(ver "$GUNICORN" --version); fi
if command -v "$NGINX" >/dev/null 2>&1; then VERSION[nginx]=$(ver "$NGINX" -v); fi
WRK_VERSION=$(ver "$WRK" -v)
PY_VERSION=$(ver "$PYTHON" --version)

printf 'm0serve hello-world benchmark\n'
printf 'host: %s\n' "$HOST_INFO"
printf 'topology: server on CPU %s, wrk on CPU %s; wrk -t%s -c%s -d%ss --latency (warm-up %ss)\n' \
    "$SERVER_CPU" "$CLIENT_CPU" "$THREADS" "$CONNECTIONS" "$DURATION" "$WARMUP"

# Background load on the two cores (1 s sample): anything else running on
# the machine skews the numbers, so say so up front.
snap0=$(cpu_snapshot); sleep 1; snap1=$(cpu_snapshot)
IDLE_SERVER=$(cpu_busy "$snap0" "$snap1" "$SERVER_CPU")
IDLE_CLIENT=$(cpu_busy "$snap0" "$snap1" "$CLIENT_CPU")
BACKGROUND="CPU $SERVER_CPU ${IDLE_SERVER}% busy, CPU $CLIENT_CPU ${IDLE_CLIENT}% busy before the runs"
printf 'background load: %s\n' "$BACKGROUND"
for b in "$IDLE_SERVER" "$IDLE_CLIENT"; do
    if [[ $b =~ ^[0-9]+$ ]] && ((b >= 10)); then
        printf 'run.sh: warning: the machine is not idle; results will be noisy\n' >&2
        BACKGROUND+=" (machine not idle: results are noisy)"
        break
    fi
done

for s in "${ORDER[@]}"; do
    "run_$s"
done

if [[ -n $LOG_DIR ]]; then
    mkdir -p "$LOG_DIR"
    cp -r "$TMP"/. "$LOG_DIR"/
fi

# ---- report ---------------------------------------------------------------
cell() { local v=${1:-}; printf '%s' "${v:--}"; }

ratio() {   # ratio PEER -> "1.23" or "n/a (...)"
    local peer=$1
    if [[ ${STATUS[m0serve]:-} != ok ]]; then printf 'n/a (m0serve not measured)'; return; fi
    if [[ ${STATUS[$peer]:-} != ok ]]; then printf 'n/a (%s not measured)' "$peer"; return; fi
    awk -v a="${RPS[m0serve]}" -v b="${RPS[$peer]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'
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
    if [[ " ${ORDER[*]} " == *" $p "* ]]; then printf '  m0/%-9s %s\n' "$p" "$(ratio "$p")"; fi
done

notes=0
for s in "${ORDER[@]}"; do
    if [[ -n ${NOTE[$s]:-} ]]; then
        ((notes++)) || printf '\nnotes:\n'
        printf '  %s: %s\n' "$s" "${NOTE[$s]%; }"
    fi
done

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

if [[ -n $MARKDOWN ]]; then
    mkdir -p "$(dirname -- "$MARKDOWN")"
    # shellcheck disable=SC2016  # backticks are markdown, not expansions
    {
        printf '# m0serve hello-world benchmark\n\n'
        printf -- '- date: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
        printf -- '- host: %s\n' "$HOST_INFO"
        printf -- '- topology: server pinned to CPU %s, wrk pinned to CPU %s, 127.0.0.1\n' "$SERVER_CPU" "$CLIENT_CPU"
        printf -- '- load: `wrk -t%s -c%s -d%ss --latency`, after a %ss warm-up\n' "$THREADS" "$CONNECTIONS" "$DURATION" "$WARMUP"
        printf -- '- app: `bench/hello.py` (13-byte text/plain body); nginx: `return 200 "%s"`\n' "$EXPECTED_BODY"
        printf -- '- tools: %s; %s\n' "$WRK_VERSION" "$PY_VERSION"
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
            if [[ " ${ORDER[*]} " == *" $p "* ]]; then printf '| m0serve / %s | %s |\n' "$p" "$(ratio "$p")"; fi
        done
        if ((notes)); then
            printf '\nNotes:\n\n'
            for s in "${ORDER[@]}"; do
                if [[ -n ${NOTE[$s]:-} ]]; then printf -- '- %s: %s\n' "$s" "${NOTE[$s]%; }"; fi
            done
        fi
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
    } >"$MARKDOWN"
    printf 'markdown report: %s\n' "$MARKDOWN"
fi
