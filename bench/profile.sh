#!/usr/bin/env bash
# bench/profile.sh — where the time goes: one server under wrk, profiled.
#
# Starts the server command given after "--" pinned to SERVER_CPU (the word
# PORT in it becomes a free port), finds its worker process (the leader's
# only child, else the leader: m0serve's worker, granian's worker, uvicorn
# itself), and runs three wrk phases against it, each after the previous:
#
#   1. clean: req/s, and every thread's voluntary / involuntary context
#      switches from /proc/WORKER/task/*/status, per request;
#   2. perf: `perf record -e cpu-clock -g` on the worker (sampling; no
#      hardware counters needed), then CPU time grouped by library (kernel,
#      CPython, m0serve, uvloop, libc, ...), by thread, the kernel's
#      system-call entry points (inclusive), and the top symbols;
#   3. syscalls (--syscalls): `perf trace -s` on the worker: system calls
#      per request, per thread (perf trace slows the server; the counts per
#      request are what matters, not its req/s).
#
# Examples:
#   bench/profile.sh --path / -- ./m0serve hello:application --app-dir bench \
#       --bind 127.0.0.1:PORT --workers 1 --blocking-threads 2
#   VIRTUAL_ENV=$PWD/.venv-bench bench/profile.sh --name django-bt16 -- ./m0serve \
#       django_hello:application --app-dir bench --bind 127.0.0.1:PORT --workers 1 --blocking-threads 16
#
# See bench/README.md.  Run from anywhere (the command runs from the repo root).
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bench/profile.sh [options] -- SERVER-COMMAND...

The word PORT in SERVER-COMMAND is replaced by a free 127.0.0.1 port.

Options:
  --name NAME        label for the report (default: the command's first word)
  --path PATH        URL path wrk requests (default /)
  --duration SECS    seconds per wrk phase (default: $DURATION or 8)
  --syscalls         add the perf trace phase (system calls per request)
  --no-perf          skip the perf record phase
  --markdown FILE    also write the report as markdown to FILE
  --log-dir DIR      keep the server log, wrk output and perf reports in DIR
  -h, --help         show this help

Environment:
  DURATION=8 WARMUP=2 CONNECTIONS=32 THREADS=1 SERVER_CPU=0 CLIENT_CPU=1
  PERF_FREQ=2999           cpu-clock samples per second
  TOP=25                   symbols listed
  STARTUP_TIMEOUT=20 WRK=wrk PERF=perf PYTHON=/usr/bin/python3
EOF
}

PROG=profile.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
. "$SCRIPT_DIR/common.sh"

DURATION=${DURATION:-8}
WARMUP=${WARMUP:-2}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
STARTUP_TIMEOUT=${STARTUP_TIMEOUT:-20}
PERF_FREQ=${PERF_FREQ:-2999}
TOP=${TOP:-25}
PYTHON=${PYTHON:-/usr/bin/python3}
WRK=${WRK:-wrk}
PERF=${PERF:-perf}
NAME=""
URL_PATH=/
DO_PERF=1
DO_TRACE=0
MARKDOWN=""
LOG_DIR=""
SERVERS=""

while (($#)); do
    case $1 in
        --name|--name=*) take_value NAME "a NAME" "$@" ;;
        --path|--path=*) take_value URL_PATH "a PATH" "$@" ;;
        --duration|--duration=*) take_value DURATION SECS "$@" ;;
        --syscalls) DO_TRACE=1; SHIFT=1 ;;
        --no-perf) DO_PERF=0; SHIFT=1 ;;
        --) shift; break ;;
        *) common_option "$@" ;;
    esac
    shift "$SHIFT"
