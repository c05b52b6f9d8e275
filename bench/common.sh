# bench/common.sh — helpers shared by bench/run.sh, bench/mixed.sh and
# bench/realtime.sh.
# shellcheck shell=bash
#
# Sourced, not run, right after the script has set PROG (its name, for
# messages) and SCRIPT_DIR.  Conventions: every server runs in its own
# session (setsid), so stopping it signals the whole process group plus
# every descendant; every wait has a bound; an EXIT trap stops whatever is
# still running.
#
# The sourcing script sets PYTHON, TMP and calls `common_traps` after
# defining TMP.
#
# The Python peers (gunicorn, uvicorn with uvloop and httptools, granian,
# hypercorn) and the frameworks come from PyPI into the bench venv:
# `make bench-venv` makes .venv-bench from /usr/bin/python3 (the interpreter
# m0serve embeds) with requirements/bench.txt.  BENCH_VENV=DIR picks another;
# resolve_paths sets BENCH_VENV and BENCH_PY (its python).  uWSGI is Debian's
# uwsgi-core with its python3 plugin (the same CPython).

INVOKE_DIR=$PWD
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)

die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 2; }
((BASH_VERSINFO[0] >= 5)) || die "needs bash >= 5 (found $BASH_VERSION)"

# ---- options ---------------------------------------------------------------
# Parsing loop of every script:
#   while (($#)); do
#       case $1 in
#           --own-option) ...; SHIFT=1 ;;
#           *) common_option "$@" ;;
#       esac
#       shift "$SHIFT"
#   done

# take_value VAR WHAT ARGS...: the value of the option ARGS[0] ("--opt VALUE"
# or "--opt=VALUE") into VAR; sets SHIFT to the number of words used.
# shellcheck disable=SC2034  # SHIFT is read by the sourcing script's loop
take_value() {
    local -n _tv_var=$1
    local what=$2; shift 2
    if [[ $1 == *=* ]]; then
        _tv_var=${1#*=}; SHIFT=1
    else
        (($# >= 2)) || die "$1 needs $what"
        _tv_var=$2; SHIFT=2
    fi
}

# common_option ARGS...: --markdown, --servers, --log-dir, -h/--help; any
# other word is an error.  Needs the script's `usage`.
common_option() {
    case $1 in
        --markdown|--markdown=*) take_value MARKDOWN "a FILE" "$@" ;;
        --servers|--servers=*) take_value SERVERS "a LIST" "$@" ;;
        --log-dir|--log-dir=*) take_value LOG_DIR "a DIR" "$@" ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
}

