"""The frameworks a served application imports are the ones the suite is
meant to run against, so the virtualenv path cannot silently rot.

`make test` runs the suite with .venv/bin/python (requirements/test.txt:
Django 5.2 LTS, Flask 3.1); serverproc hands the venv to every m0serve
through VIRTUAL_ENV.  `make e2e-debian` (M0_E2E_LEG=debian) runs it with
/usr/bin/python3 against Debian's python3-django and python3-flask.
"""

import importlib
import importlib.metadata
import json
import os
import re
import sys

import pytest

from rawhttp import request
from serverproc import REPO

DEBIAN_LEG = os.environ.get("M0_E2E_LEG") == "debian"
PIN_RE = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s#;]+)")


def pins(path):
    """{normalised name: version} of the == lines of a requirements file."""
    found = {}
    for line in path.read_text().splitlines():
        match = PIN_RE.match(line.strip())
        if match:
            found[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return found


@pytest.fixture(scope="module")
def seen(start_module_server):
    server = start_module_server("framework_versions:application")
    response = request(server.port, "GET", "/")
    assert response.status == 200, response.body
    return json.loads(response.body)


@pytest.mark.parametrize("name", ["django", "flask"])
def test_server_imports_the_packages_the_suite_runs_with(seen, name):
    module = importlib.import_module(name)
    assert seen[name]["file"] == module.__file__
    assert seen[name]["version"] == importlib.metadata.version(name)
    assert seen["prefix"] == sys.prefix


@pytest.mark.skipif(DEBIAN_LEG, reason="the Debian leg runs against Debian's packages")
def test_server_sees_the_pinned_venv(seen):
    pinned = pins(REPO / "requirements" / "test.txt")
    assert seen["prefix"] != seen["base_prefix"], "the server runs outside any virtualenv"
    assert (seen["django"]["version"], seen["flask"]["version"]) == (pinned["django"], pinned["flask"])
    assert seen["django"]["version"].startswith("5.2.")
    assert seen["flask"]["version"].startswith("3.1.")


@pytest.mark.skipif(not DEBIAN_LEG, reason="only on the Debian leg (make e2e-debian)")
def test_debian_leg_sees_debian_packages(seen):
    assert seen["prefix"] == seen["base_prefix"]
    for name in ("django", "flask"):
        assert seen[name]["file"].startswith("/usr/lib/python3/dist-packages/"), seen[name]
