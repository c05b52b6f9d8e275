#!/usr/bin/python3
"""cap_corpus.py — keep a merged fuzz corpus under a file count.

    /usr/bin/python3 tests/fuzz/cap_corpus.py FUZZER CONTROL_FILE MAX OUTDIR

libFuzzer's -merge=1 keeps every input that adds a feature. Features count
hit-count buckets as well as edges, so after a long http run the merge keeps
more than a thousand files. `make fuzz-merge` runs this script when the
merged corpus has more than MAX files.

The merge's control file lists the inputs and, in a "COV" line, the edges
each one reached first. Those first-reach counts depend on the order the
inputs ran in, so this script runs FUZZER (-merge=1 on one input at a time)
again on every input that reached an edge first, to get the full set of
edges that input covers. It then builds a greedy set cover: it keeps taking
the input that covers the most edges not covered yet, smaller inputs first
on ties, until MAX inputs are kept or no edge is left uncovered. The kept
inputs are copied into OUTDIR. The script prints how many edges the kept
inputs cover out of all the edges seen.
"""

import os
import shutil
import subprocess
import sys
import tempfile


def read_control(path):
    with open(path) as f:
        lines = f.read().splitlines()
    nfiles = int(lines[0])
    files = lines[2:2 + nfiles]
    cov = {}
    for line in lines[2 + nfiles:]:
        parts = line.split()
        if parts and parts[0] == "COV" and len(parts) > 2:
            cov[int(parts[1])] = set(int(p) for p in parts[2:])
    return files, cov


def edges_of(fuzzer, path, tmp):
    """Every edge one input covers: a merge of that input alone."""
    out, one, ctl = (os.path.join(tmp, n) for n in ("out", "in", "ctl"))
    for d in (out, one):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    if os.path.exists(ctl):
        os.unlink(ctl)            # libFuzzer resumes from an existing one
    shutil.copy(path, one)
    subprocess.run([fuzzer, "-merge=1", "-merge_control_file=" + ctl, out, one],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    _files, cov = read_control(ctl)
    return cov.get(0, set())


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: cap_corpus.py FUZZER CONTROL_FILE MAX OUTDIR")
    fuzzer, control, cap, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    files, first = read_control(control)
    full = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in first:
            full[i] = edges_of(fuzzer, files[i], tmp)
    all_edges = set().union(*full.values()) if full else set()
    covered, kept = set(), []
    while len(kept) < cap:
        best = max(full, key=lambda i: (len(full[i] - covered), -os.path.getsize(files[i])), default=None)
        if best is None or not full[best] - covered:
            break
        kept.append(best)
        covered |= full.pop(best)
    os.makedirs(out, exist_ok=True)
    for i in kept:
        shutil.copy(files[i], os.path.join(out, os.path.basename(files[i])))
    print("  CAP     %d inputs cover %d of %d edges" % (len(kept), len(covered), len(all_edges)))


if __name__ == "__main__":
    main()
