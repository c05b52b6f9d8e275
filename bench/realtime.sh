#!/usr/bin/env bash
# bench/realtime.sh — held SSE streams: memory per stream and publish->delivery
# latency, m0serve --realtime (WSGI and ASGI apps) vs uvicorn, Granian and
# hypercorn (raw ASGI), and the floor: a bare C loop that send()s each event
# to as many sockets (bench/fanout_floor.c).
#
# For each server and each stream count (1,000 and 10,000; --quick: 1,000;
# --streams 100000 for the issue-20 run)
# a fresh server is started pinned to SERVER_CPU (default 0), with 1 worker:
#   m0serve rt_app:application --realtime --workers 1 --blocking-threads 2
#   m0serve asgi_rt_app:app --realtime --workers 1      (m0serve-asgi)
#   .venv-bench/bin/python -m uvicorn --app-dir bench asgi_sse:app --workers 1
#       --loop uvloop --http httptools --no-access-log
#   .venv-bench/bin/granian --interface asgi --workers 1 --loop uvloop ... asgi_sse:app
#   .venv-bench/bin/hypercorn --workers 1 --worker-class uvloop ... bench/asgi_sse:app
#   build/bench/fanout_floor --port PORT -n N --events 20 --interval 0.2   (floor)
# and a client pinned to CLIENT_CPU (default 1) opens N idle streams, reads
# the worker's VmRSS before/after, then publishes 20 events 200 ms apart
# through the app's /publish route and timestamps every delivery: the Python
# bench/sse_hold.py up to 10,000 streams, the C epoll client
# build/bench/hold_client past that (--client), which also takes the
# worker's CPU per delivered event and, with --churn, connects and
# disconnects at a rate while the streams are held.  See bench/README.md.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/realtime.sh [options]

Options:
  --quick            1,000 streams only (default: 1,000 and 10,000)
  --streams LIST     comma-separated stream counts (default 1000,10000)
  --servers LIST     comma-separated subset/order of:
                     m0serve,m0serve-asgi,uvicorn,granian,hypercorn,floor
                     (default all but floor)
  --client KIND      py (bench/sse_hold.py), c (build/bench/hold_client) or
                     auto (default: c past 10,000 streams and for floor)
  --churn RATE       with the C client: after the events, RATE disconnects
                     and RATE connects a second for CHURN_SECONDS while the
                     streams are held (ABRUPT of them RSTs); RSS and the
                     worker's descriptors before and after
  --markdown FILE    also write the results as a markdown report to FILE
  --log-dir DIR      keep server logs and the raw client JSON in DIR
  -h, --help         show this help

Environment:
  EVENTS=20                events published per run
  INTERVAL=0.2             seconds between events
  BLOCKING_THREADS=2       m0serve --blocking-threads
  SERVER_CPU=0 CLIENT_CPU=1 STARTUP_TIMEOUT=15
  CLIENT_TIMEOUT=240       bound on one client run (seconds)
  NOFILE=max(65536, N+4096) soft `ulimit -n` wanted (capped at the hard limit
                           unless the hard limit can be raised); a count the
                           limit cannot hold is run capped at the limit - 512
  CHURN_SECONDS=10 ABRUPT=0.5  churn length, fraction of abrupt (RST) closes
  SOURCES=8 BATCH=512      C client: 127.0.0.x source addresses, connects in flight
  FLOOR_ARGS=""            extra words for bench/fanout_floor (e.g. --uring: the
                           passes through io_uring instead of one send() each)
  M0SERVE=./m0serve PYTHON=/usr/bin/python3 (runs the client)
  BENCH_VENV=.venv-bench   venv with uvicorn, uvloop, httptools, granian, hypercorn
                           (make bench-venv); uvicorn runs as $BENCH_VENV/bin/python -m
                           uvicorn; m0serve-asgi runs with VIRTUAL_ENV set to it (uvloop)
EOF
}

PROG=realtime.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

