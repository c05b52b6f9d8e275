#!/usr/bin/env bash
# bench/broker.sh — the broadcast bus on Redis (--broker) beside the local bus,
# in one run:
#
#  1. publish->delivery latency to N held streams (1,000 and 10,000):
#       local   one m0serve --realtime --workers 2, all N streams on it;
#       broker  two m0serve --realtime --workers 1 --broker (hosts A and B, one
#               redis-server), N/2 streams on each; events published on A
#               (the same number of workers fanning out as the local leg:
#               on a 2-core machine more processes only measure contention).
#     bench/sse_hold.py opens the streams, publishes EVENTS events INTERVAL s
#     apart through A's /publish (bench/rt_app.py: the event carries the
#     time.time() of the publish) and timestamps every delivery.
#  2. sustained publishes/s through that one Redis with A and B reading it
#     (bench/broker_pub.py): m0pub outside any server (PROCS processes), and
#     views publishing from A's pool threads (CONCURRENCY clients); and the
#     publish latency of one m0pub process alone (p50/p99 of a call).
#  The broker leg runs five ways (ENGINES): "redis" (plain TCP, as above),
#  "wait1" (the same primary with one replica, --broker-min-replicas 1: each
#  publish waits for WAIT 1), "tls" (rediss:// to a TLS-only redis-server,
#  certificates made here with the openssl CLI), and NATS JetStream on a
#  cluster of three nats-server processes: "nats1" (a stream of one replica,
#  --broker-replicas 1) and "nats3" (three replicas: a publish is acknowledged
#  once two have it): latency legs broker, broker-wait1, broker-tls,
#  broker-nats1, broker-nats3, and a throughput row each.
#
# redis-server and nats-server are started here (temporary dir, free ports; no
# persistence for Redis, JetStream's file store in the temporary dir) and
# stopped at exit. Nothing is pinned: the 2-core machine runs Redis, the
# servers and the client together (all legs alike): compare ratios within
# one run.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/broker.sh [options]

Options:
  --quick            1,000 streams only (default: 1,000 and 10,000)
  --streams LIST     comma-separated stream counts (default 1000,10000)
  --markdown FILE    also write the results as a markdown report to FILE
  --log-dir DIR      keep server logs and the raw client JSON in DIR
  -h, --help         show this help

Environment:
  EVENTS=20 INTERVAL=0.2      events per latency run, seconds apart
  SECONDS_PUB=5               seconds of each throughput run
  PROCS=2 CONCURRENCY=4 PER_REQUEST=200
  BLOCKING_THREADS=4          m0serve --blocking-threads
  LOCAL_WORKERS=2             workers of the one local-bus m0serve
  BROKER_WORKERS=1            workers of each of the two broker hosts (same total)
  SKIP_THROUGHPUT=1           latency runs only
  ENGINES=redis,wait1,tls,nats1,nats3   the broker legs (Redis: plain, WAIT 1 with a
                              replica, TLS; NATS JetStream: streams of 1 and 3 replicas)
  STARTUP_TIMEOUT=15 CLIENT_TIMEOUT=240 NOFILE=65536
  M0SERVE=./m0serve PYTHON=/usr/bin/python3 REDIS_SERVER=redis-server NATS_SERVER=nats-server
EOF
}

PROG=broker.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

EVENTS=${EVENTS:-20}
INTERVAL=${INTERVAL:-0.2}
SECONDS_PUB=${SECONDS_PUB:-5}
PROCS=${PROCS:-2}
CONCURRENCY=${CONCURRENCY:-4}
PER_REQUEST=${PER_REQUEST:-200}
BLOCKING_THREADS=${BLOCKING_THREADS:-4}
LOCAL_WORKERS=${LOCAL_WORKERS:-2}     # the local leg: one m0serve
BROKER_WORKERS=${BROKER_WORKERS:-1}   # per host in the broker leg (two hosts: the same worker count)
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-15}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-240}
NOFILE=${NOFILE:-65536}
PYTHON=${PYTHON:-/usr/bin/python3}
SERVER_CPU=0 CLIENT_CPU=0   # check_setup wants them; this script pins nothing
REDIS_SERVER=${REDIS_SERVER:-redis-server}
NATS_SERVER=${NATS_SERVER:-nats-server}
ENGINES=${ENGINES:-redis,wait1,tls,nats1,nats3}
STREAMS=1000,10000
SERVERS=local,broker
MARKDOWN=""
LOG_DIR=""

