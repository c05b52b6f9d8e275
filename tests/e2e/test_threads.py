"""Python in parallel in one worker on a free-threaded build (issue 17).

Run by `make smoke-threads` (part of `make test`): the m0serve built for
`make python-ft`'s interpreter (M0SERVE) and this file run by a virtualenv
of that interpreter (requirements/threads.txt), so the server embeds it.
Skipped when the Python running it is not a free-threaded build (the
ordinary e2e run), or when M0SERVE is not the binary built for it.

- sys._is_gil_enabled() is False inside a WSGI and an ASGI view, without
  PYTHON_GIL=0 (m0 and _m0asgi declare Py_MOD_GIL_NOT_USED);
- two views of one worker meet at a threading.Barrier;
- two views of one worker spin in pure Python at the same moment (with a
  GIL and a long switch interval the second could not start until the
  first gave up);
- Django and Flask pages and Starlette routes are served by the
  free-threaded build.
"""

import json
import sys
import sysconfig
import threading

import pytest

from rawhttp import request
from serverproc import BINARY

if not sysconfig.get_config_var("Py_GIL_DISABLED"):
    pytest.skip("not a free-threaded Python: run by `make smoke-threads`, in a virtualenv of the interpreter "
                "`make python-ft` builds", allow_module_level=True)


def _get_json(port, target):
    r = request(port, "GET", target, timeout=30)
    return r.status, json.loads(r.body)


def _together(port, target, n):
    """n GETs of target on n connections at once; [(status, json)]."""
    out = [None] * n

    def one(i):
        out[i] = _get_json(port, target)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(o is not None for o in out), out
    return out


def test_the_binary_is_built_for_this_interpreter():
    import subprocess
    r = subprocess.run([BINARY, "--version"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0 and "free-threaded" in r.stdout, (BINARY, r.stdout, r.stderr)
    assert sys.version.split()[0] in r.stdout, r.stdout


@pytest.mark.parametrize("app", ["threads_app:app", "ft_hello_asgi:app"])
def test_the_gil_is_off_inside_a_view(start_server, app):
    s = start_server(app)
    status, seen = _get_json(s.port, "/gil")
    assert status == 200 and seen["gil_enabled"] is False, seen
    assert "GIL disabled" in s.stderr.text() and "has not declared" not in s.stderr.text()


def test_two_views_meet_at_a_barrier_on_one_worker(start_server):
    s = start_server("threads_app:app", "--blocking-threads", "2")
    got = _together(s.port, "/barrier?n=2", 2)
    assert [st for st, _ in got] == [200, 200], got
    assert len({seen["pid"] for _, seen in got}) == 1 and len({seen["thread"] for _, seen in got}) == 2, got


def test_header_names_new_to_two_threads_at_once(start_server):
    """Two handler threads build environs with the same 40 header names, none
    seen before, at once: both see every header under its CGI key (the
    environ's key cache is shared by the threads; `make tsan` checks it)."""
    s = start_server("threads_app:app", "--blocking-threads", "2")
    names = ["X-Fresh-%02d" % i for i in range(40)]
    out = [None] * 2

    def one(i):
        hdrs = [(n, "%s-%d" % (n, i)) for n in names]
        r = request(s.port, "GET", "/barrier?n=2", headers=hdrs, timeout=30)
        out[i] = (r.status, json.loads(r.body))
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i, (status, seen) in enumerate(out):
        want = {"HTTP_" + n.upper().replace("-", "_"): "%s-%d" % (n, i) for n in names}
        assert status == 200 and seen["headers"] == want, seen
    assert len({seen["thread"] for _, seen in out}) == 2, out


def test_two_views_run_python_at_the_same_moment(start_server):
    s = start_server("threads_app:app", "--blocking-threads", "2")
    got = _together(s.port, "/spin?n=2", 2)
    assert len({seen["pid"] for _, seen in got}) == 1, got
    assert [seen["met"] for _, seen in got] == [True, True], got


def test_django_page(start_server):
    s = start_server("django_stream:application", "--blocking-threads", "2")
    r = request(s.port, "GET", "/page")
    assert (r.status, r.body) == (200, b"a page")


def test_flask_page(start_server):
    s = start_server("flask_stream:app", "--blocking-threads", "2")
    r = request(s.port, "GET", "/page")
    assert r.status == 200 and r.body, r


def test_starlette_routes(start_server):
    s = start_server("starlette_app:app")
    status, seen = _get_json(s.port, "/json")
    assert status == 200 and seen["ok"] is True and seen["path"] == "/json", seen
    status, seen = _get_json(s.port, "/items/42")
    assert (status, seen) == (200, {"item_id": "42"})
