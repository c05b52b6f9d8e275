#!/usr/bin/env bash
# bench/asgi.sh — ASGI rows (issue 9): m0serve's executor vs uvicorn (uvloop +
# httptools), Granian (--interface asgi) and hypercorn (uvloop worker), one
# worker each, pinned to SERVER_CPU; wrk and the slow client on CLIENT_CPU.
#
#   hello    bench/asgi_hello.py (raw ASGI) and bench/fastapi_hello.py
#            (FastAPI), 13-byte text/plain body, wrk -t1 -c32
#   mixed    bench/asgi_mixed.py: /fast idle, then while bench/slow_load.py
#            keeps 8 requests to /slow?s=1.5 (await asyncio.sleep) in
#            flight; wrk -t1 -c8 on /fast
#
# Every server imports the apps from the bench venv (m0serve with
# VIRTUAL_ENV set to it, so its executor runs uvloop from there too).
# --rounds N repeats every (server, app) N times, round-robin, and reports
# medians.  See bench/README.md; bench/profile.sh says where the time goes.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/asgi.sh [options]

Options:
  --servers LIST     comma-separated subset/order of: m0serve,uvicorn,granian,hypercorn (default all)
  --sections LIST    comma-separated subset of: hello,fastapi,mixed (default all)
  --rounds N         repeat every case N times, round-robin; medians reported (default 1)
  --duration SECS    wrk seconds per measurement (default: $DURATION or 8)
  --markdown FILE    also write the results as a markdown report to FILE
  --log-dir DIR      keep server logs, raw wrk output and slow-client summaries
  -h, --help         show this help

Environment:
  DURATION=8 WARMUP=2      wrk seconds per measurement / warm-up per server
  CONNECTIONS=32           wrk connections for hello and fastapi
  MIXED_CONNECTIONS=8      wrk connections for /fast
  SLOW_CONCURRENCY=8 SLOW_SECONDS=1.5
  SERVER_CPU=0 CLIENT_CPU=1 STARTUP_TIMEOUT=20
  M0SERVE=./m0serve        M0SERVE_ARGS= (extra m0serve options, appended)
  BENCH_VENV=.venv-bench   uvicorn, uvloop, httptools, granian, hypercorn, FastAPI
  WRK=wrk PYTHON=/usr/bin/python3 (runs the slow client)
EOF
}

PROG=asgi.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-32}
MIXED_CONNECTIONS=${MIXED_CONNECTIONS:-8}
SLOW_CONCURRENCY=${SLOW_CONCURRENCY:-8}
SLOW_SECONDS=${SLOW_SECONDS:-1.5}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-20}
PYTHON=${PYTHON:-/usr/bin/python3}
WRK=${WRK:-wrk}
ROUNDS=1
SERVERS=m0serve,uvicorn,granian,hypercorn
SECTIONS=hello,fastapi,mixed
MARKDOWN=""
LOG_DIR=""

while (($#)); do
    case $1 in
        --sections|--sections=*) take_value SECTIONS "a LIST" "$@" ;;
        --rounds|--rounds=*) take_value ROUNDS N "$@" ;;
        --duration|--duration=*) take_value DURATION SECS "$@" ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done
check_uints DURATION WARMUP CONNECTIONS MIXED_CONNECTIONS SLOW_CONCURRENCY SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT ROUNDS
((DURATION > 0 && ROUNDS > 0)) || die "DURATION and --rounds must be > 0"
[[ $SLOW_SECONDS =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "SLOW_SECONDS must be a number"
IFS=, read -r -a ORDER <<<"$SERVERS"
for s in "${ORDER[@]}"; do case $s in m0serve|uvicorn|granian|hypercorn) ;; *) die "unknown server in --servers: $s" ;; esac; done
IFS=, read -r -a SECTION_LIST <<<"$SECTIONS"
for s in "${SECTION_LIST[@]}"; do case $s in hello|fastapi|mixed) ;; *) die "unknown section: $s" ;; esac; done
has_section() { [[ ",$SECTIONS," == *",$1,"* ]]; }

resolve_paths
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$WRK" "$PYTHON"
BENCH_VENV_ABS=$(cd -- "$BENCH_VENV" 2>/dev/null && pwd) || die "$BENCH_VENV not found (run make bench-venv)"
while read -r v; do unset "$v"; done < <(compgen -e | grep '^M0_' || true)   # default flags

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0asgi.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

