"""Extension modules used inside a served view (tests/e2e/test_extensions.py).

  /NAME   runs check NAME on the handler thread and answers JSON
          {"ok": true, "value": ...} or {"ok": false, "error": traceback};
          404 for an unknown NAME
  /       the names, one a line

Each check imports a C extension module and makes it do real work: the
standard library's lib-dynload modules, and the C extensions the test venv
installs (requirements/test.txt). m0serve links libpython statically or
as a shared library (the Makefile's LINK); either way these modules find
the C API they were built against, in the process that serves them.
"""

import json
import traceback


def _ssl():
    import ssl
    ctx = ssl.create_default_context()
    ctx.load_default_certs()
    return [ssl.OPENSSL_VERSION, ctx.protocol.name, len(ctx.get_ca_certs()) >= 0]


def _hashlib():
    import hashlib
    return hashlib.new("sha256", b"m0serve").hexdigest()


def _ctypes():
    import ctypes
    libc = ctypes.CDLL(None)
    # pythonapi resolves through the process's global symbols: the C API
    # must be exported from the m0serve executable when it carries libpython.
    api = ctypes.pythonapi
    api.PyLong_FromLong.restype = ctypes.py_object
    api.PyLong_FromLong.argtypes = [ctypes.c_long]
    return [libc.getpid() > 0, api.PyLong_FromLong(424242), api.Py_IsInitialized()]


def _sqlite3():
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.execute("create table t (a integer, b text)")
    db.executemany("insert into t values (?, ?)", [(i, str(i)) for i in range(100)])
    return db.execute("select sum(a), count(distinct b) from t").fetchone()


def _decimal():
    import decimal
    assert decimal.Decimal.__module__ == "decimal" and type(decimal.Context()).__module__ == "decimal"
    import _decimal
    with _decimal.localcontext() as ctx:
        ctx.prec = 40
        return str(_decimal.Decimal(1) / _decimal.Decimal(7))


def _json():
    import json as j
    import _json as cjson
    assert j.decoder.c_scanstring is cjson.scanstring
    return j.loads(j.dumps({"a": [1, 2.5, "x", None, True]}))


def _compression():
    import bz2
    import lzma
    import zlib
    data = b"m0serve " * 1000
    return [len(zlib.compress(data)) < len(data), bz2.decompress(bz2.compress(data)) == data,
            lzma.decompress(lzma.compress(data)) == data]


def _elementtree():
    import xml.etree.ElementTree as ET
    import pyexpat
    root = ET.fromstring("<a><b x='1'>t</b><b x='2'/></a>")
    assert ET.Element.__module__ in ("xml.etree.ElementTree", "_elementtree") and pyexpat.EXPAT_VERSION
    return [b.get("x") for b in root.iter("b")]


def _asyncio():
    import asyncio
    import _asyncio  # noqa: F401  (the C Future and Task)

    async def main():
        await asyncio.sleep(0)
        return 7
    return asyncio.run(main())


def _misc():
    import array
    import datetime
    import mmap
    import pickle
    import select
    import socket
    import struct
    import unicodedata
    import uuid
    a, b = socket.socketpair()
    try:
        a.sendall(b"ping")
        ready = select.select([b], [], [], 5)[0]
        got = b.recv(4)
    finally:
        a.close()
        b.close()
    m = mmap.mmap(-1, 4096)
    m[:4] = b"m0m0"
    return [bool(ready), got.decode(), struct.pack("<I", 1).hex(), array.array("i", [1, 2]).tolist(),
            unicodedata.name("é"), pickle.loads(pickle.dumps(datetime.date(2024, 1, 2))).isoformat(),
            bytes(m[:4]).decode(), uuid.uuid4().version]


def _pydantic_core():
    from pydantic_core import SchemaValidator, core_schema
    v = SchemaValidator(core_schema.typed_dict_schema({"n": core_schema.typed_dict_field(core_schema.int_schema())}))
    return v.validate_python({"n": "12"})


def _uvloop():
    import uvloop

    async def main():
        import asyncio
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__
    return uvloop.run(main())


def _msgspec():
    import msgspec
    return msgspec.json.decode(msgspec.json.encode({"a": [1, 2]}))


def _markupsafe():
    import markupsafe
    from markupsafe import _speedups
    assert markupsafe._escape_inner is _speedups._escape_inner
    return [str(markupsafe.escape("<a>")), _speedups._escape_inner("&")]


def _yaml():
    import yaml
    assert yaml.__with_libyaml__
    return yaml.load("a: [1, 2]", Loader=yaml.CSafeLoader)


def _multidict():
    import multidict
    from multidict import _multidict
    d = _multidict.MultiDict([("a", 1), ("a", 2)])
    return [d.getall("a"), multidict.MultiDict.__module__]


def _charset_normalizer():
    import charset_normalizer
    from charset_normalizer import md
    assert md.__file__.endswith(".so"), md.__file__
    return charset_normalizer.from_bytes("Grüße, m0serve".encode("latin-1")).best().encoding


def _websockets():
    from websockets.speedups import apply_mask
    return apply_mask(b"\x00\x01\x02\x03", b"\x01\x01\x01\x01").hex()


def _numpy():
    import numpy as np
    a = np.arange(1, 65, dtype=np.float64).reshape(8, 8)
    inv = np.linalg.inv(a + np.eye(8) * 100)
    return [float((a @ a.T).trace()), bool(np.allclose(inv @ (a + np.eye(8) * 100), np.eye(8))), np.__version__]


def _lxml():
    from lxml import etree
    doc = etree.fromstring(b"<r><i n='1'/><i n='2'/></r>")
    xslt = etree.XSLT(etree.fromstring(
        b"<xsl:stylesheet version='1.0' xmlns:xsl='http://www.w3.org/1999/XSL/Transform'>"
        b"<xsl:template match='/'><o><xsl:value-of select='count(//i)'/></o></xsl:template></xsl:stylesheet>"))
    return [doc.xpath("sum(//i/@n)"), str(xslt(doc)).strip().split("?>")[-1]]


def _psycopg():
    import psycopg
    from psycopg import pq
    assert pq.__impl__ == "binary", pq.__impl__
    # No server here: libpq (bundled by psycopg-binary, with its own OpenSSL)
    # parses the string, tries the socket and reports the failure.
    try:
        psycopg.connect("host=/nonexistent-m0serve-dir dbname=x connect_timeout=2")
    except psycopg.OperationalError as e:
        return [pq.version(), "nonexistent-m0serve-dir" in str(e)]
    raise AssertionError("connected to a server that is not there")


def _main_thread():
    # First import of threading here, on a handler thread (the pool): it
    # must still name the worker's main thread as the main one.
    import threading
    return threading.main_thread() is threading.current_thread()


CHECKS = {name[1:]: fn for name, fn in list(globals().items()) if name.startswith("_") and callable(fn)
          and not name.startswith("__")}


def application(environ, start_response):
    name = environ.get("PATH_INFO", "/").strip("/")
    if not name:
        body = "".join(n + "\n" for n in CHECKS).encode()
        status = "200 OK"
    elif name not in CHECKS:
        body, status = b"no such check\n", "404 Not Found"
    else:
        try:
            body = json.dumps({"ok": True, "value": CHECKS[name]()}).encode()
        except Exception:
            body = json.dumps({"ok": False, "error": traceback.format_exc()}).encode()
        status = "200 OK"
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
