#!/usr/bin/env bash
# bench/wsgi_table.sh — every WSGI peer on every row, in one command (issue 29).
#
# Rows: hello (bench/hello.py), the Django view (bench/django_hello.py), a
# Flask view (bench/flask_hello.py), each under every server of
# bench/peers.sh (nginx on hello only); then the mixed row (bench/mixed_app.py:
# /fast while SLOW slow views run). One worker each, the server pinned to
# SERVER_CPU, wrk (-t1 -c32) to CLIENT_CPU. ROUNDS rounds; within a round the
# servers' order rotates, so none always runs first or last while the
# machine's other load comes and goes. The figure is the server's CPU per
# request, the median over the rounds:
#   proc   user+system time of the server's own processes ÷ requests
#          (what the server spends; other processes on its core do not count)
#   core   busy time of SERVER_CPU ÷ requests (issue 29's method: includes
#          interrupts and softirqs not charged to any process, and anything
#          else that ran on that core: on a shared machine, noise)
# plus requests/s, p99 and how busy the client core was.
#
#   bash bench/wsgi_table.sh [--rounds N] [--duration S] [--apps hello,django,flask]
#                            [--servers LIST] [--no-mixed | --mixed-only] [--markdown FILE] [--log-dir DIR]
#
# Environment: ROUNDS=3 DURATION=8 WARMUP=2 CONNECTIONS=32 SERVER_CPU=0 CLIENT_CPU=1
# MIXED_DURATION=8 MIXED_CONNECTIONS=8 SLOW=8 SLOW_SECONDS=1.5 STARTUP_TIMEOUT=20
# M0SERVE=./m0serve BENCH_VENV=.venv-bench (make bench-venv) PYTHON=/usr/bin/python3.
# Servers: bench/peers.sh (nginx m0serve m0serve-inline uwsgi gunicorn uvicorn
# granian bjoern fastwsgi socketify pyruvate). See bench/README.md.
set -euo pipefail

PROG=wsgi_table.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

ROUNDS=${ROUNDS:-3}; DURATION=${DURATION:-8}; WARMUP=${WARMUP:-2}; CONNECTIONS=${CONNECTIONS:-32}
SERVER_CPU=${SERVER_CPU:-0}; CLIENT_CPU=${CLIENT_CPU:-1}; STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-20}
MIXED_DURATION=${MIXED_DURATION:-8}; MIXED_CONNECTIONS=${MIXED_CONNECTIONS:-8}
SLOW=${SLOW:-8}; SLOW_SECONDS=${SLOW_SECONDS:-1.5}
PYTHON=${PYTHON:-/usr/bin/python3}; WRK=${WRK:-wrk}
APPS=hello,django,flask; SERVERS=""; MIXED=1; MARKDOWN=""; LOG_DIR=""

while (($#)); do
    case $1 in
        --rounds|--rounds=*) take_value ROUNDS N "$@" ;;
        --duration|--duration=*) take_value DURATION SECS "$@" ;;
        --apps|--apps=*) take_value APPS LIST "$@" ;;
        --no-mixed) MIXED=0; SHIFT=1 ;;
        --mixed-only) ROUNDS=0; SHIFT=1 ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done