done
(($#)) || { usage >&2; die "no server command (give it after --)"; }
CMD_TEMPLATE=("$@")
check_uints DURATION WARMUP CONNECTIONS THREADS SERVER_CPU CLIENT_CPU STARTUP_TIMEOUT PERF_FREQ TOP
((DURATION > 0)) || die "DURATION must be > 0"
[[ $URL_PATH == /* ]] || die "--path must start with /"
[[ -n $NAME ]] || NAME=$(basename -- "${CMD_TEMPLATE[0]}")

resolve_paths
cd -- "$REPO_ROOT"
tools=(taskset setsid timeout curl ps "$WRK" "$PYTHON")
if ((DO_PERF || DO_TRACE)); then tools+=("$PERF"); fi
check_setup "${tools[@]}"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0prof.XXXXXX")
common_traps
COPY_LOGS_ON_EXIT=1

# ---------------------------------------------------------------------------
PORT=$(free_port)
SCMD=()
for w in "${CMD_TEMPLATE[@]}"; do SCMD+=("${w//PORT/$PORT}"); done
URL="http://127.0.0.1:$PORT$URL_PATH"
SERVER_LINE=$(q taskset -c "$SERVER_CPU" "${SCMD[@]}")
ENV_LINE=""
for v in VIRTUAL_ENV PYTHONPATH; do
    if [[ -n ${!v:-} ]]; then ENV_LINE+="$v=${!v//$REPO_ROOT/\$PWD} "; fi
done

host_info
BENCH_VENV_VERSIONS=$(bench_venv_versions)
PERF_VERSION=$(ver "$PERF" --version)
printf 'profile: %s\nhost: %s\nm0serve tree: %s\n' "$NAME" "$HOST_INFO" "$(m0serve_version git)"
printf 'bench venv %s\n' "$BENCH_VENV_VERSIONS"
printf '$ %s%s\n' "$ENV_LINE" "$SERVER_LINE"
background_load "$SERVER_CPU" "$CLIENT_CPU"

start_server "$NAME" TERM "$SERVER_CPU" "$TMP/server.log" "${SCMD[@]}"
if ! wait_http "$URL" "$STARTUP_TIMEOUT" any; then
    printf 'the server did not answer %s; log:\n' "$URL"; tail -n 20 "$TMP/server.log" | sed 's/^/   | /'
    exit 1
fi

# The worker: the session leader's only child, else the leader itself.
WORKER=$(only_child_or_self "$SERVER_SID")
if [[ $WORKER != "$SERVER_SID" ]]; then WDESC="the leader's only child"; else WDESC="the leader itself"; fi
printf 'worker: pid %s (%s), %s\n' "$WORKER" "$WDESC" "$(tr '\0' ' ' </proc/"$WORKER"/cmdline | cut -c1-120)"

NOISY_RUNS=0
NOISE=()
# phase_wrk LABEL SECONDS: one wrk run with the noise check; sets P_RPS P_REQ P_P50 P_P99
phase_wrk() {
    local label=$1 secs=$2 line
    noise_begin
    run_wrk "$THREADS" "$CONNECTIONS" "$secs" "$URL" "$TMP/wrk.$label.txt" || true
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    noise_line "$SERVER_CPU" "$CLIENT_CPU"
    if noisy; then
        NOISY_RUNS=$((NOISY_RUNS + 1)); NOISE+=("$label: $(noise_desc "$SERVER_CPU" "$CLIENT_CPU")")
        printf '   warning: noisy phase (other processes on the pinned cores)\n' >&2
    fi
    if line=$(parse_wrk "$TMP/wrk.$label.txt"); then
        IFS=$'\t' read -r P_RPS P_P50 P_P99 P_REQ _ _ <<<"$line"
    else
        P_RPS=0; P_P50=-; P_P99=-; P_REQ=0
        sed 's/^/   | /' "$TMP/wrk.$label.txt"
    fi
    printf '   %s: %s req/s, p50 %s ms, p99 %s ms, %s requests\n' "$label" "$P_RPS" "$P_P50" "$P_P99" "$P_REQ"
}

# thread_ctx: "tid comm voluntary involuntary" for every thread of WORKER
thread_ctx() {
    local t
    for t in /proc/"$WORKER"/task/*; do
        [[ -r $t/status ]] || continue
        awk -v tid="${t##*/}" '
            /^Name:/ { name = $2 }
            /^voluntary_ctxt_switches:/ { v = $2 }
            /^nonvoluntary_ctxt_switches:/ { n = $2 }
            END { print tid, name, v + 0, n + 0 }' "$t/status"
    done
}

if ((WARMUP > 0)); then
    printf 'warm-up %ss\n' "$WARMUP"
    run_wrk "$THREADS" "$CONNECTIONS" "$WARMUP" "$URL" "$TMP/wrk.warmup.txt" || true
fi
WRK_LINE=$(wrk_cmd "$THREADS" "$CONNECTIONS" "$DURATION" "$URL")

# ---- phase 1: clean run, context switches ----------------------------------
printf '\n== phase 1: %s\n' "$WRK_LINE"
thread_ctx >"$TMP/ctx.before"
phase_wrk clean "$DURATION"
thread_ctx >"$TMP/ctx.after"
C_RPS=$P_RPS; C_P50=$P_P50; C_P99=$P_P99; C_REQ=$P_REQ
# Per thread (threads born during the run count from 0); the worker's main
# thread (tid == pid) apart from the others.
CTX_TABLE=$(awk -v pid="$WORKER" -v req="$C_REQ" '
    FNR == NR { bv[$1] = $3; bn[$1] = $4; next }
    {
        dv = $3 - bv[$1]; dn = $4 - bn[$1]
        if ($1 == pid) { mv = dv; mn = dn; mname = $2 }
        else { ov += dv; on += dn; k++; if (dv + dn > 0) act++ }
    }
    END {
        r = req > 0 ? req : 1
        printf "main thread (%s)\t%d\t%d\t%.3f\t%.3f\n", mname, mv, mn, mv / r, mn / r
        printf "other threads (%d, %d switched)\t%d\t%d\t%.3f\t%.3f\n", k, act, ov, on, ov / r, on / r
        printf "all\t%d\t%d\t%.3f\t%.3f\n", mv + ov, mn + on, (mv + ov) / r, (mn + on) / r
    }' "$TMP/ctx.before" "$TMP/ctx.after")
NTHREADS=$(wc -l <"$TMP/ctx.after")
printf '   worker threads: %s\n   context switches during the run (voluntary, involuntary, per request):\n' "$NTHREADS"
while IFS=$'\t' read -r who v n vr nr; do
    printf '     %-34s %9s %9s   %7s %7s\n' "$who" "$v" "$n" "$vr" "$nr"
done <<<"$CTX_TABLE"

# ---- phase 2: perf record ----------------------------------------------------
# dso_group DSO -> the group a library's samples count under
GROUPS_AWK='
function grp(d) {
    if (d ~ /^\[kernel/ || d ~ /^\[vdso/ || d == "[unknown]" && 0) return "kernel"
    if (d ~ /libpython3/ || d ~ /^python3/) return "CPython"
    if (d ~ /^m0serve/) return "m0serve"
    if (d ~ /^loop\.cpython/ || d ~ /uvloop/) return "uvloop"
    if (d ~ /^libuv/) return "uvloop"
    if (d ~ /^parser\.cpython/ || d ~ /^url_parser\.cpython/ || d ~ /httptools/) return "httptools"
    if (d ~ /^_granian/ || d ~ /granian/) return "granian"
    if (d ~ /^libc\.so/ || d ~ /^libc-/ || d ~ /^ld-linux/ || d ~ /^libm\.so/ || d ~ /^libpthread/) return "libc"
    if (d ~ /^_asyncio\.cpython/) return "CPython"
    if (d ~ /pydantic_core/) return "pydantic-core"
    if (d ~ /\.cpython-/ ) return "other extension modules"
    return "other (" d ")"
}'
PERF_GROUPS=""; PERF_THREADS=""; PERF_SYS=""; PERF_TOP=""; PERF_SAMPLES=0
if ((DO_PERF)); then
    printf '\n== phase 2: perf record -e cpu-clock -F %s -g -p %s, under the same wrk load\n' "$PERF_FREQ" "$WORKER"
    # perf starts first and runs for the whole wrk run (bounded by timeout).
    timeout -s INT $((DURATION + 15)) "$PERF" record -q -e cpu-clock -F "$PERF_FREQ" -g -p "$WORKER" \
        -o "$TMP/perf.data" >"$TMP/perf.record.log" 2>&1 &
    perf_pid=$!
    sleep 0.5
    phase_wrk perf "$DURATION"
    P_PERF_RPS=$P_RPS
    kill -s INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    if [[ -s $TMP/perf.data ]]; then
        "$PERF" report -i "$TMP/perf.data" --no-children --sort dso --stdio -q -g none 2>/dev/null >"$TMP/perf.dso.txt" || true
        "$PERF" report -i "$TMP/perf.data" --no-children --sort pid --stdio -q -g none 2>/dev/null >"$TMP/perf.tid.txt" || true
        "$PERF" report -i "$TMP/perf.data" --no-children --sort dso,sym --stdio -q -g none 2>/dev/null >"$TMP/perf.sym.txt" || true
        "$PERF" report -i "$TMP/perf.data" --children --sort sym --stdio -q -g none 2>/dev/null >"$TMP/perf.children.txt" || true
        PERF_SAMPLES=$("$PERF" script -i "$TMP/perf.data" -F tid 2>/dev/null | wc -l)
        PERF_GROUPS=$(awk "$GROUPS_AWK"'
            { p = $1; sub(/%/, "", p); d = $2; for (i = 3; i <= NF; i++) d = d " " $i; g[grp(d)] += p }
            END { for (k in g) if (g[k] >= 0.05) printf "%s\t%.1f\n", k, g[k] }' "$TMP/perf.dso.txt" | sort -t$'\t' -k2,2gr)
        PERF_THREADS=$(awk -v pid="$WORKER" '
            NF >= 2 { p = $1; sub(/%/, "", p); split($2, a, ":"); tid = a[1] + 0   # "TID:comm"
              if (tid == pid) m += p; else { o += p; n++ } }
            END { printf "main thread\t%.1f\nother threads (%d with samples)\t%.1f\n", m, n, o }' "$TMP/perf.tid.txt")
        # The kernel's system-call entry points, inclusive of everything below
        # them (send/receive paths, the scheduler inside futex/epoll waits);
        # schedule = every context switch, wherever it happened; net_rx_action
        # = loopback receive processing (softirq) charged to this process.
        PERF_SYS=$(awk '$NF ~ /^(__x64_sys_|__do_sys_|ksys_)/ || $NF ~ /^(schedule|net_rx_action|asm_sysvec_apic_timer_interrupt|asm_sysvec_reschedule_ipi)$/ {
                c = $1; sub(/%/, "", c); if (c + 0 >= 0.5) printf "%s\t%s\n", $NF, c }' "$TMP/perf.children.txt" |
            sort -t$'\t' -k2,2gr | awk -F'\t' '!seen[$1]++ && n++ < 14')
        PERF_TOP=$(awk -v top="$TOP" "$GROUPS_AWK"'
            NF >= 4 { p = $1; sub(/%/, "", p); d = $2; s = $4; for (i = 5; i <= NF; i++) s = s " " $i
                      if (n++ < top) printf "%s\t%s\t%s\t%s\n", p, grp(d), d, s }' "$TMP/perf.sym.txt")
        printf '   %s samples\n   CPU of the worker by library (self time):\n' "$PERF_SAMPLES"
        while IFS=$'\t' read -r g p; do printf '     %-26s %6s%%\n' "$g" "$p"; done <<<"$PERF_GROUPS"
        printf '   by thread:\n'
        while IFS=$'\t' read -r g p; do printf '     %-34s %6s%%\n' "$g" "$p"; done <<<"$PERF_THREADS"
        printf '   kernel entry points (inclusive):\n'
        while IFS=$'\t' read -r g p; do printf '     %-34s %6s%%\n' "$g" "$p"; done <<<"$PERF_SYS"
        printf '   top symbols (self):\n'
        while IFS=$'\t' read -r p g d s; do printf '     %6s%%  %-10s %-28s %s\n' "$p" "$g" "${d:0:28}" "${s:0:70}"; done <<<"$PERF_TOP"
    else
        printf '   perf recorded nothing; its log:\n'; sed 's/^/   | /' "$TMP/perf.record.log"
        DO_PERF=0
    fi
fi

# ---- phase 3: perf trace -----------------------------------------------------
TRACE_TABLE=""
if ((DO_TRACE)); then
    printf '\n== phase 3: perf trace -s -p %s, under the same wrk load (perf trace slows the server)\n' "$WORKER"
    timeout -s INT $((DURATION + 15)) "$PERF" trace -s -p "$WORKER" -o "$TMP/perf.trace.txt" >/dev/null 2>&1 &
    trace_pid=$!
    sleep 1
    phase_wrk trace "$DURATION"
    T_REQ=$P_REQ
    kill -s INT "$trace_pid" 2>/dev/null || true
    wait "$trace_pid" 2>/dev/null || true
    # perf trace -s: per thread a block "comm (tid), N events" then a table.
    # Calls per request, summed over the worker's threads, main thread apart.
    TRACE_TABLE=$(awk -v pid="$WORKER" -v req="$T_REQ" '
        /\([0-9]+\), [0-9]+ events/ { t = $0; sub(/^.*\(/, "", t); sub(/\).*$/, "", t); tid = t + 0; next }
        NF >= 3 && $2 ~ /^[0-9]+$/ && $1 ~ /^[a-z_0-9]+$/ && $1 != "syscall" {
            if (tid == pid) m[$1] += $2; else o[$1] += $2; all[$1] += $2 }
        END { r = req > 0 ? req : 1
              for (s in all) if (all[s] / r >= 0.01) printf "%s\t%.3f\t%.3f\t%.3f\n", s, m[s] / r, o[s] / r, all[s] / r }' \
        "$TMP/perf.trace.txt" | sort -t$'\t' -k4,4gr)
    printf '   system calls per request (%s requests):  main thread / other threads / all\n' "$T_REQ"
    while IFS=$'\t' read -r s a b c; do printf '     %-18s %8s %8s %8s\n' "$s" "$a" "$b" "$c"; done <<<"$TRACE_TABLE"
fi

session_alive "$SERVER_SID" || printf 'warning: the server died during the run\n' >&2
stop_server
if ((NOISY_RUNS)); then
    printf '\nwarning: %s phase(s) had other processes on the pinned cores: %s\n' "$NOISY_RUNS" "${NOISE[*]}"
fi
if [[ -n $LOG_DIR ]]; then printf 'logs, wrk output and perf reports: %s\n' "$LOG_DIR"; fi

# shellcheck disable=SC2016  # backticks are markdown, not expansions
markdown_report() {
    md_header "Where the time goes: $NAME"
    printf -- '- m0serve tree: %s; bench venv: %s; %s\n' "$(m0serve_version git)" "$BENCH_VENV_VERSIONS" "$PERF_VERSION"
    printf -- '- server: `%s%s` (pinned to CPU %s); worker pid = %s\n' "$ENV_LINE" "$SERVER_LINE" "$SERVER_CPU" "$WDESC"
    printf -- '- load: `%s` (CPU %s), after a %ss warm-up\n' "$WRK_LINE" "$CLIENT_CPU" "$WARMUP"
    printf -- '- background load: %s\n' "$BACKGROUND"
    if ((NOISY_RUNS)); then printf -- '- **noisy phases**: %s\n' "${NOISE[*]}"; fi
    printf '\n## Clean run\n\n%s req/s, p50 %s ms, p99 %s ms, %s requests; %s worker threads at the end.\n\n' "$C_RPS" "$C_P50" "$C_P99" "$C_REQ" "$NTHREADS"
    printf '| threads | voluntary switches | involuntary | voluntary / request | involuntary / request |\n|---|---:|---:|---:|---:|\n'
    while IFS=$'\t' read -r who v n vr nr; do printf '| %s | %s | %s | %s | %s |\n' "$who" "$v" "$n" "$vr" "$nr"; done <<<"$CTX_TABLE"
    if ((DO_PERF)); then
        printf '\n## perf record -e cpu-clock -F %s -g (%s samples; %s req/s while recording)\n\n' "$PERF_FREQ" "$PERF_SAMPLES" "$P_PERF_RPS"
        printf '| library | %% of the worker'"'"'s samples (self) |\n|---|---:|\n'
        while IFS=$'\t' read -r g p; do printf '| %s | %s |\n' "$g" "$p"; done <<<"$PERF_GROUPS"
        printf '\n| thread | %% of samples |\n|---|---:|\n'
        while IFS=$'\t' read -r g p; do printf '| %s | %s |\n' "$g" "$p"; done <<<"$PERF_THREADS"
        printf '\nKernel entry points, inclusive (%% of all samples):\n\n| entry | %% |\n|---|---:|\n'
        while IFS=$'\t' read -r g p; do printf '| `%s` | %s |\n' "$g" "$p"; done <<<"$PERF_SYS"
        printf '\nTop %s symbols (self):\n\n| %% | group | library | symbol |\n|---:|---|---|---|\n' "$TOP"
        while IFS=$'\t' read -r p g d s; do printf '| %s | %s | %s | `%s` |\n' "$p" "$g" "$d" "$s"; done <<<"$PERF_TOP"
    fi
    if ((DO_TRACE)); then
        printf '\n## System calls per request (`perf trace -s`, %s requests)\n\n| syscall | main thread | other threads | all |\n|---|---:|---:|---:|\n' "$T_REQ"
        while IFS=$'\t' read -r s a b c; do printf '| %s | %s | %s | %s |\n' "$s" "$a" "$b" "$c"; done <<<"$TRACE_TABLE"
    fi
    printf '\nCommand:\n\n```sh\n%sbench/profile.sh --name %s --path %s --duration %s%s -- %s\n```\n' "$ENV_LINE" "$(q "$NAME")" "$URL_PATH" "$DURATION" \
        "$( ((DO_TRACE)) && printf ' --syscalls')" "$(q "${CMD_TEMPLATE[@]}")"
}
write_markdown markdown_report
