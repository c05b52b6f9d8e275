#!/usr/bin/env bash
# bench/grip.sh — django-eventstream streams (issue 19), the same project
# (bench/grip_django.py) held four ways:
#
#   m0serve   one worker, --grip-key-file/--grip-control: the events view
#             answers Grip-Hold: stream and m0serve holds it (no Python per
#             stream); send_event publishes over EPCP to the control port
#   pushpin   Debian's Pushpin (its runner: condure, pushpin-proxy,
#             pushpin-handler) on loopback ports in a temp dir, its route to
#             gunicorn (1 worker, gthread); send_event publishes to Pushpin's
#             control port
#   gunicorn  django-eventstream alone, no GRIP: 1 worker, gthread with a
#             thread per stream
#   uvicorn   django-eventstream alone under ASGI: 1 worker, a coroutine per
#             stream
#
# For each, STREAMS (default "1000"; "1000 10000" for both) SSE streams are
# opened by bench/hold_client.c; memory per held stream is the growth of the
# summed RSS of every process of the setup (Pushpin's and gunicorn's for
# pushpin) from before the streams to while they are held, over the
# streams; then EVENTS events are published through GET /publish?seq=K (a
# view calling send_event) and every delivery is timed from the publish
# time the view put in the event: p99 over all (event, stream) deliveries.
#
# Usage: bench/grip.sh [--markdown FILE]
# Knobs: STREAMS, EVENTS (20), INTERVAL (0.5 s), BATCH (256), SERVER_CPU (0),
# CLIENT_CPU (1), M0SERVE, BENCH_VENV (.venv-bench), PUSHPIN (pushpin).
set -euo pipefail
PROG=grip.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$SCRIPT_DIR/common.sh"
cd "$REPO_ROOT"

STREAMS=${STREAMS:-1000}
EVENTS=${EVENTS:-20}
INTERVAL=${INTERVAL:-0.5}
BATCH=${BATCH:-256}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
M0SERVE=${M0SERVE:-$REPO_ROOT/m0serve}
BENCH_VENV=${BENCH_VENV:-$REPO_ROOT/.venv-bench}
PUSHPIN=${PUSHPIN:-pushpin}
MARKDOWN=""
if [[ ${1:-} == --markdown ]]; then MARKDOWN=$2; fi
PY=$BENCH_VENV/bin/python
PYTHON=${PYTHON:-/usr/bin/python3}
"$PY" -c 'import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ("django_eventstream", "django_grip", "gunicorn", "uvicorn")))' 2>/dev/null ||
    die "django-eventstream, django-grip, gunicorn or uvicorn missing in $BENCH_VENV (make bench-venv)"
[[ -x $M0SERVE ]] || die "no m0serve at $M0SERVE (make)"

TMP=$(mktemp -d /tmp/m0grip.XXXXXX)
common_traps
[[ -z ${LOGS:-} ]] || { COPY_LOGS_ON_EXIT=1; LOG_DIR=$LOGS; }    # LOGS=DIR keeps the logs
max=0
for n in $STREAMS; do ((n > max)) && max=$n; done
raise_nofile $((max + 1024))
((SOFT >= max + 200)) || die "$FD_NOTE: too low for $max streams"
build_bench_tools || die "cannot build bench/hold_client.c"

KEY=bench-grip-key-0123456789abcdef-0123456789
printf '%s\n' "$KEY" >"$TMP/grip.key"
chmod 600 "$TMP/grip.key"
export GRIPBENCH_DB=$TMP/db.sqlite3 PYTHONPATH=$REPO_ROOT/bench PYTHONWARNINGS=ignore
"$PY" -c 'import grip_django; from django.core.management import call_command; call_command("migrate", verbosity=0)'

