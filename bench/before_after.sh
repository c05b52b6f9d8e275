#!/usr/bin/env bash
# bench/before_after.sh — issue 8's benchmark: the runner/target seam and the
# elastic pool against the binary before them, with DEFAULT flags, in one run.
#
# Two m0serve binaries: "before" (M0SERVE_BEFORE, built from commit d68fd40,
# the last commit before the seam refactor; its default pool is a fixed
# min(cores, 8) threads) and "after" (M0SERVE, this tree).  Each case starts
# a fresh server, 1 worker, pinned to SERVER_CPU; wrk on CLIENT_CPU:
#
#   hello    bench/hello.py, default flags, wrk -t1 -c32
#   django   bench/django_hello.py (Django 5.2 from the bench venv), default
#            flags; after also with --blocking-threads 2 4 8 16 (the fixed
#            sizes the elastic default must match), before also with 16
#   mixed    bench/mixed_app.py, default flags: /fast idle, then while
#            bench/slow_load.py keeps 8 x /slow?s=1.5 in flight (wrk -c8)
#
# --rounds N repeats every case N times, round-robin (one round runs every
# case once), and reports medians.  See bench/README.md.
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: M0SERVE_BEFORE=PATH bench/before_after.sh [options]

Options:
  --sections LIST    comma-separated subset of: hello,django,mixed (default all)
  --rounds N         repeat every case N times, round-robin; medians reported (default 1)
  --duration SECS    wrk seconds per measurement (default: $DURATION or 8)
  --markdown FILE    also write the results as a markdown report to FILE
  --log-dir DIR      keep server logs, raw wrk output and slow-client summaries
  -h, --help         show this help

Environment:
  M0SERVE_BEFORE=          the "before" binary (required; e.g. built with
                           git worktree add /tmp/m0-before d68fd40 && make -C /tmp/m0-before)
  M0SERVE=./m0serve        the "after" binary
  DURATION=8 WARMUP=2      wrk seconds per measurement / warm-up per server
  CONNECTIONS=32           wrk connections for hello and django
  DJANGO_THREADS="2 4 8 16"  fixed --blocking-threads sizes run with the after binary
  DJANGO_BEFORE_THREADS=16   fixed sizes run with the before binary ("" for none)
  MIXED_CONNECTIONS=8      wrk connections for /fast
  SLOW_CONCURRENCY=8 SLOW_SECONDS=1.5
  SERVER_CPU=0 CLIENT_CPU=1 STARTUP_TIMEOUT=20
  BENCH_VENV=.venv-bench   Django comes from here (m0serve runs with VIRTUAL_ENV set to it)
  WRK=wrk PYTHON=/usr/bin/python3
Any M0_* variable in the environment is removed for the servers (default flags).
EOF
}

PROG=before_after.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-32}
DJANGO_THREADS=${DJANGO_THREADS-2 4 8 16}
DJANGO_BEFORE_THREADS=${DJANGO_BEFORE_THREADS-16}
MIXED_CONNECTIONS=${MIXED_CONNECTIONS:-8}
SLOW_CONCURRENCY=${SLOW_CONCURRENCY:-8}
SLOW_SECONDS=${SLOW_SECONDS:-1.5}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-20}
PYTHON=${PYTHON:-/usr/bin/python3}
WRK=${WRK:-wrk}
ROUNDS=1
SECTIONS=hello,django,mixed
MARKDOWN=""
LOG_DIR=""
SERVERS=""

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
for b in $DJANGO_THREADS $DJANGO_BEFORE_THREADS; do [[ $b =~ ^[0-9]+$ ]] || die "not a thread count: $b"; done
IFS=, read -r -a SECTION_LIST <<<"$SECTIONS"
for s in "${SECTION_LIST[@]}"; do case $s in hello|django|mixed) ;; *) die "unknown section: $s" ;; esac; done
has_section() { [[ ",$SECTIONS," == *",$1,"* ]]; }