EVENTS=${EVENTS:-20}
INTERVAL=${INTERVAL:-0.2}
BLOCKING_THREADS=${BLOCKING_THREADS:-2}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-15}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-240}
NOFILE=${NOFILE:-}
CHURN_SECONDS=${CHURN_SECONDS:-10}
ABRUPT=${ABRUPT:-0.5}
SOURCES=${SOURCES:-8}
BATCH=${BATCH:-512}
PYTHON=${PYTHON:-/usr/bin/python3}
read -r -a FLOOR_EXTRA <<<"${FLOOR_ARGS:-}"
STREAMS=1000,10000
SERVERS=m0serve,m0serve-asgi,uvicorn,granian,hypercorn
CLIENT=auto
CHURN=0
MARKDOWN=""
LOG_DIR=""

while (($#)); do
    case $1 in
        --quick) STREAMS=1000; SHIFT=1 ;;
        --streams|--streams=*) take_value STREAMS "a LIST" "$@" ;;
        --client|--client=*) take_value CLIENT "py, c or auto" "$@" ;;
        --churn|--churn=*) take_value CHURN "a RATE" "$@" ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done

check_uints EVENTS BLOCKING_THREADS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT CLIENT_TIMEOUT CHURN CHURN_SECONDS SOURCES BATCH
[[ -z $NOFILE ]] || check_uints NOFILE
[[ $INTERVAL =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "INTERVAL must be a number"
[[ $ABRUPT =~ ^(0(\.[0-9]+)?|1(\.0*)?)$ ]] || die "ABRUPT must be a fraction between 0 and 1"
case $CLIENT in py|c|auto) ;; *) die "--client must be py, c or auto, not $CLIENT" ;; esac
IFS=, read -r -a COUNTS <<<"$STREAMS"
for n in "${COUNTS[@]}"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "bad stream count: $n"; done
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do case $s in m0serve|m0serve-asgi|uvicorn|granian|hypercorn|floor) ;; *) die "unknown server: $s" ;; esac; done

# client_for NAME N: py or c
client_for() {
    if [[ $1 == floor || $CLIENT == c ]]; then echo c
    elif [[ $CLIENT == py ]]; then echo py
    elif (($2 > 10000)); then echo c
    else echo py; fi
}
NEED_C=0
for s in "${ORDER[@]}"; do for n in "${COUNTS[@]}"; do [[ $(client_for "$s" "$n") == c ]] && NEED_C=1; done; done
((CHURN == 0 || NEED_C)) || printf 'realtime.sh: warning: --churn needs the C client (--client c); no churn in this run\n' >&2

resolve_paths

cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$PYTHON"

if ((NEED_C)); then
    build_bench_tools || die "cannot build the C bench tools (bench/hold_client.c, bench/fanout_floor.c) with ${CC:-cc}"
fi

# ---- file descriptors: both the server and the client hold one per stream.
# Servers and the client are started from this shell, so they inherit it.
MAXN=0
for n in "${COUNTS[@]}"; do ((n > MAXN)) && MAXN=$n; done
if [[ -z $NOFILE ]]; then NOFILE=$((MAXN + 4096 > 65536 ? MAXN + 4096 : 65536)); fi
raise_nofile "$NOFILE"                                # the hard limit needs CAP_SYS_RESOURCE
# What one process can hold: a count above it runs capped (and says so).
FD_CAP=$([[ $SOFT == unlimited ]] && echo 1000000000 || echo $((SOFT - 512)))
if ((MAXN > FD_CAP)); then
    printf 'realtime.sh: warning: ulimit -n is %s (hard %s; raising it needs CAP_SYS_RESOURCE): counts above %s streams run capped at %s\n' \
        "$SOFT" "$HARD" "$FD_CAP" "$FD_CAP" >&2
    FD_NOTE+=" (too low for $MAXN streams: capped at $FD_CAP)"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0rt.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

# ---------------------------------------------------------------------------
declare -A STATUS CMD CLIENTCMD NOTE RES WPID_DESC
NOISY_RUNS=0

