"""What the Makefile needs to know about the interpreter it builds for, on one line:

    exe ldversion libdir rpath gil_disabled build-tag python-config

exe: the absolute sys.executable; ldversion: LDVERSION (3.11, 3.13t, 3.14d);
libdir: LIBDIR ("-" if none); rpath: 1 when libpython is a shared library in a
directory the dynamic linker does not search by default (a private prefix,
uv's, /usr/local), else 0; gil_disabled: 1 for a free-threaded build; build-tag:
cache tag, ABI flags and a hash of exe (one build directory per interpreter);
python-config: ARGV1-config when it exists, else BINDIR/python<LDVERSION>-config.
Run as: PYTHON tools/pyinfo.py PYTHON
"""
import hashlib
import os
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
print(exe, ldversion, libdir or "-", int(rpath), int(bool(v("Py_GIL_DISABLED"))), tag, config)