[[ -n ${M0SERVE_BEFORE:-} ]] || { usage >&2; die "set M0SERVE_BEFORE to the binary built from commit d68fd40"; }
M0SERVE_BEFORE=$(abs_from_invoke "$M0SERVE_BEFORE")
resolve_paths
cd -- "$REPO_ROOT"
check_setup taskset setsid timeout curl ps "$WRK" "$PYTHON"
[[ -x $M0SERVE_BEFORE ]] || die "M0SERVE_BEFORE=$M0SERVE_BEFORE is not an executable"
[[ -x $M0SERVE ]] || die "$M0SERVE not found (run make)"
BENCH_VENV_ABS=$(cd -- "$BENCH_VENV" 2>/dev/null && pwd) || die "$BENCH_VENV not found (run make bench-venv)"
"$BENCH_PY" -c 'import django' 2>/dev/null || die "Django is not installed in $BENCH_VENV (run make bench-venv)"

# Default flags: no M0_* twin may leak in from the caller's environment.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^M0_' || true)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0ba.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

# ---------------------------------------------------------------------------
# Cases: "id|binary|app|extra flags".  Throughput cases (hello, django) and
# mixed cases are measured differently.
# ---------------------------------------------------------------------------
TPUT=()
if has_section hello; then TPUT+=("hello before|before|hello:application|" "hello after|after|hello:application|"); fi
if has_section django; then
    TPUT+=("django before|before|django_hello:application|" "django after|after|django_hello:application|")
    for b in $DJANGO_THREADS; do TPUT+=("django after bt=$b|after|django_hello:application|--blocking-threads $b"); done
    for b in $DJANGO_BEFORE_THREADS; do TPUT+=("django before bt=$b|before|django_hello:application|--blocking-threads $b"); done
fi
MIXED=()
if has_section mixed; then MIXED+=("mixed before|before" "mixed after|after"); fi

bin_of() { if [[ $1 == before ]]; then printf '%s\n' "$M0SERVE_BEFORE"; else printf '%s\n' "$M0SERVE"; fi; }

declare -A CMD NOTE
declare -A R_RPS R_P50 R_P99 R_ERR R_THR R_NOISE    # key "case#round"
declare -A I_RPS I_P50 I_P99 L_RPS L_P50 L_P99 L_ERR SLOW MNOISE
NOISY_RUNS=0

note() { NOTE[$1]+="$2; "; }

# start_m0 CASE BIN APP PORT PROBE_PATH FLAGS... : start, wait; 0 when it answers
start_m0() {
    local id=$1 bin=$2 app=$3 port=$4 probe=$5; shift 5
    local slog="$TMP/${id// /_}.server.log" cmd
    cmd=("$bin" "$app" --app-dir bench --bind "127.0.0.1:$port" --workers 1 "$@")
    CMD[$id]="VIRTUAL_ENV=\$PWD/$BENCH_VENV $(q taskset -c "$SERVER_CPU" "${cmd[@]}")"
    VIRTUAL_ENV=$BENCH_VENV_ABS start_server "$id" TERM "$SERVER_CPU" "$slog" "${cmd[@]}"
    if ! wait_http "http://127.0.0.1:$port$probe" "$STARTUP_TIMEOUT" any; then
        printf '   failed to start; last lines of its log:\n'; tail -n 15 "$slog" | sed 's/^/   | /'
        stop_server
        return 1
    fi
}

noise_note() {   # noise_note CASE PHASE
    if [[ -n $M_NOISE ]]; then
        NOISY_RUNS=$((NOISY_RUNS + 1)); note "$1" "$2 noisy: $M_NOISE"
        printf '   warning: noisy measurement (%s)\n' "$M_NOISE" >&2
    fi
    if ((M_CLIENT_BOUND)); then note "$1" "$2: client core ${CLI_CORE_BUSY}% busy (may be client-bound)"; fi
}