server_cmd() {   # server_cmd NAME PORT N -> SCMD, SENV (environment words), STOPSIG
    SENV=()
    # m0serve's slot table is --max-connections (16384 by default) per worker.
    MAXCONN=()
    if (($3 + 1024 > 16384)); then MAXCONN=(--max-connections $(($3 + 1024))); fi
    case $1 in
        m0serve)
            SCMD=("$M0SERVE" rt_app:application --app-dir bench --bind "127.0.0.1:$2" --realtime
                  --workers 1 --blocking-threads "$BLOCKING_THREADS" "${MAXCONN[@]}")
            STOPSIG=TERM ;;
        m0serve-asgi)
            # The executor imports uvloop from the bench venv, as the peers do.
            SENV=("VIRTUAL_ENV=$(cd -- "$BENCH_VENV" 2>/dev/null && pwd)")
            SCMD=("$M0SERVE" asgi_rt_app:app --app-dir bench --bind "127.0.0.1:$2" --realtime --workers 1 "${MAXCONN[@]}")
            STOPSIG=TERM ;;
        floor)
            SCMD=("$FANOUT_FLOOR" --port "$2" -n "$3" --events "$EVENTS" --interval "$INTERVAL" "${FLOOR_EXTRA[@]}")
            STOPSIG=TERM ;;
        uvicorn)
            SCMD=("$BENCH_PY" -m uvicorn --app-dir bench asgi_sse:app --host 127.0.0.1 --port "$2"
                  --workers 1 --loop uvloop --http httptools --no-access-log --log-level warning)
            STOPSIG=TERM ;;
        granian)
            SCMD=("$BENCH_VENV/bin/granian" --interface asgi --host 127.0.0.1 --port "$2" --workers 1
                  --loop uvloop --working-dir bench --log-level warning asgi_sse:app)
            STOPSIG=TERM ;;
        hypercorn)
            SCMD=("$BENCH_VENV/bin/hypercorn" --bind "127.0.0.1:$2" --workers 1 --worker-class uvloop
                  --log-level warning bench/asgi_sse:app)
            STOPSIG=TERM ;;
    esac
}

# worker_pid: the master's only child (m0serve, granian, hypercorn), else the
# server process itself (uvicorn).
worker_pid() {
    local w
    w=$(only_child_or_self "$SERVER_SID")
    if [[ $w != "$SERVER_SID" ]]; then printf '%s child\n' "$w"; else printf '%s self\n' "$SERVER_SID"; fi
}

