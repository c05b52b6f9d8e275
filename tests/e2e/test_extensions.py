"""C extension modules work inside a served view, however libpython is linked
(issue 29).

m0serve links libpython the way the interpreter's own executable is linked
(the Makefile's LINK=auto): Debian's python3 carries the static
libpython3.11.a, so m0serve does too, exporting the C API to extension
modules (tools/libpython.dynlist); a --enable-shared interpreter gets
libpython*.so. The extension modules of the standard library (lib-dynload:
_ssl, _ctypes, _sqlite3, _decimal, _json, ...) and the C extensions the venv
installs (pydantic-core, uvloop, msgspec, markupsafe, PyYAML's _yaml,
multidict, charset-normalizer, websockets; numpy, lxml and psycopg-binary,
which bring their own native libraries: OpenBLAS, libxml2, libpq with its
own OpenSSL) must import and work in both. The binary under test is one of
the two; the other is built by this module (make LINK=... into
build/e2e-link-*, once, then incremental) when the binary under test is the
default build for /usr/bin/python3, and skipped, saying why, otherwise.
"""

import importlib.util
import json
import os
import subprocess

import pytest

import serverproc
from rawhttp import request
from serverproc import REPO

STDLIB = ["ssl", "hashlib", "ctypes", "sqlite3", "decimal", "json", "compression", "elementtree",
          "asyncio", "misc"]
# check name -> the module the test's own interpreter must find for it
VENV = {"pydantic_core": "pydantic_core", "uvloop": "uvloop", "msgspec": "msgspec", "markupsafe": "markupsafe",
        "yaml": "yaml", "multidict": "multidict", "charset_normalizer": "charset_normalizer",
        "websockets": "websockets", "numpy": "numpy", "lxml": "lxml", "psycopg": "psycopg"}
EXPECTED = {"sqlite3": [4950, 100], "decimal": "0.1428571428571428571428571428571428571429",
            "json": {"a": [1, 2.5, "x", None, True]}, "compression": [True, True, True],
            "elementtree": ["1", "2"], "asyncio": 7, "pydantic_core": {"n": 12}, "uvloop": "uvloop",
            "msgspec": {"a": [1, 2]}, "yaml": {"a": [1, 2]}, "websockets": "01000302"}
BUILD_TIMEOUT = 900


def version_of(binary):
    r = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout


def link_of(binary):
    """'static' or 'shared', from the libpython line of --version."""
    line = next((ln for ln in version_of(binary).splitlines() if ln.startswith("libpython: ")), "")
    assert line.split()[1:2] in (["static"], ["shared"]), version_of(binary)
    return line.split()[1]


def other_binary():
    """The default build with the other link: (path, None) or (None, why not)."""
    binary = serverproc.BINARY
    if serverproc.binary_is_sanitized():
        return None, "the binary under test is a sanitizer build; the other link is checked with the release build"
    if "built for /usr/bin/python3)" not in version_of(binary):
        return None, "the binary under test is not the default build for /usr/bin/python3"
    other = "shared" if link_of(binary) == "static" else "static"
    build = "build/e2e-link-" + other
    r = subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "-j2", "LINK=" + other, "BUILD=" + build,
                        build + "/m0serve"], capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    if r.returncode != 0 and other == "static" and "no static libpython" in r.stdout + r.stderr:
        return None, "/usr/bin/python3 has no static libpython here"
    assert r.returncode == 0, r.stdout + r.stderr
    path = str(REPO / build / "m0serve")
    assert link_of(path) == other
    return path, None


@pytest.fixture(scope="module", params=["under-test", "other-link"])
def server(request, start_module_server):
    if request.param == "under-test":
        return start_module_server("ext_app:application")
    path, why = other_binary()
    if path is None:
        pytest.skip(why)
    saved = serverproc.BINARY
    serverproc.BINARY = path
    try:
        return start_module_server("ext_app:application")
    finally:
        serverproc.BINARY = saved


def check(server, name):
    response = request(server.port, "GET", "/" + name, timeout=60)
    assert response.status == 200, response.body
    result = json.loads(response.body)
    assert result["ok"], result["error"]
    if name in EXPECTED:
        assert result["value"] == EXPECTED[name], result
    return result["value"]


def test_the_version_says_how_libpython_is_linked():
    line = [ln for ln in version_of(serverproc.BINARY).splitlines() if ln.startswith("libpython: ")]
    assert len(line) == 1 and link_of(serverproc.BINARY) in ("static", "shared"), line


@pytest.mark.parametrize("name", STDLIB)
def test_stdlib_extension_module(server, name):
    check(server, name)


@pytest.mark.parametrize("name", sorted(VENV))
def test_venv_extension_module(server, name):
    if importlib.util.find_spec(VENV[name]) is None:
        pytest.skip("%s is not installed for this interpreter (requirements/test.txt installs it)" % VENV[name])
    check(server, name)


def test_ctypes_finds_the_c_api_in_the_process(server):
    # ctypes.pythonapi is dlopen(NULL): the C API is found among the
    # process's global symbols, exported by the executable when it is linked
    # statically and by libpython*.so when it is not.
    assert check(server, "ctypes") == [True, 424242, 1]


def test_numpy_uses_its_own_threads(server):
    if importlib.util.find_spec("numpy") is None:
        pytest.skip("numpy is not installed for this interpreter")
    trace, ok, version = check(server, "numpy")
    assert ok and trace > 0 and version == __import__("numpy").__version__


def test_psycopg_runs_its_bundled_libpq(server):
    if importlib.util.find_spec("psycopg") is None:
        pytest.skip("psycopg is not installed for this interpreter")
    version, named = check(server, "psycopg")
    assert version >= 100000 and named


def test_only_the_c_api_is_exported():
    """A static m0serve exports libpython's Py*/_Py* symbols and none of its
    own: an extension bundling its own llhttp (aiohttp) keeps calling it."""
    if link_of(serverproc.BINARY) != "static":
        pytest.skip("libpython is not linked into this binary")
    out = subprocess.run(["readelf", "--dyn-syms", "-W", serverproc.BINARY], capture_output=True, text=True,
                         timeout=30).stdout
    defined = [f[7] for f in (ln.split() for ln in out.splitlines()) if len(f) >= 8 and f[6] != "UND"
               and f[0].rstrip(":").isdigit()]
    ours = [s for s in defined if s.startswith(("m0_", "llhttp"))]
    assert not ours, ours[:10]
    assert "PyLong_FromLong" in defined and "_Py_NoneStruct" in defined
    if os.path.exists("/usr/bin/python3.11"):
        assert len([s for s in defined if s.startswith(("Py", "_Py"))]) > 1000


def test_threading_names_the_workers_main_thread(start_server):
    # A fresh server, threading first imported by a view on a handler thread
    # (uvloop.run needs threading.main_thread() to be the real one).
    server = start_server("ext_app:application")
    assert check(server, "main_thread") is False
    inline = start_server("ext_app:application", "--blocking-threads", "0")
    assert check(inline, "main_thread") is True
