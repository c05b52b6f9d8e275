#!/usr/bin/env bash
# bench/presence.sh — occupancy and presence (issue 32): the time a view
# takes for m0pub.channel_info on a channel with N listeners and for
# m0pub.presence listing 1,000 subs, and the fan-out latency at 10,000
# streams with presence on (every stream counted under a sub, join/leave
# on) against off (no sub, no events), compared in the same run.
#
#   1. m0serve bench/presence_app.py --realtime --workers 2, pinned to
#      SERVER_CPU; build/bench/hold_client (CLIENT_CPU) holds STREAMS (19,000)
#      streams on "news", each under one of 1,000 subs (M0-Presence); once
#      channel_info counts them all, GET /time runs CALLS calls in a view and
#      answers the mean, p50 and p99 per call;
#   2. ROUNDS times, alternating: a fresh server of one worker, FANOUT
#      (10,000) streams,
#      EVENTS events INTERVAL s apart through /publish, hold_client's
#      publish->delivery latency (p50, p99) and the worker's CPU per
#      delivery (the figure the machine's other load moves least): "off"
#      streams without a sub,
#      "on" with one and --presence-events on another channel (the agent
#      runs; a join per sub would otherwise be 10,000 × 1,000 deliveries).
# Targets: channel_info under 1 ms, presence of 1,000 subs under 10 ms, the
# fan-out p99 on within 1.1× of off.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/presence.sh [options]

Options:
  --streams N        listeners for the timing (default 19000)
  --fanout N         streams for the fan-out comparison (default 10000; 0: skip)
  --rounds N         off/on pairs of fan-out runs (default 3)
  --markdown FILE    also write the results as markdown to FILE
  --log-dir DIR      keep server logs and the client's JSON in DIR
  -h, --help         show this help

Environment: SERVER_CPU=0 CLIENT_CPU=1 CALLS=2000 PRESENCE_CALLS=200
  EVENTS=20 INTERVAL=0.2 WORKERS=2 M0SERVE=./m0serve PYTHON=/usr/bin/python3
EOF
}

PROG=presence.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CALLS=${CALLS:-2000}
PRESENCE_CALLS=${PRESENCE_CALLS:-200}
EVENTS=${EVENTS:-20}
INTERVAL=${INTERVAL:-0.2}
WORKERS=${WORKERS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
STREAMS=19000
FANOUT=10000
ROUNDS=3
MARKDOWN=""
LOG_DIR=""
SERVERS=""

while (($#)); do
    case $1 in
        --streams|--streams=*) take_value STREAMS "a number" "$@" ;;
        --fanout|--fanout=*) take_value FANOUT "a number" "$@" ;;
        --rounds|--rounds=*) take_value ROUNDS "a number" "$@" ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done
check_uints STREAMS FANOUT ROUNDS CALLS PRESENCE_CALLS EVENTS WORKERS SERVER_CPU CLIENT_CPU
resolve_paths
check_setup curl taskset setsid "$PYTHON"
cd "$REPO_ROOT"
make -s bench-tools >/dev/null || die "make bench-tools failed"
CLIENT=build/bench/hold_client
TMP=$(mktemp -d /tmp/m0presence.XXXXXX)
common_traps
COPY_LOGS_ON_EXIT=1
NOFILE=$((STREAMS > FANOUT ? STREAMS : FANOUT))
ulimit -n "$((NOFILE + 4096))" 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# serve NAME WORKERS ARGS...: a fresh server on PORT (its log TMP/NAME.log).
serve() {
    local name=$1 workers=$2; shift 2
    PORT=$(free_port) || die "no free port"
    start_server "$name" TERM "$SERVER_CPU" "$TMP/$name.log" "$M0SERVE" presence_app:application --app-dir bench \
        --bind "127.0.0.1:$PORT" --realtime --workers "$workers" --blocking-threads 2 --publish-socket '' \
        --max-connections "$((NOFILE + 1024))" "$@"
    wait_http "http://127.0.0.1:$PORT/" 20 || die "$name did not start (see $TMP/$name.log)"
}

field() { "$PYTHON" -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1], {}, {"d": d}))' "$1"; }

# ---- 1. time per call from a view, STREAMS listeners under 1,000 subs
serve timing "$WORKERS"
taskset -c "$CLIENT_CPU" "$CLIENT" --port "$PORT" -n "$STREAMS" --path "/events?sub=auto" --no-publish --events 0 \
    --hold-seconds 600 >"$TMP/timing.client.json" 2>"$TMP/timing.client.err" &
CLIENT_PID=$!
deadline=$(($(now_ms) + 120000))
held=0
while (($(now_ms) < deadline)); do
    held=$(curl -s --max-time 5 "http://127.0.0.1:$PORT/info" | field 'd["connections"]' 2>/dev/null || echo 0)
    ((held >= STREAMS)) && break
    sleep 0.5