# check_uints VAR...: each must hold a non-negative integer.
check_uints() {
    local v
    for v in "$@"; do
        [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
    done
}

# Output files given relative to where the user ran the script; the m0serve
# binary: default ./m0serve at the repo root (the command line in the report
# then reads exactly `./m0serve ...`), a relative path with a slash is taken
# from the invocation directory when it exists there.
abs_from_invoke() { if [[ $1 == /* ]]; then printf '%s\n' "$1"; else printf '%s\n' "$INVOKE_DIR/$1"; fi; }
resolve_paths() {
    if [[ -n $MARKDOWN ]]; then MARKDOWN=$(abs_from_invoke "$MARKDOWN"); fi
    if [[ -n $LOG_DIR ]]; then LOG_DIR=$(abs_from_invoke "$LOG_DIR"); fi
    if [[ -z ${BENCH_VENV:-} ]]; then
        BENCH_VENV=.venv-bench               # the scripts run from the repo root
    else
        BENCH_VENV=$(abs_from_invoke "$BENCH_VENV")
    fi
    BENCH_PY=$BENCH_VENV/bin/python
    if [[ -z ${M0SERVE:-} ]]; then
        M0SERVE=./m0serve
    elif [[ $M0SERVE == */* && $M0SERVE != /* && -e $INVOKE_DIR/$M0SERVE ]]; then
        M0SERVE=$INVOKE_DIR/$M0SERVE
    fi
}

# check_setup TOOL...: the tools exist; SERVER_CPU and CLIENT_CPU exist on
# this machine (sets NCPU).
check_setup() {
    local tool
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || die "required tool not found: $tool"
    done
    NCPU=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
    ((SERVER_CPU < NCPU && CLIENT_CPU < NCPU)) ||
        die "SERVER_CPU=$SERVER_CPU / CLIENT_CPU=$CLIENT_CPU not valid on a $NCPU-CPU machine"
}

# q ARGS... -> shell-quoted command line (for the report).
q() { local out="" a; for a in "$@"; do out+="${out:+ }$(printf '%q' "$a")"; done; printf '%s\n' "$out"; }

# Milliseconds since the epoch (bash >= 5 EPOCHREALTIME; locale-proof).
now_ms() { local t=${EPOCHREALTIME/[.,]/}; printf '%s\n' "$((10#$t / 1000))"; }

# A free 127.0.0.1 port (kernel-assigned: the suite's free_port in
# tests/e2e/serverproc.py; double-checked against listeners).
free_port() {
    local port i
    for ((i = 0; i < 20; i++)); do
        port=$(PYTHONPATH="$REPO_ROOT/tests/e2e" "$PYTHON" -c 'from serverproc import free_port; print(free_port())')
        if command -v ss >/dev/null 2>&1; then
            [[ -z $(ss -Htln "sport = :$port" 2>/dev/null) ]] || continue
        fi
        printf '%s\n' "$port"
        return 0
    done
    return 1
}

# Processes of a session (pgid == sid == leader pid) plus every descendant
# of the leader.
session_pids() {
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
    local list stats
    list=$(IFS=,; printf '%s' "$*")
    stats=$(ps -o stat= -p "$list" 2>/dev/null) || true
    grep -qv -e '^ *Z' -e '^ *$' <<<"$stats"
}

session_alive() {
    local pids
    mapfile -t pids < <(session_pids "$1")
    pids_alive "${pids[@]}"
}

# stop_session SID SIGNAL [GRACE_SECONDS]: signal the tree, wait (default
# 5 s), then SIGKILL.  Sets STOP_HOW to "clean" or "SIGKILL needed".
STOP_HOW=clean
stop_session() {
    local sid=$1 sig=$2 grace=${3:-5} i p pids
    STOP_HOW=clean
    [[ -n $sid ]] || return 0
    mapfile -t pids < <(session_pids "$sid")
    kill -s "$sig" -- "-$sid" 2>/dev/null || true
    for p in "${pids[@]}"; do kill -s "$sig" "$p" 2>/dev/null || true; done
    for ((i = 0; i < grace * 10; i++)); do
        pids_alive "${pids[@]}" || break
        sleep 0.1
    done
    if pids_alive "${pids[@]}"; then
        STOP_HOW="SIGKILL needed"
        mapfile -t -O "${#pids[@]}" pids < <(session_pids "$sid")
        kill -s KILL -- "-$sid" 2>/dev/null || true
        for p in "${pids[@]}"; do kill -s KILL "$p" 2>/dev/null || true; done
        for ((i = 0; i < 30; i++)); do
            pids_alive "${pids[@]}" || break
            sleep 0.1
        done
    fi
    wait "$sid" 2>/dev/null || true
}

# Sessions started by the script that the EXIT trap must stop:
# "sid:signal" words.  SERVER_SID is the running server (stopped last).
# WRK_PID is the running wrk (see run_wrk).  COPY_LOGS_ON_EXIT=1: the EXIT
# trap copies $TMP to $LOG_DIR (when --log-dir was given).
declare -a LIVE_SESSIONS=()
SERVER_SID=""
SERVER_STOPSIG=TERM
WRK_PID=""
COPY_LOGS_ON_EXIT=0

track_session() { LIVE_SESSIONS+=("$1:$2"); }
untrack_session() {
    local keep=() s
    for s in "${LIVE_SESSIONS[@]}"; do [[ ${s%%:*} == "$1" ]] || keep+=("$s"); done
    LIVE_SESSIONS=("${keep[@]}")
}

common_cleanup() {   # common_cleanup [EXIT_STATUS]
    local rc=${1:-$?} s
    trap - EXIT INT TERM HUP
    if [[ -n $WRK_PID ]]; then kill -s TERM "$WRK_PID" 2>/dev/null || true; wait "$WRK_PID" 2>/dev/null || true; fi
    if ((COPY_LOGS_ON_EXIT)) && [[ -n $LOG_DIR && -d ${TMP:-} ]]; then
        { mkdir -p "$LOG_DIR"; cp -r "$TMP"/. "$LOG_DIR"/ 2>/dev/null; } || true
    fi
    for s in "${LIVE_SESSIONS[@]}"; do stop_session "${s%%:*}" "${s##*:}" 3; done
    if [[ -n $SERVER_SID ]]; then stop_session "$SERVER_SID" "$SERVER_STOPSIG"; fi
    [[ -z ${TMP:-} ]] || rm -rf -- "$TMP"
    exit "$rc"
}
common_traps() {
    trap common_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}

# start_server NAME STOPSIG CPU LOG CMD...: start CMD pinned to CPU in its
# own session; sets SERVER_SID.
start_server() {
    local name=$1 stopsig=$2 cpu=$3 log=$4; shift 4
    SERVER_STOPSIG=$stopsig
    setsid taskset -c "$cpu" "$@" >"$log" 2>&1 </dev/null &
    SERVER_SID=$!
}

# stop_server: stop SERVER_SID; sets STOP_HOW.
stop_server() {
    stop_session "$SERVER_SID" "$SERVER_STOPSIG"
    SERVER_SID=""
}

# wait_http URL TIMEOUT_S [any]: poll until URL answers 2xx/3xx (with "any":
# any HTTP answer) while the server session lives.  The bound is wall-clock
# time, not a number of attempts (one can take 1 s against a mute server).
# Returns 0 ready, 1 exited, 2 timed out.
wait_http() {
    local url=$1 deadline=$(($(now_ms) + $2 * 1000)) fail=-f
    if [[ ${3:-} == any ]]; then fail=""; fi
    while (($(now_ms) < deadline)); do
        session_alive "$SERVER_SID" || return 1
        if curl -s $fail -o /dev/null --max-time 1 "$url" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 2
}

# run_wrk THREADS CONNS SECONDS URL OUTFILE -> wrk's status (wrk pinned to
# CLIENT_CPU, bounded by timeout; WRK_PID while it runs)
run_wrk() {
    local threads=$1 conns=$2 secs=$3 url=$4 out=$5 rc=0
    timeout -k 5 $((secs + 30)) taskset -c "$CLIENT_CPU" \
        "$WRK" -t"$threads" -c"$conns" -d"${secs}s" --latency "$url" >"$out" 2>&1 &
    WRK_PID=$!
    wait "$WRK_PID" || rc=$?
    WRK_PID=""
    return "$rc"
}
# wrk_cmd THREADS CONNS SECONDS URL -> the same wrk command line, quoted
wrk_cmd() { q taskset -c "$CLIENT_CPU" "$WRK" -t"$1" -c"$2" -d"$3s" --latency "$4"; }

# parse_wrk FILE [DECIMALS [strict]]
#   -> "rps<TAB>p50ms<TAB>p99ms<TAB>requests<TAB>errors<TAB>detail"
# (exit 1 when wrk printed no req/s figure).  Latencies with DECIMALS
# (default 2) decimals, "-" when missing or when nothing completed; with
# "strict", exit 1 as well when a latency is missing, and wrk's figures are
# kept when nothing completed.  errors = connect + write + timeout socket
# errors + non-2xx/3xx; "+N read" is shown apart (servers that close after
# each response without announcing it).
parse_wrk() {
    awk -v dec="${2:-2}" -v strict="${3:-}" '
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
        / requests in /               { reqs = $1 }
        $1 == "50%"                   { p50 = ms($2) }
        $1 == "99%"                   { p99 = ms($2) }
        /Socket errors:/              { gsub(",", ""); err += $4 + $8 + $10; rd = $6; sock = $0; sub(/^ *Socket errors: */, "", sock) }
        /Non-2xx or 3xx responses:/   { err += $NF; non2xx = $NF }
        END {
            if (rps == "") exit 1
            if (strict == "strict" && (p50 == "" || p99 == "")) exit 1
            # wrk prints 0.00us when it recorded no latency: nothing completed,
            # or every completed request had timed out (counted as errors).
            none = (reqs + 0 == 0 || (p50 + 0 == 0 && p99 + 0 == 0)) && strict != "strict"
            if (p50 == "" || none) p50 = "nan"
            if (p99 == "" || none) p99 = "nan"
            f = "%." dec "f"
            detail = ""
            if (sock != "") detail = "socket errors: " sock
            if (non2xx != "") detail = detail (detail == "" ? "" : "; ") "non-2xx/3xx: " non2xx
            e = sprintf("%d", err); if (rd > 0) e = e " +" rd " read"
            printf "%.0f\t%s\t%s\t%s\t%s\t%s\n", rps, (p50 == "nan" ? "-" : sprintf(f, p50)), (p99 == "nan" ? "-" : sprintf(f, p99)), reqs + 0, e, detail
        }' "$1"
}

# cpu_snapshot: "cpuN busy total irq" lines from /proc/stat (clock ticks);
# busy = everything but idle and iowait, irq = irq + softirq (e.g. loopback
# packet processing, which is not charged to any process).
cpu_snapshot() {
    awk '/^cpu[0-9]+ / { t = 0; for (i = 2; i <= NF; i++) t += $i; print $1, t - $5 - $6, t, $7 + $8 }' /proc/stat 2>/dev/null || true
}
# cpu_busy BEFORE AFTER CPU [irq] -> busy (or irq+softirq) % of that CPU
cpu_busy() {
    local col=2
    if [[ ${4:-} == irq ]]; then col=4; fi
    awk -v want="cpu$3" -v col="$col" -v before="$1" -v after="$2" 'BEGIN {
        n = split(before, b, "\n"); for (i = 1; i <= n; i++) { split(b[i], f, " "); B[f[1]] = f[col]; T[f[1]] = f[3] }
        n = split(after, a, "\n"); for (i = 1; i <= n; i++) { split(a[i], f, " ")
            if (f[1] == want && (f[3] - T[want]) > 0) { printf "%.0f", 100 * (f[col] - B[want]) / (f[3] - T[want]); exit } }
        printf "?" }'
}

