#!/usr/bin/env bash
# Build a CPython from a source tarball into a private prefix, once per
# tarball: the free-threaded build (make python-ft) or the same version with
# the GIL (make python-gil, the benchmark's same-version baseline).
#
#   tools/python-build.sh ft|gil OUTROOT SHAREDDIR [TARBALL]
#
# TARBALL (PYTHON_TARBALL) is used when given; else the newest Python-*.tar.xz
# (or .tgz) in SHAREDDIR; else Debian's source package of the newest
# python3.N (N >= 13) that apt's deb-src lines offer. A tarball is checked
# against PYTHON_SHA256 when set, else against a SHA256SUMS file beside it
# (a mismatch, or a SHA256SUMS that does not list it, is an error); a
# tarball with neither is used unverified, saying so.
#
# PYTHON_OPT=1 configures it the way a distribution ships its python3
# (issue 29): --enable-optimizations --with-lto (PGO: an instrumented build
# runs the profile task, then the real one; LTO) beside --enable-shared,
# which installs the shared libpython (PGO, LTO, -fno-semantic-interposition)
# and the static one. So its comparisons with Debian's python3 (itself
# PGO-built) are fair; it takes about 30 min on 2 cores instead of about 4,
# hence opt-in (make python-ft PYTHON_OPT=1; docs/performance.md).
#
# The result is OUTROOT/<variant>[-opt]-<first 12 hex of the tarball's
# sha256>/prefix, with a .stamp holding the hash and the configure line:
# while both match, nothing is rebuilt. OUTROOT/<variant> is a symlink to the latest,
# and OUTROOT/<variant>.python names its interpreter. pip comes from the
# tarball's own ensurepip wheel (offline), else a pip wheel the system's pip
# downloads from PyPI.
set -euo pipefail

variant=${1:?usage: $0 ft|gil OUTROOT SHAREDDIR [TARBALL]}
outroot=${2:?}
shared=${3:?}
tarball=${4:-}
jobs=${PYTHON_JOBS:-2}

die() { echo "python-build: error: $*" >&2; exit 1; }
say() { echo "  $*"; }

case $variant in
    ft)  gil_flag=--disable-gil ;;
    gil) gil_flag= ;;
    *)   die "variant '$variant': expected ft or gil" ;;
esac
mkdir -p "$outroot"
outroot=$(cd "$outroot" && pwd)

newest() {   # newest Python-X.Y.Z tarball in a directory, by version
    ls -1 "$1" 2>/dev/null | grep -E '^Python-[0-9]+\.[0-9]+\.[0-9]+[a-z0-9]*\.(tar\.xz|tgz|tar\.gz)$' |
        sort -V | tail -n 1
}

# Debian's source package: apt-get source verifies the .dsc's checksums
# against the signed Sources index; the orig tarball is upstream's.
from_debian() {
    command -v apt-get >/dev/null || return 1
    local pkg="" n
    for n in 20 19 18 17 16 15 14 13; do
        if apt-cache showsrc "python3.$n" 2>/dev/null | grep -q '^Package: '; then pkg=python3.$n; break; fi
    done
    [ -n "$pkg" ] || return 1
    local dir=$outroot/deb-src/$pkg
    mkdir -p "$dir"
    say "DEB-SRC $pkg (apt-get source --download-only)" >&2
    (cd "$dir" && apt-get source --download-only -qq "$pkg" >&2) || return 1
    ls -1 "$dir"/"${pkg}"_*.orig.tar.* 2>/dev/null | sort -V | tail -n 1
}

if [ -n "$tarball" ]; then
    [ -f "$tarball" ] || die "PYTHON_TARBALL=$tarball: no such file"
elif [ -n "$(newest "$shared")" ]; then
    tarball=$shared/$(newest "$shared")
elif tarball=$(from_debian) && [ -n "$tarball" ]; then
    :
