"""The hybrid server the static-file and mount suites share (DESIGN
capabilities 8 and 10; issue 11): one server, two workers, the example of
examples/hybrid — Django at /, Flask at /flask (discovered from the bare
module name), a Starlette app at /api, and at /static a copy of the
example's static files plus the traversal table's fixture
(tests/cases/static.tsv) and a 1 GiB sparse file.

The fixtures are module-scoped: a test module imports ``hybrid`` and
``static_root`` (pytest finds fixtures among a module's names) and gets its
own server.
"""

import json
import os
import shutil
import time

import pytest

from rawhttp import request
from serverproc import EXAMPLES_DIR, REPO

HYBRID = EXAMPLES_DIR / "hybrid"
TABLE = REPO / "tests" / "cases" / "static.tsv"
GIB = 1 << 30
POOL = 4


def load_table():
    """(fixture lines, cases) of tests/cases/static.tsv (format in the file)."""
    fixture, cases = [], []
    for raw in TABLE.read_text(encoding="utf-8").splitlines():
        if not raw or raw.startswith("#"):
            continue
        fields = raw.split("\t")
        if raw.startswith("@"):
            fixture.append(fields)
        else:
            name, status, path, body = fields
            cases.append((name, status, "" if path == "-" else path, body))
    return fixture, cases


def build_fixture(parent, root, fixture):
    for kind, path, *rest in fixture:
        where = (parent if kind == "@outside" else root) / path
        if kind == "@dir":
            where.mkdir()
        elif kind in ("@file", "@outside"):
            where.write_text(rest[0], encoding="utf-8")
        elif kind == "@symlink":
            os.symlink(rest[0], where)
        elif kind == "@fifo":
            os.mkfifo(where)
        else:
            raise AssertionError("unknown fixture line %s" % kind)


@pytest.fixture(scope="module")
def static_root(tmp_path_factory):
    """The /static directory: the example's files, the traversal table's
    fixture, and a 1 GiB sparse file."""
    parent = tmp_path_factory.mktemp("hybrid")
    root = parent / "static"
    shutil.copytree(HYBRID / "static", root)
    build_fixture(parent, root, load_table()[0])
    with open(root / "sparse.bin", "wb") as f:
        f.truncate(GIB)
    return root


@pytest.fixture(scope="module")
def hybrid(start_module_server, static_root):
    server = start_module_server("hybridsite.wsgi:application", "--mount", "/flask=flaskapp",
                                 "--mount", "/api=apiapp", "--static", "/static=%s" % static_root,
                                 "--realtime", "--blocking-threads", str(POOL), "--static-max-age", "60",
                                 app_dir=HYBRID, workers=2)
    # Both workers serving (the second may still be booting when the first
    # answers): each says so in its boot line.
    deadline = time.monotonic() + 30
    while len([line for line in server.stderr.lines if "worker booted" in line]) < 2:
        assert time.monotonic() < deadline, server.stderr.text()
        time.sleep(0.05)
    request(server.port, "GET", "/")          # Django's first request imports the URLconf
    return server


def health(conn):
    response = conn.request("GET", "/health")
    assert response.status == 200
    return json.loads(response.body)


def mounts_of(doc):
    return {m["prefix"]: m for m in doc["mounts"]}


def get_json(port, target):
    response = request(port, "GET", target)
    return response.status, json.loads(response.body)