while (($#)); do
    case $1 in
        --quick) STREAMS=1000; SHIFT=1 ;;
        --streams|--streams=*) take_value STREAMS "a LIST" "$@" ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done
check_uints EVENTS SECONDS_PUB PROCS CONCURRENCY PER_REQUEST BLOCKING_THREADS STARTUP_TIMEOUT CLIENT_TIMEOUT NOFILE
IFS=, read -r -a COUNTS <<<"$STREAMS"
IFS=, read -r -a ENGS <<<"$ENGINES"
for e in "${ENGS[@]}"; do [[ $e =~ ^(redis|wait1|tls|nats1|nats3)$ ]] || die "bad engine: $e (redis, wait1, tls, nats1, nats3)"; done
for n in "${COUNTS[@]}"; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "bad stream count: $n"; done
resolve_paths
cd -- "$REPO_ROOT"
check_setup setsid timeout curl openssl "$PYTHON" "$REDIS_SERVER"
if [[ ,$ENGINES, == *,nats* ]]; then check_setup "$NATS_SERVER"; fi
[[ -x $M0SERVE ]] || die "no m0serve binary at $M0SERVE (run make)"

hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < NOFILE)); then ulimit -Hn "$NOFILE" 2>/dev/null || true; hard=$(ulimit -Hn); fi
if [[ $hard == unlimited ]] || ((hard >= NOFILE)); then ulimit -Sn "$NOFILE"; else ulimit -Sn "$hard"; fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0broker.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

# ---- redis ----------------------------------------------------------------
redis_up() {   # redis_up PORT [tls]: wait until it answers PING
    local i
    for i in $(seq 100); do
        if [[ ${2:-} == tls ]]; then
            "$PYTHON" - "$1" "$TMP/ca.pem" 2>/dev/null <<'PY' && return 0
import socket, ssl, sys
c = ssl.create_default_context(cafile=sys.argv[2])
s = c.wrap_socket(socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1), server_hostname="127.0.0.1")
s.sendall(b"PING\r\n"); sys.exit(0 if s.recv(7) == b"+PONG\r\n" else 1)
PY
        else
            "$PYTHON" -c "import socket,sys; s=socket.create_connection(('127.0.0.1',$1),1); s.sendall(b'PING\r\n'); sys.exit(0 if s.recv(7)==b'+PONG\r\n' else 1)" 2>/dev/null && return 0
        fi
        sleep 0.1
    done
    return 1
}
start_redis() {   # start_redis LOG ARGS...
    local log=$1; shift
    setsid "$REDIS_SERVER" --bind 127.0.0.1 --dir "$TMP" --save "" --appendonly no --loglevel warning "$@" \
        >"$log" 2>&1 </dev/null &
    track_session "$!" TERM
}
RPORT=$(free_port)
start_redis "$TMP/redis.log" --port "$RPORT" --dbfilename primary.rdb
redis_up "$RPORT" || die "redis-server did not start"
BROKER=redis://127.0.0.1:$RPORT
REDIS_VERSION=$("$REDIS_SERVER" --version | sed 's/ sha=.*//')
if [[ ,$ENGINES, == *,wait1,* ]]; then
    # One replica of the primary: --broker-min-replicas 1 publishes wait for it.
    R2PORT=$(free_port)
    start_redis "$TMP/replica.log" --port "$R2PORT" --dbfilename replica.rdb --replicaof 127.0.0.1 "$RPORT"
    redis_up "$R2PORT" || die "the replica did not start"
    for _ in $(seq 100); do   # linked: WAIT 1 can be answered
        "$PYTHON" -c "import socket,sys; s=socket.create_connection(('127.0.0.1',$R2PORT),1); s.sendall(b'INFO replication\r\n'); d=b''
while b'master_link_status' not in d: d+=s.recv(65536)
sys.exit(0 if b'master_link_status:up' in d else 1)" 2>/dev/null && break
        sleep 0.1
    done