# rss_kb SID...: the summed VmRSS of every process of the sessions.
rss_kb() {
    local sid p total=0 v
    for sid in "$@"; do
        for p in $(session_pids "$sid"); do
            v=$(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status" 2>/dev/null) || v=0
            total=$((total + ${v:-0}))
        done
    done
    printf '%s\n' "$total"
}

# established PORT: connections the server side of PORT has established.
established() { ss -Htn state established "( sport = :$1 )" 2>/dev/null | wc -l; }

# measure NAME PORT N SID...: open N streams on /events/, then the RSS growth
# and the delivery p99 of EVENTS published events. Prints "kb_per_stream
# p99_ms opened deliveries".
measure() {
    local name=$1 port=$2 n=$3; shift 3
    local before during out
    curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$port/events/" --max-time 1 || true  # warm the imports
    sleep 1
    before=$(rss_kb "$@")
    taskset -c "$CLIENT_CPU" "$HOLD_CLIENT" --port "$port" -n "$n" --path /events/ --batch "$BATCH" \
        --publish-path /publish --events "$EVENTS" --interval "$INTERVAL" --settle 4 --drain 2 \
        >"$TMP/$name-$n.json" 2>"$TMP/$name-$n.err" &
    local cpid=$! deadline=$((SECONDS + 120))
    while (($(established "$port") < n)) && ((SECONDS < deadline)) && kill -0 "$cpid" 2>/dev/null; do sleep 0.2; done
    sleep 1
    during=$(rss_kb "$@")
    wait "$cpid" || true
    out=$(cat "$TMP/$name-$n.json")
    local opened p99 del
    opened=$(sed -n 's/.*"opened": \([0-9]*\).*/\1/p' <<<"$out")
    p99=$(sed -n 's/.*"latency_ms": {[^}]*"p99": \([0-9.]*\).*/\1/p' <<<"$out")
    del=$(sed -n 's/.*"deliveries": \([0-9]*\).*/\1/p' <<<"$out")
    [[ -n $opened ]] || { printf '%s: %s: no result: %s\n' "$PROG" "$name" "$(tail -3 "$TMP/$name-$n.err")" >&2; opened=0; }
    local per
    per=$(awk -v a="$before" -v b="$during" -v n="${opened:-0}" 'BEGIN { printf "%.1f", (n > 0 ? (b - a) / n : 0) }')
    printf '%s %s %s %s\n' "$per" "${p99:--}" "${opened:-0}" "${del:-0}"
}

GUNICORN=$BENCH_VENV/bin/gunicorn
UVICORN=$BENCH_VENV/bin/uvicorn
declare -A PER P99 OPENED DELIV NOTE

run_m0serve() {
    local n=$1 port cport
    port=$(free_port); cport=$(free_port)
    start_server m0serve TERM "$SERVER_CPU" "$TMP/m0serve.log" env VIRTUAL_ENV="$BENCH_VENV" \
        GRIPBENCH_GRIP_URL="http://127.0.0.1:$cport?iss=pushpin&key=$KEY" "$M0SERVE" grip_django:application \
        --app-dir bench --bind "127.0.0.1:$port" --workers 1 --grip-key-file "$TMP/grip.key" \
        --grip-control "127.0.0.1:$cport" --max-connections $((n + 512))
    wait_http "http://127.0.0.1:$port/" 30 || { NOTE[m0serve]="did not start: $(tail -2 "$TMP/m0serve.log")"; stop_server; return; }
    read -r "PER[m0serve,$n]" "P99[m0serve,$n]" "OPENED[m0serve,$n]" "DELIV[m0serve,$n]" < <(measure m0serve "$port" "$n" "$SERVER_SID")
    stop_server
}

run_gunicorn() {   # run_gunicorn N: django-eventstream alone, a thread per stream
    local n=$1 port
    port=$(free_port)
    start_server gunicorn TERM "$SERVER_CPU" "$TMP/gunicorn.log" "$GUNICORN" --workers 1 --worker-class gthread \
        --threads $((n + 64)) --bind "127.0.0.1:$port" --chdir bench --log-level warning --timeout 600 \
        grip_django:application
    wait_http "http://127.0.0.1:$port/" 30 || { NOTE[gunicorn]="did not start: $(tail -2 "$TMP/gunicorn.log")"; stop_server; return; }
    # Without GRIP, django-eventstream 5's events view is an asynchronous
    # iterator: under WSGI Django consumes it whole before sending anything.
    # A stream that has sent nothing in 3 s is not measured.
    if [[ -z $(curl -sN --max-time 3 "http://127.0.0.1:$port/events/" 2>/dev/null | head -c 1) ]]; then
        local why=""
        grep -q 'must consume asynchronous iterators' "$TMP/gunicorn.log" && why=" (Django: \"StreamingHttpResponse must consume asynchronous iterators in order to serve them synchronously\": under WSGI the whole event stream is collected before any of it is sent; django-eventstream 5 without GRIP needs ASGI)"
        NOTE[gunicorn]="no stream: nothing reached the client in 3 s$why"
        stop_server
        return
    fi
    read -r "PER[gunicorn,$n]" "P99[gunicorn,$n]" "OPENED[gunicorn,$n]" "DELIV[gunicorn,$n]" < <(measure gunicorn "$port" "$n" "$SERVER_SID")
    stop_server
}

run_uvicorn() {
    local n=$1 port
    port=$(free_port)
    start_server uvicorn TERM "$SERVER_CPU" "$TMP/uvicorn.log" env GRIPBENCH_ASGI=1 "$UVICORN" --workers 1 \
        --host 127.0.0.1 --port "$port" --app-dir bench --log-level warning --no-access-log \
        --limit-concurrency $((n + 512)) --backlog 4096 grip_django:application
    wait_http "http://127.0.0.1:$port/" 30 || { NOTE[uvicorn]="did not start: $(tail -2 "$TMP/uvicorn.log")"; stop_server; return; }
    read -r "PER[uvicorn,$n]" "P99[uvicorn,$n]" "OPENED[uvicorn,$n]" "DELIV[uvicorn,$n]" < <(measure uvicorn "$port" "$n" "$SERVER_SID")
    stop_server
}

# Pushpin on loopback only: every port it binds is given here (127.0.0.1),
# its run, log and IPC files in $TMP/pushpin; the route to gunicorn.
run_pushpin() {
    local n=$1 port cport gport p1 p2 p3 d=$TMP/pushpin
    command -v "$PUSHPIN" >/dev/null || { NOTE[pushpin]="not installed (apt-get install pushpin)"; return; }
    port=$(free_port); cport=$(free_port); gport=$(free_port); p1=$(free_port); p2=$(free_port); p3=$(free_port)
    mkdir -p "$d/run" "$d/log"
    printf '* 127.0.0.1:%s\n' "$gport" >"$d/routes"
    # Its origin requests go through zurl: started by the runner, its
    # sockets in the run dir (Debian's internal.conf names /var/run/zurl).
    sed -e 's|ipc:///var/run/zurl/zurl-|ipc://{rundir}/{ipc_prefix}zurl-|' /usr/lib/pushpin/internal.conf >"$d/internal.conf"
    sed -e "s|^include=.*|include=$d/internal.conf|" -e "s|^rundir=.*|rundir=$d/run|" \
        -e "s|^services=.*|services=condure,zurl,pushpin-proxy,pushpin-handler|" \
        -e "s|^logdir=.*|logdir=$d/log|" -e "s|^http_port=.*|http_port=127.0.0.1:$port|" \
        -e "s|^routesfile=.*|routesfile=$d/routes|" -e "s|^sig_key=.*|sig_key=$KEY|" \
        -e "s|^push_in_spec=.*|push_in_spec=tcp://127.0.0.1:$p1|" \
        -e "s|^push_in_sub_specs=.*|push_in_sub_specs=tcp://127.0.0.1:$p2|" \
        -e "s|^push_in_http_addr=.*|push_in_http_addr=127.0.0.1|" \
        -e "s|^push_in_http_port=.*|push_in_http_port=$cport|" \
        -e "s|^command_spec=tcp.*|command_spec=tcp://127.0.0.1:$p3|" \
        -e "s|^client_maxconn=.*|client_maxconn=$((n + 1024))|" \
        /etc/pushpin/pushpin.conf >"$d/pushpin.conf"
    start_server gunicorn TERM "$SERVER_CPU" "$TMP/pp-gunicorn.log" env \
        GRIPBENCH_GRIP_URL="http://127.0.0.1:$cport?iss=pushpin&key=$KEY" "$GUNICORN" --workers 1 \
        --worker-class gthread --threads 16 --bind "127.0.0.1:$gport" --chdir bench --log-level warning \
        grip_django:application
    local gsid=$SERVER_SID
    wait_http "http://127.0.0.1:$gport/" 30 || { NOTE[pushpin]="gunicorn did not start"; stop_server; return; }
    start_server pushpin TERM "$SERVER_CPU" "$TMP/pushpin.log" "$PUSHPIN" --config "$d/pushpin.conf" \
        --port "127.0.0.1:$port" --merge-output
    local psid=$SERVER_SID
    if ! wait_http "http://127.0.0.1:$port/" 30; then
        NOTE[pushpin]="did not start: $(tail -3 "$TMP/pushpin.log" | tr '\n' ' ')"
    else
        # Loopback only: nothing of Pushpin's listens beyond 127.0.0.1.
        local wide
        wide=$(ss -Htlnp 2>/dev/null | grep -E 'pushpin|condure|zurl' | awk '{print $4}' | grep -v '^127\.0\.0\.1:' || true)
        [[ -z $wide ]] || NOTE[pushpin]="WARNING: Pushpin listened on $wide"
        read -r "PER[pushpin,$n]" "P99[pushpin,$n]" "OPENED[pushpin,$n]" "DELIV[pushpin,$n]" < <(measure pushpin "$port" "$n" "$psid" "$gsid")
    fi
    stop_server
    SERVER_SID=$gsid
    stop_server
}

for n in $STREAMS; do
    for s in ${SETUPS:-m0serve pushpin gunicorn uvicorn}; do
        printf '%s: %s, %s streams\n' "$PROG" "$s" "$n" >&2
        "run_$s" "$n"
    done
done

{
    printf '| setup (1 worker, server CPU %s, client CPU %s) | streams | held | RSS per held stream (KiB) | publish → delivery p99 (ms) | deliveries |\n' "$SERVER_CPU" "$CLIENT_CPU"
    printf '|---|---:|---:|---:|---:|---:|\n'
    for n in $STREAMS; do
        for s in ${SETUPS:-m0serve pushpin gunicorn uvicorn}; do
            case $s in
                m0serve) label="m0serve --grip-key-file, django-eventstream (Grip-Hold: stream)" ;;
                pushpin) label="Pushpin $("$PUSHPIN" --version 2>/dev/null | awk '{print $2}') + gunicorn gthread, django-eventstream" ;;
                gunicorn) label="gunicorn gthread, django-eventstream alone (a thread per stream)" ;;
                uvicorn) label="uvicorn, django-eventstream alone (ASGI)" ;;
            esac
            printf '| %s | %s | %s | %s | %s | %s |\n' "$label" "$n" "$(cell "${OPENED[$s,$n]:-}")" \
                "$(cell "${PER[$s,$n]:-}")" "$(cell "${P99[$s,$n]:-}")" "$(cell "${DELIV[$s,$n]:-}")"
        done
    done
    for s in "${!NOTE[@]}"; do printf '\n%s: %s\n' "$s" "${NOTE[$s]}"; done
    printf '\nVersions: %s; gunicorn %s, uvicorn %s, django-eventstream %s, Django %s.\n' "$("$M0SERVE" --version 2>&1 | head -1)" \
        "$("$PY" -c 'import gunicorn; print(gunicorn.__version__)')" "$("$PY" -c 'import uvicorn; print(uvicorn.__version__)')" \
        "$("$PY" -c 'import importlib.metadata as m; print(m.version("django-eventstream"))')" \
        "$("$PY" -c 'import django; print(django.get_version())')"
} | tee "$TMP/table.md"
[[ -z $MARKDOWN ]] || cp "$TMP/table.md" "$MARKDOWN"
