"""Build the m0serve binary with the Makefile while hatchling builds the wheel.

Why hatchling: its build-hook interface has exactly the three knobs a
Makefile-built executable needs -- ``shared_scripts`` (the file goes to the
virtualenv's ``bin/``), ``pure_python = False`` and ``infer_tag`` (a
``cp311-cp311-linux_x86_64`` or ``cp313-cp313t-linux_x86_64`` wheel) -- so the glue is this one file and the
Makefile stays the only description of the build. setuptools needs a
custom command plus overrides to make a scripts-only wheel platform-specific;
meson-python or scikit-build-core would replace the Makefile with a second
build language listing the same sources (and meson-python's sdist is a
``git archive`` that leaves uncommitted files out).

The binary embeds the interpreter pip runs the build with: in a virtualenv,
the base interpreter it was made from (``sysconfig`` answers for it:
``BINDIR``/python<LDVERSION> -- python3.11, or python3.14t for a free-threaded
build -- and its ``python<LDVERSION>-config --embed``; Debian's ``python3-dev``
provides the headers and libpython). The Makefile asks that interpreter for
the rest, including an rpath to its libpython when it lives outside the
system's library directories (a uv or a self-built Python). Objects go to
``build/wheel-<tag>/`` in the source tree, so ``make``'s own build is left alone.
"""

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _fail(msg):
    raise RuntimeError("m0serve: " + msg)


class MakefileHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        if self.target_name != "wheel":
            return
        ver = sysconfig.get_config_var("VERSION")
        abiflags = sysconfig.get_config_var("ABIFLAGS") or ""
        ldver = sysconfig.get_config_var("LDVERSION") or ver + abiflags
        bindir = sysconfig.get_config_var("BINDIR")
        # python3.13t (free-threaded), python3.13d (debug): LDVERSION names
        # the interpreter whose libpython matches this one's ABI.
        python = next((p for p in (os.path.join(bindir, "python" + n) for n in (ldver, ver))
                       if os.access(p, os.X_OK)), os.path.join(bindir, "python" + ldver))
        config = os.path.join(bindir, "python%s-config" % ldver)
        if not os.access(config, os.X_OK):
            _fail("%s not found: the headers and libpython of %s are needed to embed it "
                  "(Debian: apt-get install python3-dev)" % (config, python))
        if shutil.which("make") is None or shutil.which(os.environ.get("CC", "cc")) is None:
            _fail("make and a C compiler are needed (Debian: apt-get install make gcc)")
        llhttp = os.environ.get("LLHTTP_SRC", "/usr/share/llhttp")
        if not os.path.isfile(os.path.join(llhttp, "llhttp.c")):
            _fail("llhttp's C sources are not in %s (Debian: apt-get install node-llhttp)" % llhttp)
        # One build directory per interpreter, not per version: two venvs of
        # the same version from different Pythons (Debian's, a pyenv build)
        # must not share a binary that embeds the other one's libpython.
        where = hashlib.sha1(os.path.realpath(python).encode()).hexdigest()[:8]
        tag = sys.implementation.cache_tag + abiflags + "-" + where
        build = os.path.join(self.root, "build", "wheel-" + tag)
        binary = os.path.join(build, "m0serve")
        cmd = ["make", "--no-print-directory", "-C", self.root, "-j%d" % (os.cpu_count() or 1),
               "PYTHON=" + python, "PYTHON_CONFIG=" + config, "BUILD=" + build, binary]
        self.app.display_info("m0serve: " + " ".join(cmd))
        subprocess.run(cmd, check=True)
        build_data["shared_scripts"][binary] = "m0serve"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