else
    die "no CPython source tarball: none in $shared, and apt offers no python3.13 or later source
  package (deb-src lines for a suite that has one are needed; Debian 12 has only python3.11,
  which cannot be built free-threaded). Name one: make python-$variant PYTHON_TARBALL=path/Python-3.X.Y.tar.xz
  (https://www.python.org/downloads/source/; 3.13 or later)"
fi
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")

sha=$(sha256sum "$tarball" | cut -d' ' -f1)
sums=$(dirname "$tarball")/SHA256SUMS
if [ -n "${PYTHON_SHA256:-}" ]; then
    [ "$sha" = "${PYTHON_SHA256,,}" ] || die "$tarball: sha256 $sha, PYTHON_SHA256 says $PYTHON_SHA256"
elif [ -f "$sums" ]; then
    want=$(awk -v f="$(basename "$tarball")" '{n=$2; sub(/^\*/, "", n)} n == f {print $1}' "$sums")
    [ -n "$want" ] || die "$sums does not list $(basename "$tarball")"
    [ "$sha" = "$want" ] || die "$tarball: sha256 $sha, $sums says $want"
elif [[ $tarball != */deb-src/* ]]; then
    echo "python-build: warning: $tarball not verified (no SHA256SUMS beside it; set PYTHON_SHA256)" >&2
fi

opt=()
case ${PYTHON_OPT:-0} in
    0|"") suffix= ;;
    1) suffix=-opt; opt=(--enable-optimizations --with-lto) ;;
    *) die "PYTHON_OPT=$PYTHON_OPT: expected 0 or 1" ;;
esac
dir=$outroot/$variant$suffix-${sha:0:12}
prefix=$dir/prefix
# The rpath lets the interpreter find its own libpython without LD_LIBRARY_PATH.
config=(--prefix="$prefix" --enable-shared --with-ensurepip=no $gil_flag "${opt[@]}" "LDFLAGS=-Wl,-rpath,$prefix/lib")
want_stamp="$sha ${config[*]}"

mkdir -p "$dir"
exec 9>"$dir/.lock"
command -v flock >/dev/null && flock 9      # two makes of one variant: the second waits, then finds it built

interp() { # the installed interpreter: bin/python<LDVERSION> (python3.13t, python3.14)
    local p
    p=$(ls -1 "$prefix"/bin/python3.[0-9]* 2>/dev/null | grep -E '/python3\.[0-9]+[a-z]*$' | sort -V | tail -n 1) || true
    echo "$p"
}

if [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$want_stamp" ] && [ -x "$(interp)" ]; then
    say "PYTHON  $(interp) (built; $(basename "$tarball"))"
else
    # Is it a CPython that can be built free-threaded (3.13 or later)?
    version=$(basename "$tarball" | sed -nE 's/^(Python-|python3\.[0-9]+_)([0-9]+\.[0-9]+)\..*/\2/p')
    rm -rf "$dir/src" "$prefix" "$dir/.stamp"
    mkdir -p "$dir/src"
    say "UNPACK  $(basename "$tarball")"
    tar -xf "$tarball" -C "$dir/src" --strip-components=1
    if [ "$variant" = ft ] && ! grep -q -- '--disable-gil' "$dir/src/configure"; then
        die "$(basename "$tarball") (Python ${version:-?}) cannot be built free-threaded: 3.13 or later is needed"
    fi
    log=$dir/build.log
    say "PYTHON  configure ${config[*]} (log: $log)"
    start=$(date +%s)
    ( cd "$dir/src" && ./configure "${config[@]}" && make -j"$jobs" && make install ) >"$log" 2>&1 || {
        tail -n 40 "$log" >&2
        die "the CPython build failed (whole log: $log)"
    }
    py=$(interp)
    [ -x "$py" ] || die "no interpreter installed in $prefix/bin"
    # The modules a usable server interpreter needs (Django: sqlite3).
    "$py" -c 'import ssl, sqlite3, zlib, ctypes, lzma, bz2, hashlib, uuid, decimal' ||
        die "$py lacks a standard module (missing -dev package? see $log: 'modules were not built')"
    rm -rf "$dir/src"
    echo "$want_stamp" > "$dir/.stamp"
    say "PYTHON  $py (built in $(( $(date +%s) - start ))s)"
fi
py=$(interp)

# pip, so that `python -m venv` makes venvs with pip and `python -m pip` works.
if ! "$py" -m pip --version >/dev/null 2>&1; then
    if "$py" -m ensurepip --default-pip >"$dir/pip.log" 2>&1; then
        say "PIP     $("$py" -m pip --version | cut -d' ' -f1-2) (the tarball's ensurepip wheel)"
    else
        wheels=$dir/pip-wheel
        rm -rf "$wheels" && mkdir -p "$wheels"
        /usr/bin/python3 -m pip download -q --disable-pip-version-check --no-deps -d "$wheels" pip >>"$dir/pip.log" 2>&1 ||
            die "no pip for $py: the tarball has no ensurepip wheel and '/usr/bin/python3 -m pip download pip' failed (see $dir/pip.log)"
        whl=$(ls -1 "$wheels"/pip-*.whl | head -n 1)
        "$py" "$whl/pip" install -q --disable-pip-version-check --no-index "$whl" >>"$dir/pip.log" 2>&1 ||
            die "installing $whl into $py failed (see $dir/pip.log)"
        say "PIP     $("$py" -m pip --version | cut -d' ' -f1-2) (from PyPI)"
    fi
fi

ln -sfn "$(basename "$dir")" "$outroot/$variant"
echo "$py" > "$outroot/$variant.python"
gil=$("$py" -c 'import sysconfig; print("free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else "with the GIL")')
say "READY   $py ($("$py" -c 'import platform; print(platform.python_version())'), $gil): make PYTHON=$py"