# summarize JSON [FLOOR_JSON] -> tab-separated fields for the tables
summarize() {
    "$PYTHON" - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
floor = None
if len(sys.argv) > 2:
    try:
        floor = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        floor = {"error": "no report from fanout_floor"}
def f(v, fmt="%.2f"):
    return "-" if v is None else fmt % v
lat = d.get("latency_ms", {})
klat = d.get("kernel_latency_ms", {})
mib = lambda kb: "-" if kb is None else "%.1f" % (kb / 1024.0)
errs = d.get("errors", {})
notes = []
if errs:
    notes.append("client errors: " + ", ".join("%s x%d" % kv for kv in sorted(errs.items())))
pub = d.get("publish", {})
if pub.get("errors"):
    notes.append("publish errors: " + "; ".join(pub["errors"]))
if d.get("streams_missing_events"):
    notes.append("%d streams missed events" % d["streams_missing_events"])
if d.get("streams_lost_during_events"):
    notes.append("%d streams closed during the events" % d["streams_lost_during_events"])
h = d.get("health")
if isinstance(h, dict) and "held_streams" in h and h["held_streams"] != d.get("opened"):
    notes.append("/health held_streams=%s but %s opened" % (h["held_streams"], d.get("opened")))
ch = d.get("churn")
if ch:
    kb = lambda v: "-" if v is None else "%.1f" % (v / 1024.0)
    notes.append("churn %s/s for %ss: %s closed (%s RST), %s reopened, %s failed, %s open after; "
                 "RSS %s -> %s MiB; worker fds %s -> %s" % (
                     ch.get("rate"), ch.get("seconds"), ch.get("closed"), ch.get("closed_abrupt"), ch.get("reopened"),
                     ch.get("failed"), ch.get("open_after"), kb(ch.get("rss_before_kb")), kb(ch.get("rss_after_kb")),
                     ch.get("fds_before"), ch.get("fds_after")))
if floor is not None:
    if "pass_ms" in floor:
        notes.append("floor send() pass over %s sockets: p50 %.2f ms, p99 %.2f ms; %s of %s sends short; %.2f us CPU per send" % (
            floor.get("accepted"), floor["pass_ms"]["p50"], floor["pass_ms"]["p99"], floor.get("failed_sends"),
            floor.get("sends"), floor.get("cpu_us_per_send", 0)))
    else:
        notes.append(floor.get("error", "fanout_floor failed"))
print("\t".join([
    "%d/%d" % (d.get("opened", 0), d.get("requested", 0)),
    mib(d.get("rss_before_kb")), mib(d.get("rss_held_kb")), mib(d.get("rss_after_events_kb")),
    f(d.get("rss_per_stream_bytes"), "%d"),
    f(lat.get("p50")), f(lat.get("p99")), f(lat.get("max")),
    f(klat.get("p50")), f(klat.get("p99")),
    "%d/%d" % (d.get("deliveries", 0), d.get("deliveries_expected", 0)),
    f(d.get("open_seconds")), f(d.get("fanout_span_ms_p50")),
    f(d.get("cpu_us_per_delivery")),
    f(pub.get("request_ms_p50")),
    "; ".join(notes) or "",
]))
PY
}