fi
if [[ ,$ENGINES, == *,tls,* ]]; then
    # A CA and a certificate for 127.0.0.1, and a TLS-only redis-server.
    (cd "$TMP" &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=bench-ca &&
        openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj /CN=127.0.0.1 &&
        printf 'subjectAltName=IP:127.0.0.1\n' >san.ext &&
        openssl x509 -req -in tls.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out tls.pem -days 2 -extfile san.ext
    ) >"$TMP/openssl.log" 2>&1 || die "openssl failed (see $TMP/openssl.log)"
    TPORT=$(free_port)
    start_redis "$TMP/redis-tls.log" --port 0 --tls-port "$TPORT" --tls-cert-file "$TMP/tls.pem" \
        --tls-key-file "$TMP/tls.key" --tls-ca-cert-file "$TMP/ca.pem" --tls-auth-clients no --dbfilename tls.rdb
    redis_up "$TPORT" tls || die "the TLS redis-server did not start"
fi

# ---- nats ---------------------------------------------------------------------
if [[ ,$ENGINES, == *,nats* ]]; then
    # Three nats-server processes with JetStream, routed to each other: every
    # stream of a NATS leg is on this cluster (one prefix per leg).
    NPORTS=() ; CPORTS=() ; MPORTS=()
    for i in 0 1 2; do NPORTS+=("$(free_port)"); CPORTS+=("$(free_port)"); MPORTS+=("$(free_port)"); done
    for i in 0 1 2; do
        routes=""
        for j in 0 1 2; do ((j == i)) || routes+="${routes:+, }nats-route://127.0.0.1:${CPORTS[$j]}"; done
        mkdir -p "$TMP/n$i"
        printf 'server_name: n%d
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: "%s", max_memory_store: 256MB, max_file_store: 4GB }
cluster { name: bench, listen: 127.0.0.1:%d, routes: [%s] }
'             "$((i + 1))" "${NPORTS[$i]}" "${MPORTS[$i]}" "$TMP/n$i" "${CPORTS[$i]}" "$routes" >"$TMP/n$i.conf"
        setsid "$NATS_SERVER" -c "$TMP/n$i.conf" >"$TMP/nats-n$i.log" 2>&1 </dev/null &
        track_session "$!" TERM
    done
    for i in 0 1 2; do   # JetStream up and a meta leader known on every node
        for _ in $(seq 200); do
            curl -sf --max-time 1 "http://127.0.0.1:${MPORTS[$i]}/jsz" 2>/dev/null | grep -q '"leader"' && break
            sleep 0.1
        done
    done
    NATS_URL="nats://127.0.0.1:${NPORTS[0]},127.0.0.1:${NPORTS[1]},127.0.0.1:${NPORTS[2]}"
    NATS_VERSION="nats-server $("$NATS_SERVER" --version | sed 's/^nats-server: //') (3 nodes)"
fi

# engine_args ENGINE: the URL and flags of a broker leg (URL first), and
# engine_env ENGINE: the M0_* a publisher outside the server needs.
engine_args() {
    case $1 in
        redis) printf '%s\n' "$BROKER" ;;
        wait1) printf '%s\n' "$BROKER" --broker-min-replicas 1 ;;
        tls) printf '%s\n' "rediss://127.0.0.1:$TPORT" --broker-ca-certs "$TMP/ca.pem" ;;
        nats1) printf '%s\n' "$NATS_URL" --broker-replicas 1 --broker-prefix bench1: ;;
        nats3) printf '%s\n' "$NATS_URL" --broker-replicas 3 --broker-prefix bench3: ;;
    esac
}
engine_env() {
    case $1 in
        redis) printf 'M0_BROKER=%s\n' "$BROKER" ;;
        wait1) printf '%s\n' "M0_BROKER=$BROKER" M0_BROKER_MIN_REPLICAS=1 ;;
        tls) printf '%s\n' "M0_BROKER=rediss://127.0.0.1:$TPORT" "M0_BROKER_CA_CERTS=$TMP/ca.pem" ;;
        nats1) printf '%s\n' "M0_BROKER=$NATS_URL" M0_BROKER_REPLICAS=1 M0_BROKER_PREFIX=bench1: ;;
        nats3) printf '%s\n' "M0_BROKER=$NATS_URL" M0_BROKER_REPLICAS=3 M0_BROKER_PREFIX=bench3: ;;
    esac
}
leg_engine() { case $1 in broker) echo redis ;; broker-*) echo "${1#broker-}" ;; esac; }

