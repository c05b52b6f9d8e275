#!/usr/bin/env bash
# bench/grants.sh — signed stream grants (issue 18) against the view path
# they replace, on one worker pinned to SERVER_CPU:
#
#   1. new SSE holds per second: N streams (HOLDS, default 5000) opened by
#      bench/hold_client.c (BATCH in flight) through GET /rt/sse?token=GRANT
#      (verified in C, no Python) and through GET /events, a Django view
#      (bench/grants_django.py) that answers M0-Hold: stream; holds/s =
#      streams / the client's open_seconds, the best of REPEAT (3) runs;
#      Python calls counted by the app; and the floor: the same number of
#      bare TCP connections (--proto raw), the client's and the kernel's
#      share of a hold;
#   2. a reconnect storm: STORM (default 10000) clients connecting at once
#      (batch = STORM) with Last-Event-ID after a restart of the server
#      (a new worker: empty journal, so each gets its m0-gap notice and is
#      held): time until every one is held again, and the Python calls it
#      took, through the grant and through the view.
#
# Centrifugo and Mercure were not tried: neither is in Debian, and neither
# installs from the package registries reachable here without building a
# foreign project.
#
# Usage: bench/grants.sh [--markdown FILE]
# Knobs: HOLDS, STORM, BATCH (512), SERVER_CPU (0), CLIENT_CPU (1), M0SERVE,
# PYTHON (the venv with Django: .venv-bench, else .venv).
set -euo pipefail
PROG=grants.sh
SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/common.sh
source "$SCRIPT_DIR/common.sh"
cd "$REPO_ROOT"

HOLDS=${HOLDS:-5000}
STORM=${STORM:-10000}
BATCH=${BATCH:-512}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
M0SERVE=${M0SERVE:-$REPO_ROOT/m0serve}
MARKDOWN=""
if [[ ${1:-} == --markdown ]]; then MARKDOWN=$2; fi
if [[ -z ${PYTHON:-} ]]; then
    if [[ -x .venv-bench/bin/python ]]; then PYTHON=$REPO_ROOT/.venv-bench/bin/python; else PYTHON=$REPO_ROOT/.venv/bin/python; fi
fi
VENV=$(dirname "$(dirname "$PYTHON")")
"$PYTHON" -c 'import django' 2>/dev/null || die "no Django in $PYTHON (make bench-venv)"
[[ -x $M0SERVE ]] || die "no m0serve at $M0SERVE (make)"

TMP=$(mktemp -d /tmp/m0grants.XXXXXX)
common_traps
need=$((STORM + 2048))
ulimit -n "$need" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
if (($(ulimit -n) < STORM + 600)); then
    STORM=$(($(ulimit -n) - 600))
    printf '%s: descriptors capped: storm of %d\n' "$PROG" "$STORM" >&2
fi

mkdir -p build/bench
cc -O2 -o build/bench/hold_client bench/hold_client.c -lm
CLIENT=build/bench/hold_client

printf 'k1 bench-grant-secret-0123456789abcdefghij\n' >"$TMP/keys"
chmod 600 "$TMP/keys"
TOKEN=$(PYTHONPATH=python "$PYTHON" -c 'import m0pub,sys; print(m0pub.grant(["news"], ttl=3600, sub="bench", key_file=sys.argv[1]))' "$TMP/keys")
PORT=$(free_port)

boot() {
    start_server m0serve TERM "$SERVER_CPU" "$TMP/server.log" env VIRTUAL_ENV="$VENV" "$M0SERVE" \
        grants_django:application --app-dir bench --bind "127.0.0.1:$PORT" --workers 1 --realtime \
        --grant-key-file "$TMP/keys" --grant-path /rt --max-connections $((STORM + 1024)) --replay 1000
    wait_http "http://127.0.0.1:$PORT/" 30 || die "m0serve did not start: $(tail -5 "$TMP/server.log")"
}
calls() { curl -s "http://127.0.0.1:$PORT/calls"; }
worker_pid() { pgrep -P "$SERVER_SID" -f grants_django | head -1; }