# session_ticks SID: user+system CPU ticks used so far by a session's
# processes (all threads: /proc/PID/stat of a process sums its threads).
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
session_ticks() {
    local p files=()
    for p in $(session_pids "$1"); do
        if [[ -r /proc/$p/stat ]]; then files+=("/proc/$p/stat"); fi
    done
    if ((${#files[@]} == 0)); then echo 0; return; fi
    # Fields after "pid (comm) ": $12 = utime, $13 = stime.
    awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }' "${files[@]}" 2>/dev/null || echo 0
}

# Noise check around a measurement:
#   noise_begin; ...measure...; noise_end SERVER_CPU CLIENT_CPU
# On the server core: SRV_CORE_BUSY (busy %), SRV_PROC_CPU (the server's
# processes, %), FOREIGN_CPU = busy - irq/softirq - server processes.
# On the client core: CLI_CORE_BUSY, CLI_PROC_CPU (children this shell
# reaped during the measurement, e.g. wrk, plus the sessions it tracks, e.g.
# the slow client), FOREIGN_CLI = busy - irq - those.  A FOREIGN value of
# 10 or more means another process took that core (a noisy run).
# Children CPU comes from the `times` builtin, which must not run in a
# subshell (a forked shell's children counters start at zero).
children_ms() {   # sets CHILD_MS (call directly, not in $(...))
    local line u s m x total=0
    times >"$TMP/.times"
    { read -r line; read -r u s; } <"$TMP/.times"
    for x in "$u" "$s"; do            # "1m2.345s" -> ms, with bash arithmetic only
        m=${x%%m*}; x=${x#*m}; x=${x%s}
        [[ $x == *.* ]] || x+=".000"
        x=${x%%.*}$(printf '%-3.3s' "${x#*.}" | tr ' ' 0)
        total=$((total + 10#$m * 60000 + 10#$x))
    done
    CHILD_MS=$total
}
live_ticks() {
    local s t=0
    for s in "${LIVE_SESSIONS[@]}"; do t=$((t + $(session_ticks "${s%%:*}"))); done
    printf '%s\n' "$t"
}
noise_begin() {
    NB_SNAP=$(cpu_snapshot); NB_TICKS=$(session_ticks "$SERVER_SID"); NB_LIVE=$(live_ticks)
    children_ms; NB_CHILD=$CHILD_MS; NB_T=$(now_ms)
}
noise_end() {
    local snap ticks live child t ms irq
    children_ms; child=$CHILD_MS; snap=$(cpu_snapshot); t=$(now_ms)
    ticks=$(session_ticks "$SERVER_SID"); live=$(live_ticks)
    ms=$((t - NB_T))
    SRV_CORE_BUSY=$(cpu_busy "$NB_SNAP" "$snap" "$1")
    irq=$(cpu_busy "$NB_SNAP" "$snap" "$1" irq)
    SRV_PROC_CPU=$(awk -v a="$NB_TICKS" -v b="$ticks" -v hz="$CLK_TCK" -v ms="$ms" \
        'BEGIN { if (ms > 0 && hz > 0) printf "%.0f", 100 * (b - a) / hz / (ms / 1000); else printf "?" }')
    FOREIGN_CPU="?"
    if [[ $SRV_CORE_BUSY =~ ^[0-9]+$ && $irq =~ ^[0-9]+$ && $SRV_PROC_CPU =~ ^[0-9]+$ ]]; then
        FOREIGN_CPU=$((SRV_CORE_BUSY - irq - SRV_PROC_CPU))
        ((FOREIGN_CPU >= 0)) || FOREIGN_CPU=0
    fi
    FOREIGN_CLI="?"; CLI_CORE_BUSY="?"; CLI_PROC_CPU="?"
    if [[ -n ${2:-} ]]; then
        CLI_CORE_BUSY=$(cpu_busy "$NB_SNAP" "$snap" "$2")
        irq=$(cpu_busy "$NB_SNAP" "$snap" "$2" irq)
        CLI_PROC_CPU=$(awk -v c=$((child - NB_CHILD)) -v a="$NB_LIVE" -v b="$live" -v hz="$CLK_TCK" -v ms="$ms" \
            'BEGIN { if (ms > 0 && hz > 0) printf "%.0f", 100 * (c / 1000 + (b - a) / hz) / (ms / 1000); else printf "?" }')
        if [[ $CLI_CORE_BUSY =~ ^[0-9]+$ && $irq =~ ^[0-9]+$ && $CLI_PROC_CPU =~ ^[0-9]+$ ]]; then
            FOREIGN_CLI=$((CLI_CORE_BUSY - irq - CLI_PROC_CPU))
            ((FOREIGN_CLI >= 0)) || FOREIGN_CLI=0
        fi
    fi
}
noisy() { [[ ($FOREIGN_CPU =~ ^[0-9]+$ && $FOREIGN_CPU -ge 10) || ($FOREIGN_CLI =~ ^[0-9]+$ && $FOREIGN_CLI -ge 10) ]]; }
noise_desc() {   # "other processes ~X% of CPU s, ~Y% of CPU c"
    printf 'other processes ~%s%% of CPU %s, ~%s%% of CPU %s' "$FOREIGN_CPU" "$1" "$FOREIGN_CLI" "$2"
}
noise_line() {   # one line for the console
    printf '   CPU %s (server): %s%% busy, server %s%%; CPU %s (client): %s%% busy, client %s%%; other processes ~%s%% / ~%s%%\n' \
        "$1" "$SRV_CORE_BUSY" "$SRV_PROC_CPU" "$2" "$CLI_CORE_BUSY" "$CLI_PROC_CPU" "$FOREIGN_CPU" "$FOREIGN_CLI"
}

# background_load SERVER_CPU CLIENT_CPU [short]: sample the two cores for 1 s
# (anything else running skews the numbers, so say so up front); sets
# BACKGROUND, prints it, and warns when busy.  "short" (bench/run.sh's
# format): no loadavg, and the warning, prefixed with $PROG, comes after the
# line.
background_load() {
    local s0 s1 a b busy=0
    s0=$(cpu_snapshot); sleep 1; s1=$(cpu_snapshot)
    a=$(cpu_busy "$s0" "$s1" "$1"); b=$(cpu_busy "$s0" "$s1" "$2")
    BACKGROUND="CPU $1 ${a}% busy, CPU $2 ${b}% busy before the runs"
    if [[ ($a =~ ^[0-9]+$ && $a -ge 10) || ($b =~ ^[0-9]+$ && $b -ge 10) ]]; then busy=1; fi
    if [[ ${3:-} == short ]]; then
        printf 'background load: %s\n' "$BACKGROUND"
        if ((busy)); then
            printf '%s: warning: the machine is not idle; results will be noisy\n' "$PROG" >&2
            BACKGROUND+=" (machine not idle: results are noisy)"
        fi
        return 0
    fi
    BACKGROUND+="; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
    if ((busy)); then
        printf 'warning: the machine is not idle; results will be noisy\n' >&2
        BACKGROUND+=" (machine not idle: results are noisy)"
    fi
    printf 'background load: %s\n' "$BACKGROUND"
}

# ratio A B -> A/B with 2 decimals, or n/a
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }'
}

ver() { local v; v=$(timeout 5 "$@" 2>&1 | head -n1) || true; printf '%s\n' "${v:-unknown}"; }

# bench_venv_versions: one line with the version of every peer and framework
# in the bench venv ("-" for one not installed), or why there is none.
bench_venv_versions() {
    if [[ ! -x $BENCH_PY ]]; then
        printf '%s: no venv (run make bench-venv)\n' "$BENCH_VENV"
        return 0
    fi
    timeout 10 "$BENCH_PY" - "$BENCH_VENV" <<'PY' 2>/dev/null || printf '%s: versions unknown\n' "$BENCH_VENV"
import importlib.metadata as md
import sys
found = []
for name in ("gunicorn", "uvicorn", "uvloop", "httptools", "granian", "hypercorn", "Django", "Flask", "FastAPI"):
    try:
        found.append("%s %s" % (name, md.version(name)))
    except md.PackageNotFoundError:
        found.append("%s -" % name)
print("%s: %s; Python %s" % (sys.argv[1], ", ".join(found), sys.version.split()[0]))
PY
}

# host_info: sets HOST_INFO ("CPU model, N CPUs, Linux release"; needs NCPU).
host_info() {
    local model
    model=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
    HOST_INFO="${model:-unknown CPU}, $NCPU CPUs, Linux $(uname -r)"
}

# m0serve_version git|built: "git <commit>[ + uncommitted changes]"; with
# "built", plus the build time of $M0SERVE when it exists.
m0serve_version() {
    local v
    v="git $(git -C "$REPO_ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no commit)')"
    if [[ -n $(git -C "$REPO_ROOT" status --porcelain -- src include Makefile 2>/dev/null) ]]; then
        v+=" + uncommitted changes"
    fi
    if [[ $1 == built && -e $M0SERVE ]]; then
        v+=", binary $M0SERVE built $(date -u -r "$M0SERVE" '+%Y-%m-%d %H:%M:%S UTC' 2>/dev/null || echo '?')"
    fi
    printf '%s\n' "$v"
}

# ---- report ------------------------------------------------------------------
cell() { local v=${1:-}; printf '%s' "${v:--}"; }   # value or "-"

# print_notes KEY...: the console "notes:" block of NOTE[KEY] (trailing "; "
# dropped); sets NOTES to the number of keys with a note.
print_notes() {
    local k
    NOTES=0
    for k in "$@"; do
        if [[ -n ${NOTE[$k]:-} ]]; then
            ((NOTES++)) || printf '\nnotes:\n'
            printf '  %s: %s\n' "$k" "${NOTE[$k]%; }"
        fi
    done
}
# md_notes KEY...: the same as a markdown list (nothing without notes).
md_notes() {
    local k
    ((NOTES)) || return 0
    printf '\nNotes:\n\n'
    for k in "$@"; do [[ -z ${NOTE[$k]:-} ]] || printf -- '- %s: %s\n' "$k" "${NOTE[$k]%; }"; done
}

# md_header TITLE: the markdown report's title, date and host lines.
md_header() {
    printf '# %s\n\n' "$1"
    printf -- '- date: %s\n' "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    printf -- '- host: %s\n' "$HOST_INFO"
}

# write_markdown FUNCTION: FUNCTION's output is the report in $MARKDOWN.
write_markdown() {
    [[ -n $MARKDOWN ]] || return 0
    mkdir -p "$(dirname -- "$MARKDOWN")"
    "$1" >"$MARKDOWN"
    printf 'markdown report: %s\n' "$MARKDOWN"
}

# ---- helpers of the scripts that repeat measurements (before_after.sh,
# ---- stream.sh, asgi.sh) ---------------------------------------------------

# median V... -> the median of the numeric values ("-" and empty ignored),
# or "-" when there is none.
_sorted_nums() { printf '%s\n' "$@" | grep -E '^[0-9]+([.][0-9]+)?$' | sort -g; }
median() {
    _sorted_nums "$@" | awk '{ v[++n] = $1 + 0 }
        END { if (!n) { print "-"; exit }
              m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
              d = (m >= 100) ? 0 : (m >= 10 ? 1 : 2); printf "%.*f\n", d, m }'
}
# spread V... -> "(max - min) / median" in % of the numeric values, or "-"
# with fewer than two.
spread() {
    _sorted_nums "$@" | awk '{ v[++n] = $1 + 0 }
        END { if (n < 2) { print "-"; exit }
              m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
              if (m <= 0) { print "-"; exit }
              printf "%.0f\n", 100 * (v[n] - v[1]) / m }'
}
# vrange V... -> "min–max" of the numeric values ("-" with none).
vrange() {
    _sorted_nums "$@" | awk '{ v[++n] = $1 }
        END { if (!n) { print "-"; exit }
              if (n == 1) printf "%s\n", v[1]; else printf "%s–%s\n", v[1], v[n] }'
}

# only_child_or_self PID -> the pid of PID's only child (a prefork master's
# single worker: m0serve, granian, hypercorn -w 1), else PID itself
# (uvicorn).  multiprocessing's resource tracker (hypercorn starts one beside
# its worker) does not count as a child.
only_child_or_self() {
    local kids
    mapfile -t kids < <(ps -o pid=,args= --ppid "$1" 2>/dev/null | grep -v 'multiprocessing.resource_tracker' | awk '{ print $1 }')
    if ((${#kids[@]} == 1)) && [[ -n ${kids[0]} ]]; then printf '%s\n' "${kids[0]}"; else printf '%s\n' "$1"; fi
}
# thread_count PID -> the number of threads of PID ("?" when gone)
thread_count() {
    local n
    n=$(find "/proc/$1/task" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    if ((n > 0)); then printf '%s\n' "$n"; else printf '?\n'; fi
}

# measure_wrk CONNS SECONDS URL OUTFILE: one `wrk -t1` run inside a noise
# check (noise_begin/noise_end).  Sets M_RPS M_P50 M_P99 M_REQ M_ERR
# M_DETAIL (from parse_wrk; "-" when wrk printed no result, then returns 1),
# M_NOISE (empty, or what else ran on the pinned cores) and M_CLIENT_BOUND
# (1 when the client core was 95% busy or more).
measure_wrk() {
    local conns=$1 secs=$2 url=$3 out=$4 line rc=0
    noise_begin
    run_wrk 1 "$conns" "$secs" "$url" "$out" || true
    noise_end "$SERVER_CPU" "$CLIENT_CPU"
    M_NOISE=""; M_CLIENT_BOUND=0
    if noisy; then M_NOISE=$(noise_desc "$SERVER_CPU" "$CLIENT_CPU"); fi
    if [[ $CLI_CORE_BUSY =~ ^[0-9]+$ ]] && ((CLI_CORE_BUSY >= 95)); then M_CLIENT_BOUND=1; fi
    if line=$(parse_wrk "$out"); then
        IFS=$'\t' read -r M_RPS M_P50 M_P99 M_REQ M_ERR M_DETAIL <<<"$line"
    else
        M_RPS=-; M_P50=-; M_P99=-; M_REQ=0; M_ERR=-; M_DETAIL="wrk printed no result"; rc=1
    fi
    return "$rc"
}

# ---- the C bench tools (bench/hold_client.c, bench/fanout_floor.c) ----------
# build_bench_tools: compile them into build/bench/ with cc when missing or
# older than their source (`make bench-tools` does the same); sets
# HOLD_CLIENT and FANOUT_FLOOR (absolute paths). Returns 1, with the compiler's
# message on stderr, when cc is missing or fails.
build_bench_tools() {
    local out=$REPO_ROOT/build/bench t
    HOLD_CLIENT=$out/hold_client
    FANOUT_FLOOR=$out/fanout_floor
    mkdir -p "$out"
    for t in hold_client fanout_floor; do
        if [[ ! -x $out/$t || $REPO_ROOT/bench/$t.c -nt $out/$t ]]; then
            "${CC:-cc}" -std=gnu11 -O2 -g -Wall -Wextra -o "$out/$t.tmp" "$REPO_ROOT/bench/$t.c" -lm &&
                mv -f "$out/$t.tmp" "$out/$t" || return 1
        fi
    done
}

# raise_nofile WANT: the soft `ulimit -n` to WANT, raising the hard limit
# first when it is lower (needs CAP_SYS_RESOURCE; without it the soft limit
# stops at the hard one). Sets SOFT, HARD and FD_NOTE.
raise_nofile() {
    local want=$1
    HARD=$(ulimit -Hn)
    if [[ $HARD != unlimited ]] && ((HARD < want)); then
        ulimit -Hn "$want" 2>/dev/null || true
        HARD=$(ulimit -Hn)
    fi
    if [[ $HARD == unlimited ]] || ((HARD >= want)); then ulimit -Sn "$want"; else ulimit -Sn "$HARD"; fi
    SOFT=$(ulimit -Sn)
    FD_NOTE="ulimit -n: soft $SOFT, hard $HARD"
}
