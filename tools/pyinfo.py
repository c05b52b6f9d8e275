"""What the Makefile needs to know about the interpreter it builds for, on one line:

    exe ldversion libdir rpath gil_disabled build-tag python-config

exe: the absolute sys.executable; ldversion: LDVERSION (3.11, 3.13t, 3.14d);
libdir: LIBDIR ("-" if none); rpath: 1 when libpython is a shared library in a
directory the dynamic linker does not search by default (a private prefix,
uv's, /usr/local), else 0; gil_disabled: 1 for a free-threaded build; build-tag:
cache tag, ABI flags and a hash of exe (one build directory per interpreter);
python-config: ARGV1-config when it exists, else BINDIR/python<LDVERSION>-config.
Run as: PYTHON tools/pyinfo.py PYTHON

With --link auto|static|shared after PYTHON, how to link libpython instead:

    mode archive pie why flags...

mode: static or shared; archive: LIBPL/LIBRARY ("-" if none); pie: 1 when
the interpreter's executable is position-independent (ET_DYN), 0 when it is
not (Debian's /usr/bin/python3.11); why: as-python (auto: the executable has
no libpython.so mapped, so it carries libpython itself, and the archive it
was linked from is there), python-shared (auto: it maps libpython*.so),
no-archive (auto: linked statically but LIBPL/LIBRARY is not installed), or
asked (LINK=static|shared). flags (static only): what the executable's own
link adds -- LINKFORSHARED but its "export every symbol" (the Makefile
exports libpython's C API alone, tools/libpython.dynlist), then MODLIBS LIBS
SYSLIBS (the built-in modules' libraries: Debian's -lexpat -lz), each once. "Link it the way python3 is linked", so m0serve runs Python's
bytecode with the same machine code the distribution's python3 does.
"""
import hashlib
import os
import re
import shutil
import sys
import sysconfig

v = sysconfig.get_config_var
given = sys.argv[1] if len(sys.argv) > 1 else sys.executable
exe = os.path.abspath(sys.executable or shutil.which(given) or given)
libdir = v("LIBDIR") or ""
arch = v("MULTIARCH") or ""
system = {os.path.realpath(d) for d in ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/lib/" + arch, "/usr/lib/" + arch)}
rpath = bool(libdir) and bool(v("Py_ENABLE_SHARED")) and os.path.realpath(libdir) not in system
ldversion = v("LDVERSION") or v("VERSION") or "%d.%d" % sys.version_info[:2]
cands = [given + "-config", os.path.join(v("BINDIR") or "", "python" + ldversion + "-config")]
config = next((c for c in map(shutil.which, cands) if c), cands[0])
tag = "%s%s-%s" % (sys.implementation.cache_tag, sys.abiflags, hashlib.sha1(exe.encode()).hexdigest()[:8])

def executable_is_pie(path):
    """ELF e_type of the interpreter's executable: ET_DYN (3) is a PIE."""
    try:
        with open(os.path.realpath(path), "rb") as f:
            head = f.read(18)
    except OSError:
        return True
    if head[:4] != b"\x7fELF":
        return True
    return int.from_bytes(head[16:18], "little" if head[5] == 1 else "big") == 3


def link(request):
    if request not in ("auto", "static", "shared"):
        sys.exit("LINK=%s: expected auto, static or shared" % request)
    archive = os.path.join(v("LIBPL") or "", v("LIBRARY") or "")
    if not (v("LIBPL") and v("LIBRARY") and os.path.isfile(archive)):
        archive = ""
    with open("/proc/self/maps") as f:
        shared_python = any(re.search(r"/libpython[0-9][^/]*\.so", line) for line in f)
    if request == "shared":
        mode, why = "shared", "asked"
    elif request == "static":
        if not archive:
            sys.exit("LINK=static: %s has no static libpython (%s/%s is not there)"
                     % (exe, v("LIBPL"), v("LIBRARY")))
        mode, why = "static", "asked"
    elif shared_python:
        mode, why = "shared", "python-shared"
    elif not archive:
        mode, why = "shared", "no-archive"
    else:
        mode, why = "static", "as-python"
    flags = []
    if mode == "static":
        # LINKFORSHARED exports every symbol (-Xlinker -export-dynamic); the
        # Makefile exports libpython's alone (tools/libpython.dynlist).
        words = (v("LINKFORSHARED") or "").replace("-Xlinker -export-dynamic", "").split()
        words = [w for w in words if w not in ("-rdynamic", "-Wl,-E", "-Wl,--export-dynamic", "-Wl,-export-dynamic")]
        for var in ("MODLIBS", "LIBS", "SYSLIBS"):
            words += (v(var) or "").split()
        for word in words:
            if word not in flags or not word.startswith("-l"):
                flags.append(word)
    print(mode, archive or "-", int(executable_is_pie(exe)), why, *flags)


if sys.argv[2:3] == ["--link"]:
    link(sys.argv[3] if len(sys.argv) > 3 else "auto")
    sys.exit(0)
print(exe, ldversion, libdir or "-", int(rpath), int(bool(v("Py_GIL_DISABLED"))), tag, config)
