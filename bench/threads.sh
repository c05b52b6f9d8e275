#!/usr/bin/env bash
# bench/threads.sh — Python in parallel in one worker (issue 17): a CPU-bound
# pure-Python view (fixed work, ≈5 ms on the GIL build: bench/cpu_view.py) and a Django view
# (bench/django_hello.py) served by one loop with --blocking-threads 1 and 2
# and by two loops (--threads 2, one handler thread each)
# on the free-threaded build, and by --workers 1 and --workers 2 on the GIL
# build of the same CPython (make python-ft, make python-gil). wrk, -c 4, for
# --duration seconds per row; RSS is the sum over the master and its workers
# after the row. With --rss N: N Django requests on each build, worker RSS
# sampled along the way.
#
#   bash bench/threads.sh [--duration S] [--rss N] [--markdown FILE]
#
# Needs build/venv-threads (make smoke-threads) and build/venv-threads-gil
# (made here from requirements/threads.txt with the GIL build's python).
# On a 2-core machine the client cannot have a core of its own: the server
# is not pinned, wrk shares the cores (said in the report).
set -euo pipefail
PROG=threads.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd -- "$SCRIPT_DIR/.." && pwd)
DURATION=8 RSS_N=0 MARKDOWN=
while (($#)); do
    case $1 in
        --duration) DURATION=$2; shift 2 ;;
        --rss) RSS_N=$2; shift 2 ;;
        --markdown) MARKDOWN=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "$PROG: unknown argument: $1" >&2; exit 2 ;;
    esac
done
[[ $DURATION =~ ^[0-9]+$ && $RSS_N =~ ^[0-9]+$ ]] || { echo "$PROG: --duration and --rss take integers" >&2; exit 2; }
cd "$REPO"
FTPY=$(cat build/python/ft.python 2>/dev/null) || { echo "$PROG: no build/python/ft.python: make python-ft" >&2; exit 2; }
GILPY=$(cat build/python/gil.python 2>/dev/null) || { echo "$PROG: no build/python/gil.python: make python-gil" >&2; exit 2; }
tag() { "$1" tools/pyinfo.py "$1" | awk '{print $6}'; }
make -s -j2 PYTHON="$FTPY" "build/release-$(tag "$FTPY")/m0serve" >/dev/null
make -s -j2 PYTHON="$GILPY" "build/release-$(tag "$GILPY")/m0serve" >/dev/null
FTBIN=$REPO/build/release-$(tag "$FTPY")/m0serve
GILBIN=$REPO/build/release-$(tag "$GILPY")/m0serve
FTVENV=$REPO/build/venv-threads GILVENV=$REPO/build/venv-threads-gil
[[ -x $FTVENV/bin/python ]] || { echo "$PROG: no $FTVENV: make smoke-threads" >&2; exit 2; }
if [[ ! -x $GILVENV/bin/python ]]; then
    "$GILPY" -m venv "$GILVENV" && "$GILVENV/bin/python" -m pip install -q --disable-pip-version-check -r requirements/threads.txt
fi
GRVENV=$REPO/build/venv-threads-granian
if [[ ! -x $GRVENV/bin/granian ]]; then
    "$FTPY" -m venv "$GRVENV" && "$GRVENV/bin/python" -m pip install -q --disable-pip-version-check \
        -r requirements/threads-bench.txt || echo "$PROG: Granian does not install for $FTPY: its row is left out" >&2
fi
TMP=$(mktemp -d)
SID=
cleanup() { [[ -z $SID ]] || { kill -TERM -- "-$SID" 2>/dev/null; wait "$SID" 2>/dev/null; }; rm -rf "$TMP"; }
trap cleanup EXIT

# start BIN VENV APP ARGS...: a server on a kernel-chosen port; sets SID, PORT.
start() {
    local bin=$1 venv=$2 app=$3; shift 3
    setsid env VIRTUAL_ENV="$venv" "$bin" "$app" --app-dir "$REPO/bench" --bind 127.0.0.1:0 \
        "$@" >"$TMP/out" 2>"$TMP/err" </dev/null &
    SID=$!
    local i
    for ((i = 0; i < 300; i++)); do
        PORT=$(sed -nE 's/.*listening on http:\/\/127\.0\.0\.1:([0-9]+).*/\1/p' "$TMP/err" | head -n 1)
        [[ -n $PORT ]] && curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/" && return 0
        sleep 0.1
    done
    echo "$PROG: server did not start: $(cat "$TMP/err")" >&2; exit 1
}
# start_granian APP ARGS...: Granian (WSGI) on the free-threaded build; sets SID, PORT.
start_granian() {
    local app=$1; shift
    PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (cd "$REPO/bench" && exec setsid "$GRVENV/bin/granian" --interface wsgi --host 127.0.0.1 --port "$PORT" \
        --no-ws "$@" "$app" >"$TMP/out" 2>"$TMP/err" </dev/null) &
    SID=$!
    local i
    for ((i = 0; i < 300; i++)); do
        curl -s -o /dev/null -m 2 "http://127.0.0.1:$PORT/" && return 0
        sleep 0.1
    done
    echo "$PROG: granian did not start: $(cat "$TMP/err")" >&2; exit 1
}
stop() { kill -TERM -- "-$SID" 2>/dev/null || true; wait "$SID" 2>/dev/null || true; SID=; }
rss_kb() {   # the master and every process of the session
    ps -e -o sid=,rss= | awk -v s="$SID" '$1 == s {t += $2} END {print t + 0}'
}
worker_rss_kb() { ps -e -o sid=,pid=,rss= | awk -v s="$SID" '$1 == s && $2 != s {t += $3} END {print t + 0}'; }
cpu_ticks() {   # utime + stime of every process of the session (clock ticks)
    local p t=0
    for p in $(ps -e -o sid=,pid= | awk -v s="$SID" '$1 == s {print $2}'); do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
    done
    echo "$t"
}
rps() { wrk -t1 -c4 -d"${DURATION}s" "http://127.0.0.1:$PORT$1" | awk '/Requests\/sec/ {print $2}'; }