# server_cmd NAME MODULE PORT -> SCMD, SENV (environment words), STOPSIG
server_cmd() {
    local name=$1 mod=$2 port=$3
    SENV=()
    case $name in
        m0serve)
            local extra=()
            if [[ -n ${M0SERVE_ARGS:-} ]]; then read -r -a extra <<<"$M0SERVE_ARGS"; fi
            SENV=("VIRTUAL_ENV=$BENCH_VENV_ABS")
            SCMD=("$M0SERVE" "$mod:app" --app-dir bench --bind "127.0.0.1:$port" --workers 1 "${extra[@]}"); STOPSIG=TERM ;;
        uvicorn)
            SCMD=("$BENCH_PY" -m uvicorn --app-dir bench "$mod:app" --host 127.0.0.1 --port "$port" --workers 1
                  --loop uvloop --http httptools --no-access-log --log-level warning); STOPSIG=TERM ;;
        granian)
            SCMD=("$BENCH_VENV/bin/granian" --interface asgi --host 127.0.0.1 --port "$port" --workers 1
                  --loop uvloop --working-dir bench --log-level warning "$mod:app"); STOPSIG=TERM ;;
        hypercorn)
            SCMD=("$BENCH_VENV/bin/hypercorn" --bind "127.0.0.1:$port" --workers 1 --worker-class uvloop
                  --log-level warning "bench/$mod:app"); STOPSIG=TERM ;;
    esac
}
server_missing() {
    case $1 in
        m0serve) [[ -x $M0SERVE ]] || { printf '%s not found (run make)' "$M0SERVE"; return 0; } ;;
        uvicorn) "$BENCH_PY" -c 'import uvicorn, uvloop, httptools' 2>/dev/null || { printf 'uvicorn/uvloop/httptools not in %s (run make bench-venv)' "$BENCH_VENV"; return 0; } ;;
        granian) [[ -x $BENCH_VENV/bin/granian ]] || { printf 'granian not in %s (run make bench-venv)' "$BENCH_VENV"; return 0; } ;;
        hypercorn) [[ -x $BENCH_VENV/bin/hypercorn ]] || { printf 'hypercorn not in %s (run make bench-venv)' "$BENCH_VENV"; return 0; } ;;
    esac
    return 1
}

declare -A CMD NOTE STATUS
declare -A R_RPS R_P50 R_P99 R_ERR R_NOISE R_CB     # "section/server#round"
declare -A I_RPS I_P50 I_P99 L_RPS L_P50 L_P99 L_ERR SLOW MNOISE
NOISY_RUNS=0
note() { NOTE[$1]+="$2; "; }
noise_note() {   # noise_note SERVER WHAT
    if [[ -n $M_NOISE ]]; then
        NOISY_RUNS=$((NOISY_RUNS + 1)); note "$1" "$2 noisy: $M_NOISE"
        printf '   warning: noisy measurement (%s)\n' "$M_NOISE" >&2
    fi
    if ((M_CLIENT_BOUND)); then note "$1" "$2: client core ${CLI_CORE_BUSY}% busy (may be client-bound)"; fi
}

# boot SECTION SERVER MODULE PROBE_PATH: start a fresh server; 0 when it answers
boot() {
    local sec=$1 name=$2 mod=$3 probe=$4 port slog why
    if why=$(server_missing "$name"); then STATUS[$sec/$name]="missing: $why"; printf '   skipped: %s\n' "$why"; return 1; fi
    port=$(free_port); BASE="http://127.0.0.1:$port"
    server_cmd "$name" "$mod" "$port"
    CMD[$sec/$name]="${SENV[*]:+${SENV[*]//$REPO_ROOT/\$PWD} }$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")"
    printf '$ %s\n' "${CMD[$sec/$name]}"
    slog=$TMP/$sec.$name.$ROUND.server.log
    # env(1) execs the server: the session leader is still the server itself.
    start_server "$name" "$STOPSIG" "$SERVER_CPU" "$slog" env "${SENV[@]}" "${SCMD[@]}"
    if ! wait_http "$BASE$probe" "$STARTUP_TIMEOUT"; then
        STATUS[$sec/$name]="failed to start"; printf '   failed to start; log:\n'; tail -n 15 "$slog" | sed 's/^/   | /'
        stop_server; return 1
    fi
    STATUS[$sec/$name]=ok
}