tput_case() {   # tput_case SPEC ROUND
    local id bin app flags port url key worker
    IFS='|' read -r id bin app flags <<<"$1"
    key="$id#$2"
    local -a extra=()
    if [[ -n $flags ]]; then read -r -a extra <<<"$flags"; fi
    port=$(free_port); url="http://127.0.0.1:$port/"
    printf '\n== %s (round %s)\n' "$id" "$2"
    if ! start_m0 "$id" "$(bin_of "$bin")" "$app" "$port" / "${extra[@]}"; then R_NOISE[$key]="failed to start"; return; fi
    printf '$ %s\n' "${CMD[$id]}"
    if [[ $(curl -s --max-time 5 "$url") != "Hello, World!" ]]; then note "$id" "unexpected body"; fi
    if ((WARMUP > 0)); then run_wrk 1 "$CONNECTIONS" "$WARMUP" "$url" "$TMP/${id// /_}.$2.warmup.txt" || true; fi
    measure_wrk "$CONNECTIONS" "$DURATION" "$url" "$TMP/${id// /_}.$2.wrk.txt" || note "$id" "round $2: wrk printed no result"
    worker=$(only_child_or_self "$SERVER_SID")
    R_RPS[$key]=$M_RPS; R_P50[$key]=$M_P50; R_P99[$key]=$M_P99; R_ERR[$key]=$M_ERR; R_THR[$key]=$(thread_count "$worker")
    R_NOISE[$key]=${M_NOISE:+noisy}
    [[ -z $M_DETAIL ]] || note "$id" "round $2: $M_DETAIL"
    printf '   %s req/s, p50 %s ms, p99 %s ms, errors %s; worker threads after the run: %s\n' \
        "$M_RPS" "$M_P50" "$M_P99" "$M_ERR" "${R_THR[$key]}"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"
    noise_note "$id" "round $2"
    session_alive "$SERVER_SID" || note "$id" "round $2: server died"
    stop_server
    [[ $STOP_HOW == clean ]] || note "$id" "round $2: did not exit on SIGTERM ($STOP_HOW)"
}