rows=()
row() {   # row LABEL BIN VENV ARGS... (BIN "granian": Granian with ARGS)
    local label=$1 bin=$2 venv=$3; shift 3
    if [[ $bin == granian ]]; then start_granian cpu_view:application "$@"; else start "$bin" "$venv" cpu_view:application "$@"; fi
    wrk -t1 -c4 -d2s "http://127.0.0.1:$PORT/?n=100000" >/dev/null
    local c0; c0=$(cpu_ticks)
    local cpu; cpu=$(rps "/?n=100000")
    local t1; t1=$(( $(cpu_ticks) - c0 ))
    local r1; r1=$(rss_kb)
    stop
    if [[ $bin == granian ]]; then start_granian django_hello:application "$@"; else start "$bin" "$venv" django_hello:application "$@"; fi
    wrk -t1 -c4 -d2s "http://127.0.0.1:$PORT/" >/dev/null
    c0=$(cpu_ticks)
    local dj; dj=$(rps "/")
    local t2; t2=$(( $(cpu_ticks) - c0 ))
    local r2; r2=$(rss_kb)
    stop
    local hz; hz=$(getconf CLK_TCK)
    # server CPU: % of one core over the run, and ms per request
    local u1 u2 m1 m2
    u1=$(awk -v t="$t1" -v h="$hz" -v d="$DURATION" 'BEGIN {printf "%d%%", t * 100 / h / d}')
    u2=$(awk -v t="$t2" -v h="$hz" -v d="$DURATION" 'BEGIN {printf "%d%%", t * 100 / h / d}')
    m1=$(awk -v t="$t1" -v h="$hz" -v d="$DURATION" -v r="$cpu" 'BEGIN {printf "%.2f", t * 1000 / h / (r * d)}')
    m2=$(awk -v t="$t2" -v h="$hz" -v d="$DURATION" -v r="$dj" 'BEGIN {printf "%.3f", t * 1000 / h / (r * d)}')
    rows+=("| $label | $cpu | $u1, $m1 ms | $dj | $u2, $m2 ms | $((r1 / 1024)) | $((r2 / 1024)) |")
    echo "${rows[-1]}"
}
echo "| server | CPU view (req/s) | server CPU: % of a core, per request | Django (req/s) | server CPU: % of a core, per request | RSS, CPU run (MiB) | RSS, Django run (MiB) |"
echo "|---|---|---|---|---|---|---|"
row "free-threaded, 1 worker, --blocking-threads 1" "$FTBIN" "$FTVENV" --workers 1 --blocking-threads 1
row "free-threaded, 1 worker, --blocking-threads 2" "$FTBIN" "$FTVENV" --workers 1 --blocking-threads 2
row "free-threaded, 1 worker, --threads 2 --blocking-threads 1" "$FTBIN" "$FTVENV" --workers 1 --threads 2 --blocking-threads 1
[[ -x $GRVENV/bin/granian ]] && row "Granian 2.7.9 free-threaded, --workers 2 (threads) --blocking-threads 1" granian "" --workers 2 --blocking-threads 1
row "GIL (same version), --workers 1 --blocking-threads 1" "$GILBIN" "$GILVENV" --workers 1 --blocking-threads 1
row "GIL (same version), --workers 1 --blocking-threads 2" "$GILBIN" "$GILVENV" --workers 1 --blocking-threads 2
row "GIL (same version), --workers 2 --blocking-threads 1" "$GILBIN" "$GILVENV" --workers 2 --blocking-threads 1

if ((RSS_N > 0)); then
    for which in ft gil; do
        if [[ $which == ft ]]; then bin=$FTBIN venv=$FTVENV; else bin=$GILBIN venv=$GILVENV; fi
        start "$bin" "$venv" django_hello:application --workers 1 --blocking-threads 2
        done_n=0 samples=""
        wrk -t1 -c4 -d1s "http://127.0.0.1:$PORT/" >/dev/null
        first=$(worker_rss_kb)
        while ((done_n < RSS_N)); do
            n=$(wrk -t1 -c4 -d3s "http://127.0.0.1:$PORT/" | awk '/requests in/ {print $1}')
            done_n=$((done_n + n))
            samples+=" $((done_n / 1000))k:$(worker_rss_kb)"
        done
        echo "RSS $which: worker $first kB after warm-up; after N requests (kB):$samples"
        stop
    done
fi