finish() {   # finish SECTION SERVER
    session_alive "$SERVER_SID" || note "$2" "$1 round $ROUND: server died"
    if grep -qiE 'traceback|error' "$TMP/$1.$2.$ROUND.server.log"; then
        note "$2" "$1 round $ROUND: server log: $(grep -iE 'traceback|error' "$TMP/$1.$2.$ROUND.server.log" | head -n 2 | tr '\n' ' ' | cut -c1-200)"
    fi
    stop_server
    [[ $STOP_HOW == clean ]] || note "$2" "$1 round $ROUND: did not exit on SIG$STOPSIG within 5 s ($STOP_HOW)"
}

hello_case() {   # hello_case SECTION SERVER
    local sec=$1 name=$2 mod key="$1/$2#$ROUND" body
    mod=$([[ $sec == hello ]] && echo asgi_hello || echo fastapi_hello)
    printf '\n== %s: %s (round %s)\n' "$sec" "$name" "$ROUND"
    boot "$sec" "$name" "$mod" / || return 0
    body=$(curl -s --max-time 5 "$BASE/")
    [[ $body == "Hello, World!" ]] || note "$name" "$sec: unexpected body: ${body:0:60}"
    if ((WARMUP > 0)); then run_wrk 1 "$CONNECTIONS" "$WARMUP" "$BASE/" "$TMP/$sec.$name.$ROUND.warmup.txt" || true; fi
    measure_wrk "$CONNECTIONS" "$DURATION" "$BASE/" "$TMP/$sec.$name.$ROUND.wrk.txt" || note "$name" "$sec round $ROUND: wrk printed no result"
    R_RPS[$key]=$M_RPS; R_P50[$key]=$M_P50; R_P99[$key]=$M_P99; R_ERR[$key]=$M_ERR
    R_NOISE[$key]=${M_NOISE:+noisy}; R_CB[$key]=$M_CLIENT_BOUND
    [[ -z $M_DETAIL ]] || note "$name" "$sec round $ROUND: $M_DETAIL"
    printf '   %s req/s, p50 %s ms, p99 %s ms, errors %s\n' "$M_RPS" "$M_P50" "$M_P99" "$M_ERR"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"; noise_note "$name" "$sec round $ROUND"
    finish "$sec" "$name"
}

