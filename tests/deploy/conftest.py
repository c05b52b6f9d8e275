"""Fixtures of the deploy smoke; the helpers are in deploykit.py (a module
name of its own: tests/e2e has a conftest.py too)."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from deploykit import REPO, Site, Unit, pypi_reachable, readme_install_lines, run_env


@pytest.fixture(scope="session")
def site_venv():
    """The virtualenv the README's first install line makes (in a temporary
    HOME): pip install . with Django. Yields (home, venv)."""
    if not pypi_reachable():
        pytest.skip("PyPI is unreachable: pip cannot install m0serve's build backend and Django")
    home = Path(tempfile.mkdtemp(prefix="m0-deploy-home-"))
    os.chmod(home, 0o755)
    line = readme_install_lines()[0]
    t0 = time.monotonic()
    r = subprocess.run(["bash", "-ec", line], cwd=REPO, env=run_env(home), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, "README install line failed: %s\n%s\n%s" % (line, r.stdout, r.stderr)
    print("README install line took %.1f s: %s" % (time.monotonic() - t0, line))
    venvs = [p.parent.parent for p in home.glob("*/bin/m0serve")]
    assert len(venvs) == 1, "the install line made no venv with bin/m0serve under %s" % home
    yield home, venvs[0]
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def site(site_venv):
    s = Site(site_venv[1])
    yield s
    s.cleanup()


@pytest.fixture
def start_unit(site):
    units = []

    def start(**kwargs):
        u = Unit(site, **kwargs)
        units.append(u)          # stopped at teardown even if start() fails half-way
        return u.start()

    yield start
    for u in units:
        u.stop()
