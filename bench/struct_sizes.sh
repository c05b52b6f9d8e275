#!/usr/bin/env bash
# bench/struct_sizes.sh — what the per-connection structs cost, read from the
# binary's debug information (gdb; the release build has -g): sizeof and the
# glibc malloc chunk each heap allocation of it takes (size + 8, rounded up
# to 16, at least 32 — x86-64 and aarch64).
#
#   bench/struct_sizes.sh [BINARY] [STRUCT...]
#   bench/struct_sizes.sh build/release/m0serve m0_conn m0_job
#   LAYOUT=1 bench/struct_sizes.sh ./m0serve m0_hold   # also gdb's ptype /o (offsets, holes)
#
# With no STRUCT, the ones a held connection keeps or once kept (issue 20's
# budget). A name the binary does not have (renamed or gone) prints "-", so
# the script keeps working while the code is reshaped.
set -euo pipefail

BIN=${1:-./m0serve}
shift || true
if (($# == 0)); then
    set -- m0_conn m0_job m0_hold m0_wshold wsgi_job m0_asgi_job m0_http m0_req m0_head m0_body m0_resp \
        m0_jobchan m0_ws_parser m0_buf m0_arena
fi
command -v gdb >/dev/null 2>&1 || { echo "struct_sizes.sh: needs gdb (apt-get install gdb)" >&2; exit 2; }
[[ -r $BIN ]] || { echo "struct_sizes.sh: no binary at $BIN (run make)" >&2; exit 2; }

printf '%-16s %8s %12s\n' struct sizeof "malloc chunk"
for s in "$@"; do
    size=$(gdb -batch -nx -ex "print sizeof(struct $s)" "$BIN" 2>/dev/null | sed -n 's/^\$[0-9]* = \([0-9]*\)$/\1/p')
    if [[ -z $size ]]; then printf '%-16s %8s %12s\n' "$s" - -; continue; fi
    chunk=$(((size + 8 + 15) / 16 * 16)); ((chunk >= 32)) || chunk=32
    printf '%-16s %8d %12d\n' "$s" "$size" "$chunk"
done
if [[ ${LAYOUT:-0} == 1 ]]; then
    for s in "$@"; do gdb -batch -nx -ex "ptype /o struct $s" "$BIN" 2>&1 || true; done
fi
