"""Fixtures for the m0serve end-to-end suite.

``start_server(app, *args, app_dir=..., workers=N)`` starts an m0serve
(``serverproc.Server``) and returns it once it answers HTTP; every server a
test started is stopped at teardown (SIGTERM, then SIGKILL of its process
group).  ``start_module_server`` is the same with module scope, for servers
shared by a whole test module.  ``redis`` is a redis-server of its own
(``redisproc.Redis``: a free 127.0.0.1 port and a unix socket) for the
broker tests, stopped at teardown.

The binary is $M0SERVE, default <repo>/m0serve.
"""

import atexit
import os
import shutil
import tempfile

import pytest

from redisproc import Redis
from serverproc import Server


# m0pub.publish and `m0serve publish` run by the tests outside a server look
# for a server's publish socket under XDG_RUNTIME_DIR: an empty directory of
# this run's (the servers make theirs elsewhere: serverproc.base_env), so a
# server on the host, or one a test left running, is never found by chance.
os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="m0xdg.")
atexit.register(shutil.rmtree, os.environ["XDG_RUNTIME_DIR"], True)
os.environ.pop("M0_PUBLISH_SOCKET", None)


class _Pool:
    def __init__(self):
        self.servers = []

    def __call__(self, app, *args, **kwargs):
        server = Server(app, *args, **kwargs)
        self.servers.append(server)
        return server.start()

    def stop_all(self):
        for server in reversed(self.servers):
            server.stop()


@pytest.fixture
def start_server():
    pool = _Pool()
    yield pool
    pool.stop_all()


@pytest.fixture(scope="module")
def start_module_server():
    pool = _Pool()
    yield pool
    pool.stop_all()


@pytest.fixture
def redis():
    tmp = tempfile.mkdtemp(prefix="m0redis.")     # short: a unix socket path has 108 bytes
    server = Redis(tmp).start()
    yield server
    server.stop()
    shutil.rmtree(tmp, ignore_errors=True)
