#!/usr/bin/env bash
# bench/interp.sh — the interpreter's own speed inside m0serve (issue 29):
# bench/interp.py's pure-Python loop and JSON round trip under Debian's
# /usr/bin/python3, m0serve linked with the static libpython (LINK=static,
# what LINK=auto picks for Debian's python3) and m0serve linked with
# libpython3.11.so (LINK=shared). No HTTP in the figures: each run is timed
# inside the process that runs it (thread CPU time), and callgrind counts
# the instructions of one iteration / one round trip (the difference of two
# runs of different lengths, so start-up and the request cancel out).
#
#   bash bench/interp.sh [--rounds N] [--no-callgrind] [--markdown FILE]
#
# Environment: ROUNDS=7 (medians of that many; the subjects alternate within
# a round), LOOP_N=2000000, JSON_N=20000, CG_LOOP_N=400000, CG_JSON_N=4000,
# CPU=0 (every subject runs pinned to it), M0SERVE_STATIC / M0SERVE_SHARED
# (binaries; default: make builds build/interp-static and build/interp-shared),
# PYTHON=/usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}; LOOP_N=${LOOP_N:-2000000}; JSON_N=${JSON_N:-20000}
CG_LOOP_N=${CG_LOOP_N:-400000}; CG_JSON_N=${CG_JSON_N:-4000}; CPU=${CPU:-0}
PYTHON=${PYTHON:-/usr/bin/python3}; CALLGRIND=1; MARKDOWN=
while (($#)); do
    case $1 in
        --rounds) ROUNDS=$2; shift ;;
        --no-callgrind) CALLGRIND=0 ;;
        --markdown) MARKDOWN=$2; shift ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "interp.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
command -v valgrind >/dev/null || { ((CALLGRIND == 0)) || echo "interp.sh: no valgrind: thread CPU only" >&2; CALLGRIND=0; }

for link in static shared; do
    var=M0SERVE_${link^^}
    if [[ -z ${!var:-} ]]; then
        make --no-print-directory -j2 LINK=$link BUILD=build/interp-$link build/interp-$link/m0serve >&2
        printf -v "$var" '%s' "build/interp-$link/m0serve"
    fi
done
SUBJECTS=(python3 static shared)
declare -A BIN=([static]=$M0SERVE_STATIC [shared]=$M0SERVE_SHARED) PORT PID
TMP=$(mktemp -d "${TMPDIR:-/tmp}/m0interp.XXXXXX")
cleanup() {
    local p
    for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PID[@]}"; do timeout 10 tail --pid="$p" -f /dev/null 2>/dev/null || kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ask() { curl -sf --max-time 120 "http://127.0.0.1:${PORT[$1]}/?bench=$2&n=$3"; }
serve() {   # serve SUBJECT [valgrind prefix...]: start, wait until it answers (bounded)
    local s=$1 i; shift
    PORT[$s]=$(free_port)
    PYTHONHASHSEED=0 setsid taskset -c "$CPU" "$@" "${BIN[$s]}" interp:application --app-dir bench \
        --bind "127.0.0.1:${PORT[$s]}" --workers 1 >"$TMP/$s.log" 2>&1 &
    PID[$s]=$!
    for ((i = 0; i < 600; i++)); do ask "$s" loop 1 >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "interp.sh: $s did not answer; its log:" >&2; tail -n 20 "$TMP/$s.log" >&2; exit 1
}
unserve() { kill "${PID[$1]}"; timeout 60 tail --pid="${PID[$1]}" -f /dev/null || true; unset "PID[$1]"; }
run() {   # run SUBJECT BENCH N -> thread CPU seconds
    if [[ $1 == python3 ]]; then taskset -c "$CPU" "$PYTHON" bench/interp.py "$2" "$3" | cut -d' ' -f1
    else ask "$1" "$2" "$3" | cut -d' ' -f1; fi
}
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

echo "interp.sh: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $("${BIN[static]}" --version | tail -n1) vs $("${BIN[shared]}" --version | tail -n1)" >&2
serve static; serve shared
ask static loop 100000 >/dev/null; ask shared loop 100000 >/dev/null
for ((r = 0; r < ROUNDS; r++)); do
    # rotate the order each round, so no subject always runs first
    order=("${SUBJECTS[@]:r%3}" "${SUBJECTS[@]:0:r%3}")
    for s in "${order[@]}"; do
        run "$s" loop "$LOOP_N" >>"$TMP/$s.loop"
        run "$s" json "$JSON_N" >>"$TMP/$s.json"
    done
    printf '.' >&2
done
echo >&2
unserve static; unserve shared

# callgrind: instructions of (N - 1) units, from two runs.
cg_total() {   # cg_total SUBJECT BENCH N -> Ir of the worker (or the python3 process)
    local s=$1 out=$TMP/cg.$1.$2.$3
    mkdir -p "$out"
    if [[ $s == python3 ]]; then
        PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" \
            "$PYTHON" bench/interp.py "$2" "$3" once >/dev/null 2>"$out/log"
    else
        serve "$s" valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p"
        ask "$s" "$2" "$3" >/dev/null
        unserve "$s"
        cat "$TMP/$s.log" >"$out/log"
    fi
    # the largest process: the worker (the master only forks and waits)
    grep -o 'Collected : [0-9,]*' "$out/log" | tr -d , | awk '{print $3}' | sort -g | tail -n1
}
declare -A IR
if ((CALLGRIND)); then
    for s in "${SUBJECTS[@]}"; do
        a=$(cg_total "$s" loop 1); b=$(cg_total "$s" loop $((CG_LOOP_N + 1)))
        IR[$s.loop]=$(( (b - a) / CG_LOOP_N ))
        a=$(cg_total "$s" json 1); b=$(cg_total "$s" json $((CG_JSON_N + 1)))
        IR[$s.json]=$(( (b - a) / CG_JSON_N ))
        printf '.' >&2
    done
    echo >&2
fi

table() {
    local s lm jm l0 j0
    l0=$(median <"$TMP/python3.loop"); j0=$(median <"$TMP/python3.json")
    printf '| subject | loop (%s iterations), ms | × python3 | JSON (%s round trips), ms | × python3 | Ir / iteration | × python3 | Ir / round trip | × python3 |\n' "$LOOP_N" "$JSON_N"
    printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|\n'
    for s in "${SUBJECTS[@]}"; do
        lm=$(median <"$TMP/$s.loop"); jm=$(median <"$TMP/$s.json")
        awk -v s="$s" -v lm="$lm" -v jm="$jm" -v l0="$l0" -v j0="$j0" -v il="${IR[$s.loop]:-}" -v ij="${IR[$s.json]:-}" \
            -v il0="${IR[python3.loop]:-}" -v ij0="${IR[python3.json]:-}" -v name="$( [[ $s == python3 ]] && echo "$PYTHON" || echo "m0serve, LINK=$s")" '
            function r(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%.3f", a / b) }
            BEGIN { printf "| %s | %.1f | %s | %.1f | %s | %s | %s | %s | %s |\n", name, lm * 1000, r(lm, l0), jm * 1000, r(jm, j0),
                    (il == "" ? "-" : il), r(il, il0), (ij == "" ? "-" : ij), r(ij, ij0) }'
    done
    printf '\nThread CPU time: medians of %s rounds, each subject pinned to CPU %s; load average at the end: %s.\n' \
        "$ROUNDS" "$CPU" "$(cut -d' ' -f1-3 /proc/loadavg)"
}
table
if [[ -n $MARKDOWN ]]; then table >"$MARKDOWN"; fi