check_uints ROUNDS DURATION WARMUP CONNECTIONS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT MIXED_DURATION MIXED_CONNECTIONS SLOW
resolve_paths
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$WRK" "$PYTHON"
# shellcheck source=bench/peers.sh
. "$SCRIPT_DIR/peers.sh"
[[ -n $SERVERS ]] || SERVERS=${PEER_NAMES// /,}
IFS=, read -r -a ORDER <<<"$SERVERS"
IFS=, read -r -a APPLIST <<<"$APPS"
declare -A MODULE=([hello]=hello:application [django]=django_hello:application [flask]=flask_hello:application)
for a in "${APPLIST[@]}"; do [[ -n ${MODULE[$a]:-} ]] || die "unknown app in --apps: $a (hello, django, flask)"; done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0table.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1
RESULTS=$TMP/results.tsv      # round app server rps p99 proc_us core_us client% foreign%
: >"$RESULTS"

busy_jiffies() {   # busy_jiffies SNAPSHOT CPU -> busy ticks of that CPU
    awk -v want="cpu$2" '$1 == want { print $2 }' <<<"$1"
}

# one RUN APP SERVER: start, warm up, measure, stop; a line in RESULTS
one() {
    local round=$1 app=$2 name=$3 port url log s0 s1 t0 t1 line rps p50 p99 reqs errs detail
    port=$(free_port); url="http://127.0.0.1:$port/"
    if ! peer_cmd "$name" "${MODULE[$app]}" "$port"; then
        ((round > 1)) || printf '   %-15s skipped: %s\n' "$name" "$PEER_WHY"
        printf '%s\t%s\t%s\tskip\t%s\n' "$round" "$app" "$name" "$PEER_WHY" >>"$RESULTS"
        return
    fi
    log=$TMP/$round.$app.$name.log
    ((round > 1)) || printf '   %-15s $ %s\n' "$name" "$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")" >>"$TMP/commands.txt"
    start_server "$name" "$STOPSIG" "$SERVER_CPU" "$log" "${SCMD[@]}"
    if ! wait_http "$url" "$STARTUP_TIMEOUT"; then
        printf '   %-15s failed to start; log:\n' "$name"; tail -n 5 "$log" | sed 's/^/     | /'
        printf '%s\t%s\t%s\tfail\tdid not start\n' "$round" "$app" "$name" >>"$RESULTS"
        stop_server; return
    fi
    [[ $(curl -s --max-time 5 "$url") == "Hello, World!" ]] || printf '   %s: unexpected body\n' "$name"
    ((WARMUP == 0)) || run_wrk 1 "$CONNECTIONS" "$WARMUP" "$url" "$TMP/warmup.txt" || true
    noise_begin; s0=$NB_SNAP; t0=$NB_TICKS
    run_wrk 1 "$CONNECTIONS" "$DURATION" "$url" "$TMP/$round.$app.$name.wrk" || true
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    s1=$(cpu_snapshot); t1=$(session_ticks "$SERVER_SID")
    session_alive "$SERVER_SID" || printf '   %s: died during the run\n' "$name"
    stop_server
    if ! line=$(parse_wrk "$TMP/$round.$app.$name.wrk" 3); then
        printf '%s\t%s\t%s\tfail\twrk printed no result\n' "$round" "$app" "$name" >>"$RESULTS"; return
    fi
    IFS=$'\t' read -r rps p50 p99 reqs errs detail <<<"$line"
    awk -v r="$round" -v a="$app" -v n="$name" -v rps="$rps" -v p99="$p99" -v reqs="$reqs" \
        -v pt=$((t1 - t0)) -v ct=$(($(busy_jiffies "$s1" "$SERVER_CPU") - $(busy_jiffies "$s0" "$SERVER_CPU"))) \
        -v hz="$CLK_TCK" -v cli="$CLI_CORE_BUSY" -v fg="$FOREIGN_CPU" -v errs="$errs" 'BEGIN {
        if (reqs + 0 <= 0) { printf "%s\t%s\t%s\tfail\tno requests\n", r, a, n; exit }
        printf "%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%s\t%s\t%s\n", r, a, n, rps, p99, pt / hz * 1e6 / reqs, ct / hz * 1e6 / reqs, cli, fg, errs }' >>"$RESULTS"
    tail -n1 "$RESULTS" | awk -F'\t' '{ printf "   %-15s %9s req/s  p99 %6s ms  proc %7s us/req  core %7s us/req  (client core %s%%, others on server core %s%%)\n", $3, $4, $5, $6, $7, $8, $9 }'
}

# mixed SERVER: /fast idle, then with SLOW slow views in flight (default flags)
declare -A MX
mixed() {
    local name=$1 port base log ready out sid i line rps p50 p99 reqs errs detail ip99
    port=$(free_port); base="http://127.0.0.1:$port"
    peer_cmd "$name" mixed_app:application "$port" || { MX[$name]="skip"; return; }
    log=$TMP/mixed.$name.log
    start_server "$name" "$STOPSIG" "$SERVER_CPU" "$log" "${SCMD[@]}"
    if ! wait_http "$base/fast" "$STARTUP_TIMEOUT"; then MX[$name]="fail"; stop_server; return; fi
    run_wrk 1 "$MIXED_CONNECTIONS" 1 "$base/fast" "$TMP/warmup.txt" || true
    run_wrk 1 "$MIXED_CONNECTIONS" "$MIXED_DURATION" "$base/fast" "$TMP/mixed.$name.idle" || true
    ip99=-
    if line=$(parse_wrk "$TMP/mixed.$name.idle" 3); then IFS=$'\t' read -r rps p50 ip99 reqs errs detail <<<"$line"; fi
    ready=$TMP/mixed.$name.ready; out=$TMP/mixed.$name.slow.json
    setsid taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "$base/slow?s=$SLOW_SECONDS" -c "$SLOW" \
        --max-seconds $((MIXED_DURATION + 60)) --out "$out" --ready "$ready" >"$TMP/mixed.$name.slowlog" 2>&1 </dev/null &
    sid=$!; track_session "$sid" TERM
    for ((i = 0; i < 100; i++)); do [[ -e $ready ]] && break; sleep 0.1; done
    sleep 0.3
    run_wrk 1 "$MIXED_CONNECTIONS" "$MIXED_DURATION" "$base/fast" "$TMP/mixed.$name.loaded" || true
    stop_session "$sid" TERM 2; untrack_session "$sid"
    stop_server
    if line=$(parse_wrk "$TMP/mixed.$name.loaded" 3); then
        IFS=$'\t' read -r rps p50 p99 reqs errs detail <<<"$line"
        MX[$name]="$ip99"$'\t'"$rps"$'\t'"$p99"$'\t'"$reqs"
    else
        MX[$name]="$ip99"$'\t'"0"$'\t'"-"$'\t'"0"
    fi
    printf '   %-15s idle p99 %s ms; loaded: %s req/s, p99 %s ms, %s answered\n' "$name" "$ip99" \
        "$(cut -f2 <<<"${MX[$name]}")" "$(cut -f3 <<<"${MX[$name]}")" "$(cut -f4 <<<"${MX[$name]}")"
}