# ---- servers ----------------------------------------------------------------
SIDS=()
start_m0() {   # start_m0 LOG PORT WORKERS [extra args...]; appends the session to SIDS
    local log=$1 port=$2 workers=$3; shift 3
    setsid "$M0SERVE" rt_app:application --app-dir bench --bind "127.0.0.1:$port" --realtime --workers "$workers" \
        --blocking-threads "$BLOCKING_THREADS" "$@" >"$log" 2>&1 </dev/null &
    SIDS+=("$!")
    track_session "$!" TERM
}
stop_all() {
    local sid
    for sid in "${SIDS[@]}"; do stop_session "$sid" TERM; untrack_session "$sid"; done
    SIDS=()
}
ready() {   # ready PORT
    local deadline=$(($(now_ms) + STARTUP_TIMEOUT * 1000))
    while (($(now_ms) < deadline)); do
        curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$1/ping" && return 0
        sleep 0.1
    done
    return 1
}

declare -A RES STATUS
TP_HEALTH=""
summarize() {
    "$PYTHON" - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
lat, k = d.get("latency_ms", {}), d.get("kernel_latency_ms", {})
f = lambda v: "-" if v is None else "%.2f" % v
print("\t".join(["%d/%d" % (d.get("opened", 0), d.get("requested", 0)), f(lat.get("p50")), f(lat.get("p99")),
                 f(k.get("p50")), f(k.get("p99")), "%d/%d" % (d.get("deliveries", 0), d.get("deliveries_expected", 0)),
                 f(d.get("publish", {}).get("request_ms_p50"))]))
PY
}

run_latency() {   # run_latency local|broker|broker-wait1|broker-tls N
    local leg=$1 n=$2 key="$1/$2" pa pb out ports rc=0 eng
    local -a bargs
    printf '\n== %s, %s streams\n' "$leg" "$n"
    pa=$(free_port)
    if [[ $leg == local ]]; then
        start_m0 "$TMP/$leg-$n-a.log" "$pa" "$LOCAL_WORKERS"
        ports=$pa
    else
        eng=$(leg_engine "$leg")
        mapfile -t bargs < <(engine_args "$eng")
        pb=$(free_port)
        start_m0 "$TMP/$leg-$n-a.log" "$pa" "$BROKER_WORKERS" --broker "${bargs[@]}"
        start_m0 "$TMP/$leg-$n-b.log" "$pb" "$BROKER_WORKERS" --broker "${bargs[@]}"
        ports=$pa,$pb
    fi
    if ! ready "$pa" || { [[ $leg != local ]] && ! ready "$pb"; }; then
        STATUS[$key]="failed to start"; stop_all; return
    fi
    curl -s --max-time 5 -o /dev/null "http://127.0.0.1:$pa/publish?n=1&seq=-1" || true
    out=$TMP/$leg-$n.json
    setsid timeout -k 5 "$CLIENT_TIMEOUT" "$PYTHON" bench/sse_hold.py --port "$pa" --stream-ports "$ports" -n "$n" \
        --events "$EVENTS" --interval "$INTERVAL" --health-path /health >"$out" 2>"$TMP/$leg-$n.err" </dev/null || rc=$?
    stop_all
    if ((rc != 0)) || [[ ! -s $out ]]; then STATUS[$key]="client failed (exit $rc)"; return; fi
    RES[$key]=$(summarize "$out")
    STATUS[$key]=ok
    printf '   %s\n' "${RES[$key]}"
}