# run NAME PATH N BATCH [HEADER]: open N held streams (PROTO: sse, or raw
# for the connect floor), print "seconds calls opened"
PROTO=sse
run() {
    local name=$1 path=$2 n=$3 batch=$4 header=${5:-} before after out
    before=$(calls)
    local args=(--port "$PORT" -n "$n" --proto "$PROTO" --path "$path" --batch "$batch" --events 0 --settle 0
                --drain 0 --no-publish)
    [[ -z $header ]] || args+=(--header "$header")
    out=$(taskset -c "$CLIENT_CPU" "$CLIENT" "${args[@]}" 2>"$TMP/$name.err") || true
    after=$(calls)
    local opened secs
    opened=$(sed -n 's/.*"opened": \([0-9]*\).*/\1/p' <<<"$out")
    secs=$(sed -n 's/.*"open_seconds": \([0-9.]*\).*/\1/p' <<<"$out")
    [[ -n $opened && -n $secs ]] || die "$name: no result: $out $(tail -3 "$TMP/$name.err")"
    ((opened == n)) || printf '%s: %s opened %s of %s\n' "$PROG" "$name" "$opened" "$n" >&2
    printf '%s %s %s\n' "$secs" "$((after - before))" "$opened"
}

# best NAME PATH: the fastest of REPEAT runs (a shared machine is noisy),
# with the Python calls of all of them.
REPEAT=${REPEAT:-3}
best() {
    local s c n bs="" bc=0 bn=0 i
    for ((i = 0; i < REPEAT; i++)); do
        read -r s c n < <(run "$1" "$2" "$HOLDS" "$BATCH")
        bc=$((bc + c))
        if [[ -z $bs ]] || awk -v a="$s" -v b="$bs" 'BEGIN { exit !(a < b) }'; then bs=$s; bn=$n; fi
    done
    printf '%s %s %s\n' "$bs" "$bc" "$bn"
}

boot
PROTO=raw
read -r f_s f_calls f_n < <(best floor "/")
PROTO=sse
read -r g_s g_calls g_n < <(best grant-holds "/rt/sse?token=$TOKEN")
read -r v_s v_calls v_n < <(best view-holds "/events")
LAST=$(curl -s "http://127.0.0.1:$PORT/publish?n=100")
stop_server
boot             # a restart: every client comes back at once with its Last-Event-ID
read -r gs_s gs_calls gs_n < <(run grant-storm "/rt/sse?token=$TOKEN" "$STORM" "$STORM" "Last-Event-ID: $((LAST - 50))")
stop_server
boot
read -r vs_s vs_calls vs_n < <(run view-storm "/events" "$STORM" "$STORM" "Last-Event-ID: $((LAST - 50))")
stop_server

rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }'; }
g_rate=$(rate "$g_n" "$g_s")
v_rate=$(rate "$v_n" "$v_s")
ratio=$(awk -v a="$g_rate" -v b="$v_rate" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')
DJANGO=$("$PYTHON" -c 'import django; print(django.get_version())')
{
    printf '| run (one worker, CPU %s; client CPU %s) | streams | seconds | holds/s | Python calls |\n' "$SERVER_CPU" "$CLIENT_CPU"
    printf '|---|---:|---:|---:|---:|\n'
    printf '| floor: TCP connections accepted, no request (`hold_client --proto raw`) | %s | %s | %s | %s |\n' "$f_n" "$f_s" "$(rate "$f_n" "$f_s")" "$f_calls"
    printf '| new SSE holds through a grant (`/rt/sse?token=`) | %s | %s | %s | %s |\n' "$g_n" "$g_s" "$g_rate" "$g_calls"
    printf '| new SSE holds through a Django %s view answering `M0-Hold` | %s | %s | %s | %s |\n' "$DJANGO" "$v_n" "$v_s" "$v_rate" "$v_calls"
    printf '| reconnect storm after a restart, grant, `Last-Event-ID` | %s | %s | %s | %s |\n' "$gs_n" "$gs_s" "$(rate "$gs_n" "$gs_s")" "$gs_calls"
    printf '| reconnect storm after a restart, Django view, `Last-Event-ID` | %s | %s | %s | %s |\n' "$vs_n" "$vs_s" "$(rate "$vs_n" "$vs_s")" "$vs_calls"
    printf '\ngrant subscribes / view subscribes: %s× (target ≥ 10×); storm of %s held in %s s with %s Python calls (target < 2 s, 0).\n' "$ratio" "$gs_n" "$gs_s" "$gs_calls"
    printf 'Centrifugo, Mercure: not tried (not in Debian; not installable from the registries reachable here without building a foreign project).\n'
} | tee "$TMP/table.md"
[[ -z $MARKDOWN ]] || cp "$TMP/table.md" "$MARKDOWN"
