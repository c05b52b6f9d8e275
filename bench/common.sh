# bench/common.sh — helpers shared by bench/mixed.sh and bench/realtime.sh.
#
# Sourced, not run.  Same conventions as bench/run.sh (which keeps its own
# copy of these helpers): every server runs in its own session (setsid), so
# stopping it signals the whole process group plus every descendant; every
# wait has a bound; an EXIT trap stops whatever is still running.
#
# The sourcing script sets PYTHON, TMP and calls `common_traps` after
# defining TMP.

# q ARGS... -> shell-quoted command line (for the report).
q() { local out="" a; for a in "$@"; do out+="${out:+ }$(printf '%q' "$a")"; done; printf '%s\n' "$out"; }

# Milliseconds since the epoch (bash >= 5 EPOCHREALTIME; locale-proof).
now_ms() { local t=${EPOCHREALTIME/[.,]/}; printf '%s\n' "$((10#$t / 1000))"; }

# A free 127.0.0.1 port (kernel-assigned, double-checked against listeners).
free_port() {
    local port i
    for ((i = 0; i < 20; i++)); do
        port=$("$PYTHON" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()')
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
declare -a LIVE_SESSIONS=()
SERVER_SID=""
SERVER_STOPSIG=TERM

track_session() { LIVE_SESSIONS+=("$1:$2"); }
untrack_session() {
    local keep=() s
    for s in "${LIVE_SESSIONS[@]}"; do [[ ${s%%:*} == "$1" ]] || keep+=("$s"); done
    LIVE_SESSIONS=("${keep[@]}")
}

common_cleanup() {   # common_cleanup [EXIT_STATUS]
    local rc=${1:-$?} s
    trap - EXIT INT TERM HUP
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

# wait_http URL TIMEOUT_S: poll until URL answers 200 while the server
# session lives.  Returns 0 ready, 1 exited, 2 timed out.
wait_http() {
    local url=$1 deadline=$(($(now_ms) + $2 * 1000))
    while (($(now_ms) < deadline)); do
        session_alive "$SERVER_SID" || return 1
        if curl -sf -o /dev/null --max-time 1 "$url" 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 2
}

# parse_wrk FILE -> "rps<TAB>p50ms<TAB>p99ms<TAB>requests<TAB>errors<TAB>detail"
# (exit 1 when wrk printed no latency/req/s figures).  errors = connect +
# write + timeout socket errors + non-2xx/3xx; "+N read" is shown apart
# (servers that close after each response without announcing it).
parse_wrk() {
    awk '
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
            if (p50 == "" || reqs + 0 == 0) p50 = "nan"     # wrk prints 0.00us when nothing completed
            if (p99 == "" || reqs + 0 == 0) p99 = "nan"
            detail = ""
            if (sock != "") detail = "socket errors: " sock
            if (non2xx != "") detail = detail (detail == "" ? "" : "; ") "non-2xx/3xx: " non2xx
            e = sprintf("%d", err); if (rd > 0) e = e " +" rd " read"
            printf "%.0f\t%s\t%s\t%s\t%s\t%s\n", rps, (p50 == "nan" ? "-" : sprintf("%.2f", p50)), (p99 == "nan" ? "-" : sprintf("%.2f", p99)), reqs + 0, e, detail
        }' "$1"
}

# cpu_snapshot / cpu_busy: per-core busy % from /proc/stat (as bench/run.sh).
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

# background_load SERVER_CPU CLIENT_CPU -> sets BACKGROUND (and warns when busy)
background_load() {
    local s0 s1 a b
    s0=$(cpu_snapshot); sleep 1; s1=$(cpu_snapshot)
    a=$(cpu_busy "$s0" "$s1" "$1"); b=$(cpu_busy "$s0" "$s1" "$2")
    BACKGROUND="CPU $1 ${a}% busy, CPU $2 ${b}% busy before the runs; loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
    if [[ ($a =~ ^[0-9]+$ && $a -ge 10) || ($b =~ ^[0-9]+$ && $b -ge 10) ]]; then
        printf 'warning: the machine is not idle; results will be noisy\n' >&2
        BACKGROUND+=" (machine not idle: results are noisy)"
    fi
}

# ratio A B -> A/B with 2 decimals, or n/a
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else printf "n/a" }'
}

ver() { local v; v=$(timeout 5 "$@" 2>&1 | head -n1) || true; printf '%s\n' "${v:-unknown}"; }