declare -A TP_M0PUB TP_SERVER TP_ALONE
run_throughput() {   # run_throughput ENGINE
    local eng=$1 pa pb
    local -a bargs envs
    mapfile -t bargs < <(engine_args "$eng")
    mapfile -t envs < <(engine_env "$eng")
    printf '\n== %s: sustained publishes/s through the broker (hosts A and B reading it)\n' "$eng"
    pa=$(free_port); pb=$(free_port)
    start_m0 "$TMP/tp-$eng-a.log" "$pa" "$BROKER_WORKERS" --broker "${bargs[@]}"
    start_m0 "$TMP/tp-$eng-b.log" "$pb" "$BROKER_WORKERS" --broker "${bargs[@]}"
    ready "$pa" && ready "$pb" || { TP_M0PUB[$eng]='{"error": "servers did not start"}'; TP_SERVER[$eng]=${TP_M0PUB[$eng]}; stop_all; return; }
    TP_ALONE[$eng]=$(env "${envs[@]}" "$PYTHON" bench/broker_pub.py --mode m0pub --url "${bargs[0]}" --procs 1 --seconds "$SECONDS_PUB")
    printf '   m0pub alone (1 process): %s\n' "${TP_ALONE[$eng]}"
    TP_M0PUB[$eng]=$(env "${envs[@]}" "$PYTHON" bench/broker_pub.py --mode m0pub --url "${bargs[0]}" --procs "$PROCS" --seconds "$SECONDS_PUB")
    printf '   m0pub (%s processes): %s\n' "$PROCS" "${TP_M0PUB[$eng]}"
    TP_SERVER[$eng]=$("$PYTHON" bench/broker_pub.py --mode server --port "$pa" --concurrency "$CONCURRENCY" --n "$PER_REQUEST" \
        --seconds "$SECONDS_PUB")
    printf '   views on A (%s clients x %s events/request): %s\n' "$CONCURRENCY" "$PER_REQUEST" "${TP_SERVER[$eng]}"
    sleep 1
    TP_HEALTH=$(curl -s --max-time 5 "http://127.0.0.1:$pb/health" | "$PYTHON" -c 'import json,sys; b=json.load(sys.stdin)["broker"]; print("B after the runs: lag %s events, gaps %s, connected %s" % (b["lag"], b["gaps"], b["connected"]))' 2>/dev/null || echo "B /health unreadable")
    printf '   %s\n' "$TP_HEALTH"
    stop_all
}

host_info
M0_VERSION=$(m0serve_version built)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
printf 'm0serve broker benchmark\nhost: %s\nm0serve: %s; %s%s\n' "$HOST_INFO" "$M0_VERSION" "$REDIS_VERSION" "${NATS_VERSION:+; $NATS_VERSION}"
printf 'local: 1 m0serve x %s workers; broker legs (%s): 2 m0serve x %s worker(s) on one broker; --blocking-threads %s; %s events %ss apart per latency run; no CPU pinning\n' \
    "$LOCAL_WORKERS" "$ENGINES" "$BROKER_WORKERS" "$BLOCKING_THREADS" "$EVENTS" "$INTERVAL"
LEGS=(local)
for e in "${ENGS[@]}"; do [[ $e == redis ]] && LEGS+=(broker) || LEGS+=("broker-$e"); done
for n in "${COUNTS[@]}"; do
    for leg in "${LEGS[@]}"; do run_latency "$leg" "$n"; done
done
if [[ ${SKIP_THROUGHPUT:-0} != 1 ]]; then
    for e in "${ENGS[@]}"; do run_throughput "$e"; done
fi