done
((held >= STREAMS)) || die "only $held of $STREAMS streams were counted"
curl -s --max-time 30 -o /dev/null "http://127.0.0.1:$PORT/publish?n=1"    # a last_id for the loops to note
INFO=$(curl -s --max-time 120 "http://127.0.0.1:$PORT/time?what=info&n=$CALLS")
PRES=$(curl -s --max-time 120 "http://127.0.0.1:$PORT/time?what=presence&limit=1000&n=$PRESENCE_CALLS")
kill "$CLIENT_PID" 2>/dev/null || true
wait "$CLIENT_PID" 2>/dev/null || true
stop_server
printf 'channel_info, %s listeners (%s workers): mean %.1f us, p50 %.1f us, p99 %.1f us per call (target < 1000 us)\n' \
    "$(field 'd["size"]' <<<"$INFO")" "$WORKERS" "$(field 'd["mean_us"]' <<<"$INFO")" \
    "$(field 'd["p50_us"]' <<<"$INFO")" "$(field 'd["p99_us"]' <<<"$INFO")"
printf 'presence, %s subs listed: mean %.1f us, p50 %.1f us, p99 %.1f us per call (target < 10000 us)\n' \
    "$(field 'd["size"]' <<<"$PRES")" "$(field 'd["mean_us"]' <<<"$PRES")" "$(field 'd["p50_us"]' <<<"$PRES")" \
    "$(field 'd["p99_us"]' <<<"$PRES")"

# ---- 2. fan-out p99, presence off and on, alternating
declare -a P99_OFF=() P99_ON=() CPU_OFF=() CPU_ON=()
if ((FANOUT > 0)); then
    for ((r = 1; r <= ROUNDS; r++)); do
        for mode in off on; do
            if [[ $mode == on ]]; then
                serve "fanout-$mode-$r" 1 --presence-events other. ; path="/events?sub=auto"
            else
                serve "fanout-$mode-$r" 1 ; path="/events?sub=none"
            fi
            worker=$(pgrep -P "$SERVER_SID" | head -1)
            out=$TMP/fanout-$mode-$r.json
            taskset -c "$CLIENT_CPU" "$CLIENT" --port "$PORT" -n "$FANOUT" --path "$path" --publish-path /publish \
                --events "$EVENTS" --interval "$INTERVAL" --settle 1 --rss-pid "$worker" >"$out" \
                2>"$TMP/fanout-$mode-$r.err" || die "hold_client failed (see $TMP/fanout-$mode-$r.err)"
            stop_server
            p50=$(field 'd["latency_ms"]["p50"]' <"$out")
            p99=$(field 'd["latency_ms"]["p99"]' <"$out")
            cpu=$(field 'd["cpu_us_per_delivery"]' <"$out")
            printf 'fan-out %s streams, presence %-3s round %d: p50 %s ms, p99 %s ms, worker CPU %s us per delivery (%s deliveries)\n' \
                "$FANOUT" "$mode" "$r" "$p50" "$p99" "$cpu" "$(field 'd["deliveries"]' <"$out")"
            if [[ $mode == on ]]; then P99_ON+=("$p99"); CPU_ON+=("$cpu"); else P99_OFF+=("$p99"); CPU_OFF+=("$cpu"); fi
        done
    done
    median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
    off=$(median "${P99_OFF[@]}")
    on=$(median "${P99_ON[@]}")
    printf 'fan-out p99 (median of %d): off %s ms, on %s ms: on/off %.2f (target <= 1.10)\n' "$ROUNDS" "$off" "$on" \
        "$(awk -v a="$on" -v b="$off" 'BEGIN { print (b > 0 ? a / b : 0) }')"
    coff=$(median "${CPU_OFF[@]}")
    con=$(median "${CPU_ON[@]}")
    printf 'worker CPU per delivery (median): off %s us, on %s us: on/off %.2f\n' "$coff" "$con" \
        "$(awk -v a="$con" -v b="$coff" 'BEGIN { print (b > 0 ? a / b : 0) }')"
fi
if [[ -n $MARKDOWN ]]; then
    {
        echo "| measure | result |"
        echo "|---|---|"
        echo "| channel_info, $STREAMS listeners, $WORKERS workers | $(field '"%.0f us mean, %.0f us p99" % (d["mean_us"], d["p99_us"])' <<<"$INFO") |"
        echo "| presence, 1,000 subs | $(field '"%.0f us mean, %.0f us p99" % (d["mean_us"], d["p99_us"])' <<<"$PRES") |"
        if ((FANOUT > 0)); then
            echo "| fan-out p99 at $FANOUT streams (one worker), off / on | $off ms / $on ms |"
            echo "| worker CPU per delivery, off / on | $coff us / $con us |"
        fi
    } >"$MARKDOWN"
fi