mixed_case() {   # mixed_case SPEC ROUND
    local id bin port base key slow_out slow_ready slow_sid i
    IFS='|' read -r id bin <<<"$1"
    key="$id#$2"
    port=$(free_port); base="http://127.0.0.1:$port"
    printf '\n== %s (round %s)\n' "$id" "$2"
    if ! start_m0 "$id" "$(bin_of "$bin")" mixed_app:application "$port" /fast; then I_RPS[$key]="failed to start"; return; fi
    printf '$ %s\n' "${CMD[$id]}"
    [[ $(curl -s --max-time 3 "$base/fast") == fast ]] || note "$id" "unexpected /fast body"
    if ((WARMUP > 0)); then run_wrk 1 "$MIXED_CONNECTIONS" "$WARMUP" "$base/fast" "$TMP/${id// /_}.$2.warmup.txt" || true; fi
    measure_wrk "$MIXED_CONNECTIONS" "$DURATION" "$base/fast" "$TMP/${id// /_}.$2.idle.txt" || true
    I_RPS[$key]=$M_RPS; I_P50[$key]=$M_P50; I_P99[$key]=$M_P99
    printf '   idle:   %s req/s, p50 %s ms, p99 %s ms, errors %s\n' "$M_RPS" "$M_P50" "$M_P99" "$M_ERR"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"; noise_note "$id" "round $2 idle"
    MNOISE[$key]=${M_NOISE:+noisy}

    slow_out=$TMP/${id// /_}.$2.slow.json; slow_ready=$TMP/${id// /_}.$2.slow.ready
    setsid taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "$base/slow?s=$SLOW_SECONDS" \
        -c "$SLOW_CONCURRENCY" --max-seconds $((DURATION + 60)) --out "$slow_out" --ready "$slow_ready" \
        >"$TMP/${id// /_}.$2.slow.log" 2>&1 </dev/null &
    slow_sid=$!; track_session "$slow_sid" TERM
    for ((i = 0; i < 100; i++)); do [[ -e $slow_ready ]] && break; sleep 0.1; done
    [[ -e $slow_ready ]] || note "$id" "round $2: slow client: not all $SLOW_CONCURRENCY requests sent within 10 s"
    sleep 0.2
    measure_wrk "$MIXED_CONNECTIONS" "$DURATION" "$base/fast" "$TMP/${id// /_}.$2.loaded.txt" || true
    L_RPS[$key]=$M_RPS; L_P50[$key]=$M_P50; L_P99[$key]=$M_P99; L_ERR[$key]=$M_ERR
    if [[ $M_REQ == 0 ]]; then note "$id" "round $2: loaded wrk completed 0 requests in ${DURATION}s"; fi
    printf '   loaded: %s req/s, p50 %s ms, p99 %s ms, errors %s, %s requests\n' "$M_RPS" "$M_P50" "$M_P99" "$M_ERR" "$M_REQ"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"; noise_note "$id" "round $2 loaded"
    [[ -z $M_NOISE ]] || MNOISE[$key]=noisy
    kill -s TERM "$slow_sid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do [[ -e $slow_out ]] && break; sleep 0.1; done
    stop_session "$slow_sid" TERM 2; untrack_session "$slow_sid"
    if [[ -e $slow_out ]]; then
        SLOW[$key]=$("$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1])); e = sum(d["errors"].values())
print("%d ok%s" % (d["ok"], ", %d errors" % e if e else ""))' "$slow_out")
    else
        SLOW[$key]="no summary"
    fi
    printf '   slow client: %s; worker threads: %s\n' "${SLOW[$key]}" "$(thread_count "$(only_child_or_self "$SERVER_SID")")"
    session_alive "$SERVER_SID" || note "$id" "round $2: server died"
    stop_server
}

# ---------------------------------------------------------------------------
host_info
AFTER_VERSION=$(m0serve_version built)
BEFORE_VERSION="git $(git -C "$(dirname -- "$M0SERVE_BEFORE")" rev-parse --short HEAD 2>/dev/null || echo '?'), binary $M0SERVE_BEFORE built $(date -u -r "$M0SERVE_BEFORE" '+%Y-%m-%d %H:%M:%S UTC' 2>/dev/null || echo '?')"
BENCH_VENV_VERSIONS=$(bench_venv_versions)
WRK_VERSION=$(ver "$WRK" -v)
printf 'm0serve before/after benchmark (issue 8), default flags\nhost: %s\n' "$HOST_INFO"
printf 'before: %s\nafter:  %s\n' "$BEFORE_VERSION" "$AFTER_VERSION"
printf 'bench venv %s\n%s\n' "$BENCH_VENV_VERSIONS" "$WRK_VERSION"
printf 'topology: server on CPU %s (1 worker), clients on CPU %s; %s round(s), %ss per measurement\n' \
    "$SERVER_CPU" "$CLIENT_CPU" "$ROUNDS" "$DURATION"
background_load "$SERVER_CPU" "$CLIENT_CPU"

for ((r = 1; r <= ROUNDS; r++)); do
    for c in "${TPUT[@]}"; do tput_case "$c" "$r"; done
    for c in "${MIXED[@]}"; do mixed_case "$c" "$r"; done
done

# ---- summary ------------------------------------------------------------------
vals() {   # vals ARRAY CASE -> the values of every round
    local -n A=$1
    local r
    for ((r = 1; r <= ROUNDS; r++)); do printf '%s\n' "${A[$2#$r]:--}"; done
}
med() { median $(vals "$1" "$2"); }
noisy_count() {   # noisy_count ARRAY CASE
    local -n A=$1
    local r n=0
    for ((r = 1; r <= ROUNDS; r++)); do [[ ${A[$2#$r]:-} != noisy ]] || n=$((n + 1)); done
    printf '%s/%s\n' "$n" "$ROUNDS"
}
thr_list() { vals R_THR "$1" | sort -u | tr '\n' ' ' | sed 's/ $//; s/ /, /g'; }

SUMMARY=()   # markdown-ready rows, also printed
VERDICT=()
tput_row() {  # -> "| case | flags | req/s | range | spread | p50 | p99 | errors | threads | noisy |"
    local id bin app flags
    IFS='|' read -r id bin app flags <<<"$1"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$id" "${flags:-(default)}" "$(med R_RPS "$id")" \
        "$(vrange $(vals R_RPS "$id"))" "$(spread $(vals R_RPS "$id"))" "$(med R_P50 "$id")" "$(med R_P99 "$id")" \
        "$(vals R_ERR "$id" | sort -u | tr '\n' ' ' | sed 's/ $//')" "$(thr_list "$id")" "$(noisy_count R_NOISE "$id")"
}
mixed_row() {
    local id bin
    IFS='|' read -r id bin <<<"$1"
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$id" "$(med I_RPS "$id")" "$(med I_P50 "$id")" "$(med I_P99 "$id")" \
        "$(med L_RPS "$id")" "$(med L_P50 "$id")" "$(med L_P99 "$id")" "$(ratio "$(med L_P99 "$id")" "$(med I_P99 "$id")")" \
        "$(vals SLOW "$id" | tr '\n' ';' | sed 's/;$//; s/;/; /g')" "$(noisy_count MNOISE "$id")"
}
TPUT_HEAD='| case | flags | req/s (median) | range | spread % | p50 ms | p99 ms | errors | worker threads after | noisy rounds |'
TPUT_SEP='|---|---|---:|---|---:|---:|---:|---|---|---|'
MIXED_HEAD='| case | idle req/s | idle p50 ms | idle p99 ms | loaded req/s | loaded p50 ms | loaded p99 ms | p99 loaded/idle | /slow completed while loaded | noisy rounds |'
MIXED_SEP='|---|---:|---:|---:|---:|---:|---:|---:|---|---|'

if ((${#TPUT[@]})); then
    printf '\nthroughput (wrk -t1 -c%s -d%ss; medians of %s round(s)):\n%s\n%s\n' "$CONNECTIONS" "$DURATION" "$ROUNDS" "$TPUT_HEAD" "$TPUT_SEP"
    for c in "${TPUT[@]}"; do tput_row "$c"; done
fi
if ((${#MIXED[@]})); then
    printf '\n/fast (wrk -t1 -c%s -d%ss), idle and with %s x /slow?s=%s in flight; medians of %s round(s):\n%s\n%s\n' \
        "$MIXED_CONNECTIONS" "$DURATION" "$SLOW_CONCURRENCY" "$SLOW_SECONDS" "$ROUNDS" "$MIXED_HEAD" "$MIXED_SEP"
    for c in "${MIXED[@]}"; do mixed_row "$c"; done
fi

# Targets (issue 8).  "Noise" is the larger run-to-run spread of the two
# sides (with one round there is none to judge by).
within() {   # within A B SPREAD% -> "met" / "within noise" / "not met" for A >= B
    awk -v a="$1" -v b="$2" -v s="$3" 'BEGIN {
        if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b + 0 == 0) { print "n/a"; exit }
        if (a >= b) print "met"; else if (s ~ /^[0-9]+$/ && a >= b * (1 - s / 100)) print "within noise (" s "% spread)"; else print "not met" }'
}
maxspread() { local a b; a=$(spread $(vals R_RPS "$1")); b=$(spread $(vals R_RPS "$2")); if [[ $a == - ]]; then a=0; fi; if [[ $b == - ]]; then b=0; fi; ((a > b)) && printf '%s\n' "$a" || printf '%s\n' "$b"; }
if has_section hello; then
    VERDICT+=("hello, default flags: after/before req/s = $(ratio "$(med R_RPS "hello after")" "$(med R_RPS "hello before")") — no regression beyond noise: $(within "$(med R_RPS "hello after")" "$(med R_RPS "hello before")" "$(maxspread "hello after" "hello before")")")
fi
if has_section django; then
    VERDICT+=("django, default flags: after/before req/s = $(ratio "$(med R_RPS "django after")" "$(med R_RPS "django before")") — no regression beyond noise: $(within "$(med R_RPS "django after")" "$(med R_RPS "django before")" "$(maxspread "django after" "django before")")")
    best=""; bestv=0
    for b in $DJANGO_THREADS; do
        v=$(med R_RPS "django after bt=$b")
        if [[ $v =~ ^[0-9.]+$ ]] && awk -v a="$v" -v b="$bestv" 'BEGIN { exit !(a > b) }'; then best=$b; bestv=$v; fi
    done
    if [[ -n $best ]]; then
        VERDICT+=("django, default flags vs the best fixed pool (--blocking-threads $best, $bestv req/s): $(ratio "$(med R_RPS "django after")" "$bestv") — at least as fast: $(within "$(med R_RPS "django after")" "$bestv" "$(maxspread "django after" "django after bt=$best")")")
    fi
fi
if has_section mixed; then
    for c in "${MIXED[@]}"; do
        id=${c%%|*}
        rl=$(ratio "$(med L_P99 "$id")" "$(med I_P99 "$id")")
        v=$(awk -v r="$rl" 'BEGIN { if (r !~ /^[0-9.]+$/) print "n/a (no loaded latency: 0 requests completed?)"; else if (r <= 2) print "met"; else print "not met" }')
        VERDICT+=("$id, default flags: fast p99 loaded/idle = $rl — within 2x idle: $v")
    done
fi
printf '\ntargets:\n'
for v in "${VERDICT[@]}"; do printf '  %s\n' "$v"; done
if ((NOISY_RUNS)); then
    printf '\nwarning: %s measurement(s) had other processes on the pinned cores (see notes); re-run on a quiet machine\n' "$NOISY_RUNS"
fi
ALL_IDS=()
for c in "${TPUT[@]}" "${MIXED[@]}"; do ALL_IDS+=("${c%%|*}"); done
print_notes "${ALL_IDS[@]}"
printf '\ncommands (run from %s; PORT is a free port):\n' "$REPO_ROOT"
for id in "${ALL_IDS[@]}"; do [[ -z ${CMD[$id]:-} ]] || printf '  %s: %s\n' "$id" "${CMD[$id]}"; done
if [[ -n $LOG_DIR ]]; then printf '\nlogs and raw wrk output: %s\n' "$LOG_DIR"; fi

# shellcheck disable=SC2016  # backticks are markdown, not expansions
markdown_report() {
    local c id
    md_header 'm0serve before/after (issue 8): the seam and the elastic pool, default flags'
    printf -- '- before: %s (the last commit before the seam refactor; default pool: a fixed min(cores, 8) = 2 threads here)\n' "$BEFORE_VERSION"
    printf -- '- after: %s (default pool: elastic, min(cores, 8) to 40 threads)\n' "$AFTER_VERSION"
    printf -- '- topology: 1 worker pinned to CPU %s; wrk and the slow client pinned to CPU %s; 127.0.0.1; %s\n' "$SERVER_CPU" "$CLIENT_CPU" "$WRK_VERSION"
    printf -- '- bench venv: %s\n' "$BENCH_VENV_VERSIONS"
    printf -- '- procedure: %s round(s); each round starts a fresh server per case, warms up %ss, measures %ss; medians over the rounds\n' "$ROUNDS" "$WARMUP" "$DURATION"
    printf -- '- background load: %s\n' "$BACKGROUND"
    if ((NOISY_RUNS)); then
        printf -- '- **%s measurement(s) had other processes on the pinned cores** (see the notes and the noisy column)\n' "$NOISY_RUNS"
    fi
    if ((${#TPUT[@]})); then
        printf '\n## Hello world and the Django view\n\n`wrk -t1 -c%s -d%ss --latency`. hello: `bench/hello.py`; django: `bench/django_hello.py` (a `HttpResponse` through four middleware). Spread = (max − min) / median of the rounds. Worker threads = threads of the worker process after the run (the loop thread + the pool).\n\n%s\n%s\n' \
            "$CONNECTIONS" "$DURATION" "$TPUT_HEAD" "$TPUT_SEP"
        for c in "${TPUT[@]}"; do tput_row "$c"; done
    fi
    if ((${#MIXED[@]})); then
        printf '\n## Mixed: /fast while %s slow views sleep\n\n`bench/mixed_app.py`, default flags. `wrk -t1 -c%s -d%ss --latency` on `/fast`, idle, then while `bench/slow_load.py` keeps %s requests to `/slow?s=%s` in flight.\n\n%s\n%s\n' \
            "$SLOW_CONCURRENCY" "$MIXED_CONNECTIONS" "$DURATION" "$SLOW_CONCURRENCY" "$SLOW_SECONDS" "$MIXED_HEAD" "$MIXED_SEP"
        for c in "${MIXED[@]}"; do mixed_row "$c"; done
    fi
    printf '\n## Targets\n\n'
    for v in "${VERDICT[@]}"; do printf -- '- %s\n' "$v"; done
    md_notes "${ALL_IDS[@]}"
    printf '\nCommands (run from the repository root; PORT is a free port):\n\n```sh\n'
    printf 'M0SERVE_BEFORE=%s bench/before_after.sh --rounds %s --duration %s\n' "$M0SERVE_BEFORE" "$ROUNDS" "$DURATION"
    for id in "${ALL_IDS[@]}"; do [[ -z ${CMD[$id]:-} ]] || printf '# %s\n%s &\n' "$id" "${CMD[$id]}"; done
    printf '%s\n' "$(wrk_cmd 1 "$CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/")"
    if ((${#MIXED[@]})); then
        printf '# mixed: idle, then loaded\n%s\n%s &\n%s\n' "$(wrk_cmd 1 "$MIXED_CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/fast")" \
            "$(q taskset -c "$CLIENT_CPU" "$PYTHON" bench/slow_load.py "http://127.0.0.1:PORT/slow?s=$SLOW_SECONDS" -c "$SLOW_CONCURRENCY" --out /tmp/slow.json)" \
            "$(wrk_cmd 1 "$MIXED_CONNECTIONS" "$DURATION" "http://127.0.0.1:PORT/fast")"
    fi
    printf '```\n'
}
write_markdown markdown_report