# ---- report -------------------------------------------------------------------
field() { local -a f; IFS=$'\t' read -r -a f <<<"${RES[$1]:-}"; printf '%s' "${f[$2]:--}"; }
jget() { "$PYTHON" -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("-" if v is None else v)' "${1:-{\}}" "$2" 2>/dev/null || echo -; }
printf '\n%-13s %7s %-13s %8s %8s %9s %9s %-13s %s\n' leg streams opened "p50 ms" "p99 ms" "kp50 ms" "kp99 ms" delivered "publish ms"
for n in "${COUNTS[@]}"; do
    for leg in "${LEGS[@]}"; do
        k=$leg/$n
        if [[ ${STATUS[$k]:-} != ok ]]; then printf '%-13s %7s %s\n' "$leg" "$n" "${STATUS[$k]:-not run}"; continue; fi
        printf '%-13s %7s %-13s %8s %8s %9s %9s %-13s %s\n' "$leg" "$n" "$(field "$k" 0)" "$(field "$k" 1)" "$(field "$k" 2)" \
            "$(field "$k" 3)" "$(field "$k" 4)" "$(field "$k" 5)" "$(field "$k" 6)"
    done
    for leg in "${LEGS[@]}"; do
        [[ $leg == local ]] && continue
        if [[ ${STATUS[local/$n]:-} == ok && ${STATUS[$leg/$n]:-} == ok ]]; then
            printf '        %s - local at p50: %s ms (client read), %s ms (kernel rx); p99 ratio %s\n' "$leg" \
                "$("$PYTHON" -c "print('%.2f' % ($(field "$leg/$n" 1) - $(field "local/$n" 1)))")" \
                "$("$PYTHON" -c "print('%.2f' % ($(field "$leg/$n" 3) - $(field "local/$n" 3)))")" \
                "$("$PYTHON" -c "print('%.2f' % ($(field "$leg/$n" 2) / $(field "local/$n" 2)))")"
        fi
    done
done
printf '(latency = receive time - the time.time() of the publish in the view; p50/p99 when the client read it,\n'
printf ' kp50/kp99 the kernel receive timestamp: the server side without the Python client'"'"'s read lag.\n'
printf ' local: one m0serve, every stream on it; broker legs: streams split over hosts A and B, published on A.)\n'
if [[ ${SKIP_THROUGHPUT:-0} != 1 ]]; then
    printf '\n%-7s %13s %13s %16s %16s\n' engine "publish p50" "publish p99" "m0pub x$PROCS /s" "views /s"
    for e in "${ENGS[@]}"; do
        printf '%-7s %13s %13s %16s %16s\n' "$e" "$(jget "${TP_ALONE[$e]:-}" p50_ms) ms" "$(jget "${TP_ALONE[$e]:-}" p99_ms) ms" \
            "$(jget "${TP_M0PUB[$e]:-}" rate)" "$(jget "${TP_SERVER[$e]:-}" rate)"
    done
    printf '(publish p50/p99: one m0pub process alone, per call; m0pub x%s: %s processes at once; views: %s clients x %s events/request on A)\n' \
        "$PROCS" "$PROCS" "$CONCURRENCY" "$PER_REQUEST"
fi

# shellcheck disable=SC2016
markdown_report() {
    local n leg k e
    md_header 'm0serve broker benchmark: the bus on Redis (plain, WAIT 1, TLS) and NATS JetStream (R1, R3) beside the local bus'
    printf -- '- m0serve: %s; %s%s; no CPU pinning (the brokers, servers and client share the cores): compare within this run\n' "$M0_VERSION" "$REDIS_VERSION" "${NATS_VERSION:+; $NATS_VERSION}"
    printf -- '- local leg: one m0serve, %s workers; broker legs: two m0serve (A, B), %s worker(s) each, on one broker; --realtime --blocking-threads %s\n' "$LOCAL_WORKERS" "$BROKER_WORKERS" "$BLOCKING_THREADS"
    printf -- '- broker: plain TCP; broker-wait1: the same primary with one replica and --broker-min-replicas 1 (WAIT 1 per publish); broker-tls: rediss:// to a TLS-only redis-server; broker-nats1/-nats3: nats:// to a cluster of three nats-server, a stream of 1 / 3 replicas\n'
    printf -- '- per latency run: N streams (split over A and B for the broker legs), %s events %ss apart published on A\n' "$EVENTS" "$INTERVAL"
    printf -- '- load average (1, 5, 15 min) at the start: %s; at the end: %s\n\n' "$LOAD_START" "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf '| leg | streams | opened | p50 (ms) | p99 (ms) | kernel-rx p50 (ms) | kernel-rx p99 (ms) | delivered |\n|---|---:|---:|---:|---:|---:|---:|---:|\n'
    for n in "${COUNTS[@]}"; do
        for leg in "${LEGS[@]}"; do
            k=$leg/$n
            if [[ ${STATUS[$k]:-} != ok ]]; then printf '| %s | %s | %s ||||||\n' "$leg" "$n" "${STATUS[$k]:-not run}"; continue; fi
            printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$leg" "$n" "$(field "$k" 0)" "$(field "$k" 1)" "$(field "$k" 2)" \
                "$(field "$k" 3)" "$(field "$k" 4)" "$(field "$k" 5)"
        done
    done
    if [[ ${SKIP_THROUGHPUT:-0} != 1 ]]; then
        printf '\nPublishes through the broker (A and B reading it):\n\n| engine | publish p50 (ms) | publish p99 (ms) | m0pub x%s (events/s) | views on A (events/s) |\n|---|---:|---:|---:|---:|\n' "$PROCS"
        for e in "${ENGS[@]}"; do
            printf '| %s | %s | %s | %s | %s |\n' "$e" "$(jget "${TP_ALONE[$e]:-}" p50_ms)" "$(jget "${TP_ALONE[$e]:-}" p99_ms)" \
                "$(jget "${TP_M0PUB[$e]:-}" rate)" "$(jget "${TP_SERVER[$e]:-}" rate)"
        done
        printf '\n(publish p50/p99: one m0pub process alone; m0pub x%s: %s processes at once; views: %s clients, %s events per request)\n' \
            "$PROCS" "$PROCS" "$CONCURRENCY" "$PER_REQUEST"
    fi
}
write_markdown markdown_report