mixed_case() {   # mixed_case SERVER
    local name=$1 key="mixed/$1#$ROUND" slow_out slow_ready slow_sid i
    printf '\n== mixed: %s (round %s)\n' "$name" "$ROUND"
    boot mixed "$name" asgi_mixed /fast || return 0
    [[ $(curl -s --max-time 3 "$BASE/fast") == fast ]] || note "$name" "mixed: unexpected /fast body"
    if ((WARMUP > 0)); then run_wrk 1 "$MIXED_CONNECTIONS" "$WARMUP" "$BASE/fast" "$TMP/mixed.$name.$ROUND.warmup.txt" || true; fi
    measure_wrk "$MIXED_CONNECTIONS" "$DURATION" "$BASE/fast" "$TMP/mixed.$name.$ROUND.idle.txt" || true
    I_RPS[$key]=$M_RPS; I_P50[$key]=$M_P50; I_P99[$key]=$M_P99
    printf '   idle:   %s req/s, p50 %s ms, p99 %s ms, errors %s\n' "$M_RPS" "$M_P50" "$M_P99" "$M_ERR"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"; noise_note "$name" "mixed round $ROUND idle"
    MNOISE[$key]=${M_NOISE:+noisy}
    slow_out=$TMP/mixed.$name.$ROUND.slow.json; slow_ready=$TMP/mixed.$name.$ROUND.slow.ready
    setsid taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "$BASE/slow?s=$SLOW_SECONDS" \
        -c "$SLOW_CONCURRENCY" --max-seconds $((DURATION + 60)) --out "$slow_out" --ready "$slow_ready" \
        >"$TMP/mixed.$name.$ROUND.slow.log" 2>&1 </dev/null &
    slow_sid=$!; track_session "$slow_sid" TERM
    for ((i = 0; i < 100; i++)); do [[ -e $slow_ready ]] && break; sleep 0.1; done
    [[ -e $slow_ready ]] || note "$name" "mixed round $ROUND: slow client: not all $SLOW_CONCURRENCY requests sent within 10 s"
    sleep 0.2
    measure_wrk "$MIXED_CONNECTIONS" "$DURATION" "$BASE/fast" "$TMP/mixed.$name.$ROUND.loaded.txt" || true
    L_RPS[$key]=$M_RPS; L_P50[$key]=$M_P50; L_P99[$key]=$M_P99; L_ERR[$key]=$M_ERR
    if [[ $M_REQ == 0 ]]; then note "$name" "mixed round $ROUND: loaded wrk completed 0 requests"; fi
    printf '   loaded: %s req/s, p50 %s ms, p99 %s ms, errors %s\n' "$M_RPS" "$M_P50" "$M_P99" "$M_ERR"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"; noise_note "$name" "mixed round $ROUND loaded"
    [[ -z $M_NOISE ]] || MNOISE[$key]=noisy
    kill -s TERM "$slow_sid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do [[ -e $slow_out ]] && break; sleep 0.1; done
    stop_session "$slow_sid" TERM 2; untrack_session "$slow_sid"
    if [[ -e $slow_out ]]; then
        SLOW[$key]=$("$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1])); e = sum(d["errors"].values())
lat = d["latency_ms"]["p50"]
print("%d ok%s%s" % (d["ok"], ", %d errors" % e if e else "", ", p50 %.0f ms" % lat if lat is not None else ""))' "$slow_out")
    else
        SLOW[$key]="no summary"
    fi
    printf '   slow client: %s\n' "${SLOW[$key]}"
    finish mixed "$name"
}

# ---------------------------------------------------------------------------
host_info
M0_VERSION=$(m0serve_version built)
BENCH_VENV_VERSIONS=$(bench_venv_versions)
WRK_VERSION=$(ver "$WRK" -v)
printf 'm0serve ASGI benchmark\nhost: %s\nm0serve: %s%s\n' "$HOST_INFO" "$M0_VERSION" "${M0SERVE_ARGS:+ (extra args: $M0SERVE_ARGS)}"
printf 'bench venv %s\n%s\n' "$BENCH_VENV_VERSIONS" "$WRK_VERSION"
printf 'topology: servers on CPU %s (1 worker), clients on CPU %s; %s round(s), %ss per measurement\n' "$SERVER_CPU" "$CLIENT_CPU" "$ROUNDS" "$DURATION"
background_load "$SERVER_CPU" "$CLIENT_CPU"

for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    for sec in hello fastapi; do
        has_section "$sec" || continue
        for s in "${ORDER[@]}"; do hello_case "$sec" "$s"; done
    done
    if has_section mixed; then for s in "${ORDER[@]}"; do mixed_case "$s"; done; fi
done

# ---- report ---------------------------------------------------------------
vals() { local -n A=$1; local r; for ((r = 1; r <= ROUNDS; r++)); do printf '%s\n' "${A[$2#$r]:--}"; done; }
med() { median $(vals "$1" "$2"); }
count_flag() {   # count_flag ARRAY KEY VALUE -> "n/ROUNDS"
    local -n A=$1; local r n=0
    for ((r = 1; r <= ROUNDS; r++)); do [[ ${A[$2#$r]:-} != "$3" ]] || n=$((n + 1)); done
    printf '%s/%s' "$n" "$ROUNDS"
}
TPUT_HEAD='| server | req/s (median) | range | p50 ms | p99 ms | errors | m0serve ÷ server | noisy rounds | client-bound rounds |'
TPUT_SEP='|---|---:|---|---:|---:|---|---:|---|---|'
MIXED_HEAD='| server | idle req/s | idle p50 ms | idle p99 ms | loaded req/s | loaded p50 ms | loaded p99 ms | p99 loaded/idle | m0serve p99 ÷ server p99 (loaded) | /slow completed while loaded | noisy rounds |'
MIXED_SEP='|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|'
tput_row() {   # tput_row SECTION SERVER
    local k=$1/$2
    if [[ ${STATUS[$k]:-} != ok ]]; then printf '| %s | %s ||||||||\n' "$2" "${STATUS[$k]:-not run}"; return; fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$2" "$(med R_RPS "$k")" "$(vrange $(vals R_RPS "$k"))" \
        "$(med R_P50 "$k")" "$(med R_P99 "$k")" "$(vals R_ERR "$k" | sort -u | paste -sd' ')" \
        "$(ratio "$(med R_RPS "$1/m0serve")" "$(med R_RPS "$k")")" "$(count_flag R_NOISE "$k" noisy)" "$(count_flag R_CB "$k" 1)"
}
mixed_row() {
    local k=mixed/$1
    if [[ ${STATUS[$k]:-} != ok ]]; then printf '| %s | %s ||||||||||\n' "$1" "${STATUS[$k]:-not run}"; return; fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$(med I_RPS "$k")" "$(med I_P50 "$k")" "$(med I_P99 "$k")" \
        "$(med L_RPS "$k")" "$(med L_P50 "$k")" "$(med L_P99 "$k")" "$(ratio "$(med L_P99 "$k")" "$(med I_P99 "$k")")" \
        "$(ratio "$(med L_P99 mixed/m0serve)" "$(med L_P99 "$k")")" "$(vals SLOW "$k" | paste -sd';' | sed 's/;/; /g')" "$(count_flag MNOISE "$k" noisy)"
}
declare -A TITLE=([hello]="raw ASGI hello world (bench/asgi_hello.py)" [fastapi]="FastAPI hello world (bench/fastapi_hello.py)")
for sec in hello fastapi; do
    has_section "$sec" || continue
    printf '\n%s, wrk -t1 -c%s -d%ss (medians of %s round(s)):\n%s\n%s\n' "${TITLE[$sec]}" "$CONNECTIONS" "$DURATION" "$ROUNDS" "$TPUT_HEAD" "$TPUT_SEP"
    for s in "${ORDER[@]}"; do tput_row "$sec" "$s"; done
done
if has_section mixed; then
    printf '\n/fast (wrk -t1 -c%s -d%ss), idle and with %s x /slow?s=%s (await asyncio.sleep) in flight (medians of %s round(s)):\n%s\n%s\n' \
        "$MIXED_CONNECTIONS" "$DURATION" "$SLOW_CONCURRENCY" "$SLOW_SECONDS" "$ROUNDS" "$MIXED_HEAD" "$MIXED_SEP"
    for s in "${ORDER[@]}"; do mixed_row "$s"; done
fi

# Targets (issue 9).
VERDICT=()
cmp() {   # cmp A OP B -> met / not met / n/a
    awk -v a="$1" -v b="$3" -v op="$2" 'BEGIN { if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/) { print "n/a"; exit }
        ok = (op == ">=") ? (a >= b) : (op == ">") ? (a > b) : (a < b); print ok ? "met" : "not met" }'
}
if has_section hello; then
    a=$(med R_RPS hello/m0serve); u=$(med R_RPS hello/uvicorn); g=$(med R_RPS hello/granian)
    VERDICT+=("raw hello ≥ 1.5× uvicorn: m0serve/uvicorn = $(ratio "$a" "$u") — $(cmp "$(ratio "$a" "$u")" ">=" 1.5)")
    VERDICT+=("raw hello ahead of Granian: m0serve/granian = $(ratio "$a" "$g") — $(cmp "$a" ">" "$g")")
fi
if has_section fastapi; then
    a=$(med R_RPS fastapi/m0serve)
    VERDICT+=("FastAPI hello ahead of uvicorn: m0serve/uvicorn = $(ratio "$a" "$(med R_RPS fastapi/uvicorn)") — $(cmp "$a" ">" "$(med R_RPS fastapi/uvicorn)")")
    VERDICT+=("FastAPI hello ahead of Granian: m0serve/granian = $(ratio "$a" "$(med R_RPS fastapi/granian)") — $(cmp "$a" ">" "$(med R_RPS fastapi/granian)")")
fi
if has_section mixed; then
    a=$(med L_P99 mixed/m0serve)
    for p in uvicorn granian; do
        VERDICT+=("fast p99 under the mixed load better than $p: $a ms vs $(med L_P99 "mixed/$p") ms — $(cmp "$a" "<" "$(med L_P99 "mixed/$p")")")
    done
fi
printf '\ntargets:\n'
for v in "${VERDICT[@]}"; do printf '  %s\n' "$v"; done
if ((NOISY_RUNS)); then
    printf '\nwarning: %s measurement(s) had other processes on the pinned cores (see notes); re-run on a quiet machine\n' "$NOISY_RUNS"
fi
print_notes "${ORDER[@]}"
printf '\ncommands (run from %s; PORT is a free port):\n' "$REPO_ROOT"
for sec in hello fastapi mixed; do for s in "${ORDER[@]}"; do [[ -z ${CMD[$sec/$s]:-} ]] || printf '  %s %s: %s\n' "$sec" "$s" "${CMD[$sec/$s]}"; done; done
if [[ -n $LOG_DIR ]]; then printf '\nlogs and raw wrk output: %s\n' "$LOG_DIR"; fi

# shellcheck disable=SC2016  # backticks are markdown, not expansions
markdown_report() {
    local sec s v
    md_header 'm0serve ASGI benchmark (issue 9)'
    printf -- '- m0serve: %s%s (default flags: one executor thread, uvloop from the bench venv)\n' "$M0_VERSION" "${M0SERVE_ARGS:+, extra args \`$M0SERVE_ARGS\`}"
    printf -- '- peers: uvicorn (uvloop, httptools), Granian (`--interface asgi --loop uvloop`), hypercorn (`--worker-class uvloop`), 1 worker each; bench venv: %s\n' "$BENCH_VENV_VERSIONS"
    printf -- '- topology: server pinned to CPU %s; wrk and the slow client pinned to CPU %s; 127.0.0.1; %s\n' "$SERVER_CPU" "$CLIENT_CPU" "$WRK_VERSION"
    printf -- '- procedure: %s round(s), round-robin, a fresh server per case, %ss warm-up, %ss measured; medians\n' "$ROUNDS" "$WARMUP" "$DURATION"
    printf -- '- background load: %s\n' "$BACKGROUND"
    if ((NOISY_RUNS)); then printf -- '- **%s measurement(s) had other processes on the pinned cores** (see the notes)\n' "$NOISY_RUNS"; fi
    for sec in hello fastapi; do
        has_section "$sec" || continue
        printf '\n## %s\n\n`wrk -t1 -c%s -d%ss --latency`.\n\n%s\n%s\n' "${TITLE[$sec]}" "$CONNECTIONS" "$DURATION" "$TPUT_HEAD" "$TPUT_SEP"
        for s in "${ORDER[@]}"; do tput_row "$sec" "$s"; done
    done
    if has_section mixed; then
        printf '\n## Mixed: /fast while %s requests await asyncio.sleep(%s)\n\n`bench/asgi_mixed.py`. `wrk -t1 -c%s -d%ss --latency` on `/fast`, idle, then while `bench/slow_load.py` keeps %s requests to `/slow?s=%s` in flight.\n\n%s\n%s\n' \
            "$SLOW_CONCURRENCY" "$SLOW_SECONDS" "$MIXED_CONNECTIONS" "$DURATION" "$SLOW_CONCURRENCY" "$SLOW_SECONDS" "$MIXED_HEAD" "$MIXED_SEP"
        for s in "${ORDER[@]}"; do mixed_row "$s"; done
    fi
    printf '\n## Targets\n\n'
    for v in "${VERDICT[@]}"; do printf -- '- %s\n' "$v"; done
    md_notes "${ORDER[@]}"
    printf '\nCommands (run from the repository root; PORT is a free port):\n\n```sh\n'
    printf 'bench/asgi.sh --rounds %s --duration %s\n' "$ROUNDS" "$DURATION"
    for sec in hello fastapi mixed; do for s in "${ORDER[@]}"; do [[ -z ${CMD[$sec/$s]:-} ]] || printf '# %s, %s\n%s &\n' "$sec" "$s" "${CMD[$sec/$s]}"; done; done
    printf '%s\n' "$(wrk_cmd 1 "$CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/")"
    if has_section mixed; then
        printf '# mixed: idle, then loaded\n%s\n%s &\n%s\n' "$(wrk_cmd 1 "$MIXED_CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/fast")" \
            "$(q taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "http://127.0.0.1:PORT/slow?s=$SLOW_SECONDS" -c "$SLOW_CONCURRENCY" --out /tmp/slow.json)" \
            "$(wrk_cmd 1 "$MIXED_CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/fast")"
    fi
    printf '```\n'
}
write_markdown markdown_report