run_one() {
    local name=$1 n=$2 key="$1/$2" port base slog wp wdesc out cl_sid rc=0 h kind i
    local opened rb rh ra bps p50 p99 mx kp50 kp99 dlv opens span cpu pubms notes
    NOTE[$key]=""
    printf '\n== %s, %s streams\n' "$name" "$n"
    if ((n > FD_CAP)); then
        NOTE[$key]+="ulimit -n $SOFT: run with $FD_CAP of the $n streams; "
        printf '   ulimit -n %s: capped at %s streams\n' "$SOFT" "$FD_CAP"
        n=$FD_CAP
    fi
    if [[ $name == m0serve* && ! -x $M0SERVE ]]; then STATUS[$key]="missing: $M0SERVE (run make)"; printf '   skipped\n'; return; fi
    if [[ $name == uvicorn ]] && ! "$BENCH_PY" -c 'import uvicorn, uvloop, httptools' 2>/dev/null; then
        STATUS[$key]="missing: uvicorn, uvloop, httptools in $BENCH_VENV (run make bench-venv)"; printf '   skipped\n'; return
    fi
    if [[ $name == granian || $name == hypercorn ]] && [[ ! -x $BENCH_VENV/bin/$name ]]; then
        STATUS[$key]="missing: $name in $BENCH_VENV (run make bench-venv)"; printf '   skipped\n'; return
    fi
    kind=$(client_for "$name" "$2")
    port=$(free_port); base="http://127.0.0.1:$port"
    server_cmd "$name" "$port" "$n"
    CMD[$key]="${SENV[*]:+${SENV[*]//$REPO_ROOT/\$PWD} }$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")"
    CMD[$key]=${CMD[$key]//$REPO_ROOT/\$PWD}
    printf '$ %s\n' "${CMD[$key]}"
    slog=$TMP/$name-$n.server.log
    # env(1) execs the server: the session leader is still the server itself.
    start_server "$name" "$STOPSIG" "$SERVER_CPU" "$slog" env "${SENV[@]}" "${SCMD[@]}"
    if [[ $name == floor ]]; then
        # Not HTTP: any probe connection would be one of its N. Wait for the listener.
        for ((i = 0; i < STARTUP_TIMEOUT * 10; i++)); do
            [[ -z $(ss -Htln "sport = :$port" 2>/dev/null) ]] || break
            sleep 0.1
        done
        wp=$SERVER_SID; wdesc=self
    else
        if ! wait_http "$base/ping" "$STARTUP_TIMEOUT"; then
            STATUS[$key]="failed to start"; printf '   failed to start; log:\n'; tail -n 15 "$slog" | sed 's/^/   | /'
            stop_server; return
        fi
        curl -s --max-time 5 -o /dev/null "$base/publish?n=1&seq=-1" || NOTE[$key]+="warm-up publish failed; "
        read -r wp wdesc < <(worker_pid)
    fi
    WPID_DESC[$name]=$([[ $wdesc == child ]] && echo "the master's child (worker)" || echo "the server process")
    out=$TMP/$name-$n.client.json
    local ccmd
    if [[ $kind == py ]]; then
        ccmd=("$PYTHON" bench/sse_hold.py --port "$port" -n "$n" --rss-pid "$wp" --events "$EVENTS" --interval "$INTERVAL")
        if [[ $name == m0serve* ]]; then ccmd+=(--health-path /health); fi
    else
        ccmd=("$HOLD_CLIENT" --port "$port" -n "$n" --rss-pid "$wp" --events "$EVENTS" --sources "$SOURCES" --batch "$BATCH")
        if [[ $name == floor ]]; then
            ccmd+=(--proto raw --no-publish --drain 3)
        else
            ccmd+=(--interval "$INTERVAL")
            if [[ $name == m0serve* ]]; then ccmd+=(--health-path /health); fi
            if ((CHURN > 0)); then ccmd+=(--churn "$CHURN" --churn-seconds "$CHURN_SECONDS" --abrupt "$ABRUPT"); fi
        fi
    fi
    CLIENTCMD[$key]=$(q taskset -c "$CLIENT_CPU" "${ccmd[@]}")
    CLIENTCMD[$key]=${CLIENTCMD[$key]//$REPO_ROOT/\$PWD}
    printf '$ %s\n' "${CLIENTCMD[$key]}"
    noise_begin
    setsid timeout -k 5 "$CLIENT_TIMEOUT" taskset -c "$CLIENT_CPU" "${ccmd[@]}" >"$out" 2>"$TMP/$name-$n.client.err" </dev/null &
    cl_sid=$!; track_session "$cl_sid" TERM
    wait "$cl_sid" || rc=$?
    untrack_session "$cl_sid"
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"
    if noisy; then
        NOTE[$key]+="noisy run: $(noise_desc "$SERVER_CPU" "$CLIENT_CPU"); "
        NOISY_RUNS=$((NOISY_RUNS + 1))
    fi
    if [[ $name == floor ]]; then
        # It reports and exits once the client has hung up.
        for ((i = 0; i < 100; i++)); do session_alive "$SERVER_SID" || break; sleep 0.1; done
    fi
    if ((rc != 0)) || [[ ! -s $out ]]; then
        STATUS[$key]="client failed (exit $rc)"
        printf '   client failed (exit %s):\n' "$rc"; tail -n 10 "$TMP/$name-$n.client.err" | sed 's/^/   | /'
    else
        if [[ $name == floor ]]; then RES[$key]=$(summarize "$out" "$slog"); else RES[$key]=$(summarize "$out"); fi
        STATUS[$key]=ok
        IFS=$'\t' read -r opened rb rh ra bps p50 p99 mx kp50 kp99 dlv opens span cpu pubms notes <<<"${RES[$key]}"
        printf '   opened %s in %s s; RSS %s -> %s MiB (%s after events) = %s B/stream\n   latency (client read) p50 %s ms, p99 %s ms, max %s; (kernel rx) p50 %s ms, p99 %s ms; delivered %s; worker CPU %s us per delivery; /publish answered in %s ms (p50)\n' \
            "$opened" "$opens" "$rb" "$rh" "$ra" "$bps" "$p50" "$p99" "$mx" "$kp50" "$kp99" "$dlv" "$cpu" "$pubms"
        [[ -z $notes ]] || { NOTE[$key]+="$notes; "; printf '   %s\n' "$notes"; }
    fi
    if [[ $name == floor ]]; then
        stop_server
        return
    fi
    # The server must survive the clients going away, and (m0serve) drop them.
    sleep 1
    if ! session_alive "$SERVER_SID"; then
        NOTE[$key]+="server died; "
        printf '   server died; log tail:\n'; tail -n 15 "$slog" | sed 's/^/   | /'
    elif ! curl -sf --max-time 5 -o /dev/null "$base/ping"; then
        NOTE[$key]+="server did not answer /ping after the client left; "
    elif [[ $name == m0serve* ]]; then
        h=$(curl -s --max-time 5 "$base/health" | "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(d.get("held_streams"), d.get("connections"))' 2>/dev/null || true)
        [[ ${h%% *} == 0 ]] || NOTE[$key]+="/health after the client left: held_streams connections = $h; "
    fi
    if grep -qiE 'error|traceback|too many open files' "$slog"; then
        NOTE[$key]+="server log has errors: $(grep -iE 'error|traceback|too many open files' "$slog" | head -n 3 | tr '\n' ' ' | cut -c1-300); "
    fi
    stop_server
    if [[ $STOP_HOW != clean ]]; then NOTE[$key]+="did not exit on SIG$STOPSIG within 5 s ($STOP_HOW); "; fi
}

# ---------------------------------------------------------------------------
host_info
M0_VERSION=$(m0serve_version built)
UVICORN_VERSION=$("$BENCH_PY" -c 'import importlib.metadata as md, sys; print("uvicorn %s (uvloop %s, httptools %s; %s)" % (md.version("uvicorn"), md.version("uvloop"), md.version("httptools"), sys.version.split()[0]))' 2>/dev/null || echo "uvicorn ?")
BENCH_VENV_VERSIONS=$(bench_venv_versions)
printf 'm0serve realtime (held SSE streams) benchmark\nhost: %s\n' "$HOST_INFO"
printf 'm0serve: %s; %s\n' "$M0_VERSION" "$UVICORN_VERSION"
printf 'bench venv %s\n' "$BENCH_VENV_VERSIONS"
printf 'topology: server on CPU %s (1 worker), client (bench/sse_hold.py or build/bench/hold_client, --client %s) on CPU %s; %s events %ss apart per run\n' \
    "$SERVER_CPU" "$CLIENT" "$CLIENT_CPU" "$EVENTS" "$INTERVAL"
printf '%s\n' "$FD_NOTE"
background_load "$SERVER_CPU" "$CLIENT_CPU"

for s in "${ORDER[@]}"; do
    for n in "${COUNTS[@]}"; do run_one "$s" "$n"; done
done

# ---- report ---------------------------------------------------------------
field() {   # field KEY INDEX (0-based)
    local -a f
    IFS=$'\t' read -r -a f <<<"${RES[$1]:-}"
    printf '%s' "${f[$2]:--}"
}
row() {     # row KEY: ROW = the 14 table fields of RES[KEY]
    local i
    ROW=()
    for ((i = 0; i < 14; i++)); do ROW+=("$(field "$1" "$i")"); done
}
KEYS=()     # server/count, in report order
for s in "${ORDER[@]}"; do for n in "${COUNTS[@]}"; do KEYS+=("$s/$n"); done; done
printf '\n%-12s %7s %-11s %8s %8s %8s %8s | %7s %7s %7s | %7s %7s | %-13s %6s %6s %7s\n' server streams opened "RSS0 MiB" "held MiB" "evts MiB" "B/strm" \
    "p50 ms" "p99 ms" "max ms" "kp50 ms" "kp99 ms" delivered "open s" "span" "cpu us"
for s in "${ORDER[@]}"; do
    for n in "${COUNTS[@]}"; do
        k=$s/$n
        if [[ ${STATUS[$k]:-} != ok ]]; then printf '%-12s %7s %s\n' "$s" "$n" "${STATUS[$k]:-not run}"; continue; fi
        row "$k"
        printf '%-12s %7s %-11s %8s %8s %8s %8s | %7s %7s %7s | %7s %7s | %-13s %6s %6s %7s\n' "$s" "$n" "${ROW[@]}"
    done
done
printf '(RSS0/held/evts = worker VmRSS before opening, with the streams held, after the events; B/strm = (held - RSS0) / opened.\n'
printf ' Latency over all (event, stream) deliveries: p50/p99/max = client read time - the time.time() the app put in the event;\n'
printf ' kp50/kp99 = kernel receive timestamp (SO_TIMESTAMPNS) - that time: the server-side fan-out without the client'"'"'s read lag.\n'
printf ' span = p50 over events of (last - first delivery read by the client); cpu us = the worker'"'"'s CPU (utime + stime of\n'
printf ' /proc/PID/stat, all its threads) over the events phase / deliveries (C client only). floor = bench/fanout_floor.c.)\n'

# Every peer against every m0serve row (m0serve: the WSGI app; m0serve-asgi:
# the ASGI one), peer / m0serve.
RATIO_LINES=()
M0ROWS=(); PEERS=()
for s in "${ORDER[@]}"; do if [[ $s == m0serve* ]]; then M0ROWS+=("$s"); elif [[ $s != floor ]]; then PEERS+=("$s"); fi; done
if ((${#M0ROWS[@]} && ${#PEERS[@]})); then
    printf '\nratios (peer / m0serve; > 1 means m0serve uses less / is faster):\n'
    for m in "${M0ROWS[@]}"; do
        for p in "${PEERS[@]}"; do
            for n in "${COUNTS[@]}"; do
                if [[ ${STATUS[$m/$n]:-} == ok && ${STATUS[$p/$n]:-} == ok ]]; then
                    line="$p / $m, $n streams: bytes/stream $(ratio "$(field "$p/$n" 4)" "$(field "$m/$n" 4)"), p50 $(ratio "$(field "$p/$n" 5)" "$(field "$m/$n" 5)"), p99 $(ratio "$(field "$p/$n" 6)" "$(field "$m/$n" 6)"), kernel-rx p50 $(ratio "$(field "$p/$n" 8)" "$(field "$m/$n" 8)"), kernel-rx p99 $(ratio "$(field "$p/$n" 9)" "$(field "$m/$n" 9)")"
                else
                    line="$p / $m, $n streams: n/a (not measured on both)"
                fi
                RATIO_LINES+=("$line"); printf '  %s\n' "$line"
            done
        done
    done
fi

# Issue 20's targets: fan-out p99 within 2x of the bare send() floor, and
# <= 512 B of worker RSS per held stream.
TARGET_LINES=()
for m in "${M0ROWS[@]}"; do
    for n in "${COUNTS[@]}"; do
        [[ ${STATUS[$m/$n]:-} == ok ]] || continue
        line="$m, $n streams: $(field "$m/$n" 4) B/stream (target <= 512)"
        if [[ ${STATUS[floor/$n]:-} == ok ]]; then
            line+="; kernel-rx p99 $(field "$m/$n" 9) ms vs the floor's $(field "floor/$n" 9) ms = $(ratio "$(field "$m/$n" 9)" "$(field "floor/$n" 9)")x (target <= 2), client-read p99 $(ratio "$(field "$m/$n" 6)" "$(field "floor/$n" 6)")x"
        fi
        TARGET_LINES+=("$line")
    done
done
if ((${#TARGET_LINES[@]})); then
    printf '\nissue 20 targets:\n'
    for l in "${TARGET_LINES[@]}"; do printf '  %s\n' "$l"; done
fi

if ((NOISY_RUNS)); then
    printf '\nwarning: %s run(s) had other processes on the pinned cores (see notes); re-run on a quiet machine\n' "$NOISY_RUNS"
fi
print_notes "${KEYS[@]}"
printf '\ncommands (run from %s; PORT and PID differ per run; one fresh server per stream count):\n' "$REPO_ROOT"
for k in "${KEYS[@]}"; do
    s=${k%/*}
    [[ -z ${CMD[$k]:-} ]] || printf '  %s:\n    server: %s\n    client: %s\n    RSS of: %s\n' "$k" "${CMD[$k]}" "${CLIENTCMD[$k]}" "${WPID_DESC[$s]:-?}"
done
if [[ -n $LOG_DIR ]]; then printf '\nlogs and raw client JSON: %s\n' "$LOG_DIR"; fi

# shellcheck disable=SC2016  # backticks are markdown, not expansions
markdown_report() {
    local s n k l
    md_header 'm0serve realtime benchmark: held SSE streams'
    printf -- '- topology: server pinned to CPU %s (1 worker), client `bench/sse_hold.py` (or `build/bench/hold_client`, see the commands) pinned to CPU %s, 127.0.0.1; %s\n' "$SERVER_CPU" "$CLIENT_CPU" "$FD_NOTE"
    printf -- '- m0serve: %s; %s\n' "$M0_VERSION" "$UVICORN_VERSION"
    printf -- '- bench venv: %s\n' "$BENCH_VENV_VERSIONS"
    printf -- '- per run: a fresh server; open N idle streams; RSS before/after; %s events published %ss apart via `/publish`\n' "$EVENTS" "$INTERVAL"
    printf -- '- background load: %s\n' "$BACKGROUND"
    if ((NOISY_RUNS)); then
        printf -- '- **%s run(s) had other processes on the pinned cores** (see the notes); re-run on a quiet machine\n' "$NOISY_RUNS"
    fi
    printf '\n| server | streams | opened | RSS before (MiB) | RSS held (MiB) | RSS after events (MiB) | bytes/stream | p50 (ms) | p99 (ms) | max (ms) | kernel-rx p50 (ms) | kernel-rx p99 (ms) | delivered | open (s) | span p50 (ms) | worker CPU per delivery (us) |\n'
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
    for s in "${ORDER[@]}"; do
        for n in "${COUNTS[@]}"; do
            k=$s/$n
            if [[ ${STATUS[$k]:-} != ok ]]; then printf '| %s | %s | %s |||||||||||||\n' "$s" "$n" "${STATUS[$k]:-not run}"; continue; fi
            row "$k"
            printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$s" "$n" "${ROW[@]}"
        done
    done
    printf '\nLatency = receive time - the `time.time()` the app wrote into the event when publishing, over all (event, stream) deliveries. p50/p99/max: read time in the client (includes the single-threaded Python client reading N sockets per event); kernel-rx: the kernel receive timestamp of the data (`SO_TIMESTAMPNS`), i.e. the server-side fan-out. Span: p50 over events of last minus first delivery read by the client. Bytes/stream = (RSS held - RSS before) / opened.\n'
    if ((${#RATIO_LINES[@]})); then
        printf '\nRatios, peer / m0serve (> 1: m0serve uses less memory / delivers sooner):\n\n'
        for l in "${RATIO_LINES[@]}"; do printf -- '- %s\n' "$l"; done
    fi
    if ((${#TARGET_LINES[@]})); then
        printf '\nIssue 20 targets (the floor is `bench/fanout_floor.c`: one `send()` per socket per event):\n\n'
        for l in "${TARGET_LINES[@]}"; do printf -- '- %s\n' "$l"; done
    fi
    md_notes "${KEYS[@]}"
    printf '\nCommands (run from the repository root, after `ulimit -n %s`; PORT/PID per run):\n\n```sh\n' "$SOFT"
    for k in "${KEYS[@]}"; do
        s=${k%/*}
        [[ -z ${CMD[$k]:-} ]] || printf '# %s (RSS of %s)\n%s &\n%s\n' "$k" "${WPID_DESC[$s]:-?}" "${CMD[$k]}" "${CLIENTCMD[$k]}"
    done
    printf '```\n'
}
write_markdown markdown_report