host_info
printf 'WSGI table (issue 29): %s\n' "$HOST_INFO"
printf 'm0serve: %s; %s\n' "$(m0serve_version built)" "$("$M0SERVE" --version 2>/dev/null | tail -n1)"
for s in "${ORDER[@]}"; do printf '  %-15s %s\n' "$s" "$(peer_version "$s")"; done | sort -u
printf 'load average at the start: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
background_load "$SERVER_CPU" "$CLIENT_CPU"

n=${#ORDER[@]}
for ((r = 1; r <= ROUNDS; r++)); do
    for app in "${APPLIST[@]}"; do
        printf '\n== round %s/%s: %s\n' "$r" "$ROUNDS" "$app"
        for ((i = 0; i < n; i++)); do one "$r" "$app" "${ORDER[(i + r - 1) % n]}"; done
    done
done
if ((MIXED)); then
    printf '\n== mixed: /fast (wrk -c%s) idle, then with %s x /slow?s=%s in flight; default flags\n' \
        "$MIXED_CONNECTIONS" "$SLOW" "$SLOW_SECONDS"
    for s in "${ORDER[@]}"; do [[ $s == nginx ]] || mixed "$s"; done
fi
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the table: medians over the rounds ---------------------------------------
med() {   # med APP SERVER COLUMN -> the median of that column over the rounds
    awk -F'\t' -v a="$1" -v s="$2" -v c="$3" '$2 == a && $3 == s && $4 != "skip" && $4 != "fail" { print $c }' "$RESULTS" |
        sort -g | awk '{ v[++n] = $1 } END { if (!n) { print "-"; exit } m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; print m }'
}
why() { awk -F'\t' -v a="$1" -v s="$2" '$2 == a && $3 == s && ($4 == "skip" || $4 == "fail") { print $5; exit }' "$RESULTS"; }
table() {
    local app s
    ((ROUNDS == 0)) || cpu_table
    mixed_table
}
cpu_table() {
    local app s
    printf '| server |'
    for app in "${APPLIST[@]}"; do printf ' %s proc µs/req | core µs/req | req/s |' "$app"; done
    printf '\n|---|'
    for app in "${APPLIST[@]}"; do printf -- '---:|---:|---:|'; done
    printf '\n'
    for s in "${ORDER[@]}"; do
        printf '| %s |' "$s"
        for app in "${APPLIST[@]}"; do
            if [[ $(med "$app" "$s" 6) == - ]]; then printf ' — | — | %s |' "$(why "$app" "$s" | cut -c1-40)"
            else printf ' %.1f | %.1f | %.0f |' "$(med "$app" "$s" 6)" "$(med "$app" "$s" 7)" "$(med "$app" "$s" 4)"; fi
        done
        printf '\n'
    done
    printf '\nMedians of %s rounds (the order of the servers rotated each round), `wrk -t1 -c%s -d%ss` after a %ss warm-up;\n' \
        "$ROUNDS" "$CONNECTIONS" "$DURATION" "$WARMUP"
    printf 'server pinned to CPU %s, wrk to CPU %s. Load average %s at the start, %s at the end.\n' \
        "$SERVER_CPU" "$CLIENT_CPU" "$LOAD0" "$LOAD1"
    printf 'Per run (round, app, server, req/s, p99 ms, proc µs/req, core µs/req, client core %%, others on the server core %%): %s\n' \
        "${LOG_DIR:-the --log-dir results.tsv}"
}
mixed_table() {
    local s a b c d
    ((MIXED)) || return 0
    printf '\n| server (default flags) | /fast idle p99 ms | /fast req/s with %s slow views | p99 ms | p99 loaded ÷ idle | answered |\n|---|---:|---:|---:|---:|---:|\n' "$SLOW"
    for s in "${ORDER[@]}"; do
        [[ $s != nginx && -n ${MX[$s]:-} && ${MX[$s]} != skip ]] || continue
        if [[ ${MX[$s]} == fail ]]; then printf '| %s | failed to start | | | | |\n' "$s"; continue; fi
        IFS=$'\t' read -r a b c d <<<"${MX[$s]}"
        if [[ $d == 0 ]]; then printf '| %s | %s | 0: stalls | — | — | 0 |\n' "$s" "$a"
        else printf '| %s | %s | %s | %s | %s | %s |\n' "$s" "$a" "$b" "$c" "$(ratio "$c" "$a")" "$d"; fi
    done
    printf '\n`wrk -t1 -c%s -d%ss` on /fast, idle, then while bench/slow_load.py keeps %s requests to /slow?s=%s in flight.\n' \
        "$MIXED_CONNECTIONS" "$MIXED_DURATION" "$SLOW" "$SLOW_SECONDS"
}
printf '\n'
table
if [[ -n $MARKDOWN ]]; then mkdir -p "$(dirname -- "$MARKDOWN")"; table >"$MARKDOWN"; printf '\nmarkdown: %s\n' "$MARKDOWN"; fi
if [[ -n $LOG_DIR ]]; then printf 'logs: %s\n' "$LOG_DIR"; fi
