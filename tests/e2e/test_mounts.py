"""smoke-hybrid, mounts: several applications and a static directory in one
server (DESIGN capability 8; issue 11), the hybrid server of
hybridserver.py. It checks:

* what each framework sees of the URL, byte for byte: Django's reverse() and
  request.path at the root, Flask's url_for() and request.path under /flask
  (SCRIPT_NAME = the prefix, PATH_INFO the rest: break the trim in
  src/python/wsgi_environ.c and the Flask mount stops routing at all);
* prefixes match on segment boundaries (/flaskx is Django's);
* holds on both WSGI mounts, counted per mount in /health, which lists every
  mount with its kind and mode; the boot lines name them too;
* a path no mount claims: 404 from the loop on a kept connection, with no
  Python call (/health counters);
* a Starlette mount at /api runs on the worker's asyncio executor: its
  root_path is the prefix and its path the whole path (the ASGI rule), its
  url_for() byte-exact, and it answers in milliseconds while every pool
  thread is blocked;
* a bad --static or --mount: one line, exit 2.

The static files themselves are test_static.py's.
"""

import json
import threading
import time

from hybridserver import HYBRID, get_json, health, hybrid, mounts_of, static_root  # noqa: F401 (fixtures)
from rawhttp import Conn, request
from serverproc import APPS_DIR, run_to_exit
from sse import SSEStream


# -------------------------------------------------- banner, /health, URLs

def test_every_mount_is_named_with_its_protocol_and_mode(hybrid, static_root):
    assert ("mounts=/=hybridsite.wsgi:application,/flask=flaskapp,/api=apiapp,/static=static:%s" % static_root
            in hybrid.banner)
    boots = [line for line in hybrid.stderr.lines if "worker booted" in line]
    assert len(boots) == 2
    for line in boots:
        assert "/ -> hybridsite.wsgi:application (wsgi, pool)" in line
        assert "/flask -> flaskapp:app (wsgi, pool)" in line
        assert "/api -> apiapp:app (asgi, executor)" in line
        assert "/static -> %s (static, sendfile" % static_root in line
    with Conn(hybrid.port) as conn:
        mounts = mounts_of(health(conn))
    assert mounts["/"]["kind"] == "wsgi" and mounts["/"]["mode"] == "pool"
    assert mounts["/"]["app"] == "hybridsite.wsgi:application"
    assert mounts["/flask"]["kind"] == "wsgi" and mounts["/flask"]["app"] == "flaskapp:app"
    assert mounts["/api"]["kind"] == "asgi" and mounts["/api"]["mode"] == "executor"
    assert mounts["/static"]["kind"] == "static" and mounts["/static"]["mode"] == "sendfile"
    assert mounts["/static"]["dir"] == str(static_root)
    assert mounts["/static"]["resolver"] in ("openat2", "openat-walk")


def test_django_at_the_root_sees_its_urls_byte_for_byte(hybrid):
    status, doc = get_json(hybrid.port, "/paths/a%20b/")
    assert status == 200
    assert doc == {
        "app": "django",
        "path": "/paths/a b/",
        "path_info": "/paths/a b/",
        "script_name": "",
        "reverse": "/paths/a%20b/",
        "absolute": "http://127.0.0.1:%d/paths/a%%20b/" % hybrid.port,
        "static": "/static/css/app.css",
    }


def test_flask_under_its_prefix_sees_its_urls_byte_for_byte(hybrid):
    status, doc = get_json(hybrid.port, "/flask/paths/x%20y?q=1")
    assert status == 200
    assert doc == {
        "app": "flask",
        "path": "/paths/x y",                     # PATH_INFO: the prefix trimmed
        "script_root": "/flask",                   # SCRIPT_NAME: the prefix
        "url_for": "/flask/paths/x%20y",
        "external": "http://127.0.0.1:%d/flask/paths/x%%20y" % hybrid.port,
        "full_path": "/paths/x y?q=1",
    }
    # The prefix alone: PATH_INFO is empty, Flask redirects to its root.
    response = request(hybrid.port, "GET", "/flask")
    assert response.status == 308
    assert response.header("location").endswith("/flask/")
    response = request(hybrid.port, "GET", "/flask/")
    assert response.status == 200 and b"mounted at <code>/flask</code>" in response.body


def test_prefixes_match_on_segment_boundaries(hybrid):
    status, doc = get_json(hybrid.port, "/flaskx/y")
    assert (status, doc) == (404, {"app": "django", "path": "/flaskx/y"})
    status, doc = get_json(hybrid.port, "/staticfiles/a.txt")
    assert (status, doc) == (404, {"app": "django", "path": "/staticfiles/a.txt"})
    # /static itself is the static mount's (its root directory: 404 from C).
    response = request(hybrid.port, "GET", "/static")
    assert response.status == 404 and response.body.startswith(b"404 Not Found")


# ------------------------------------------------------------ holds, 404s

def test_holds_on_both_wsgi_mounts(hybrid):
    with SSEStream(hybrid.port, "/flask/events?channel=mounts") as flask_stream, \
            SSEStream(hybrid.port, "/events/?channel=mounts") as django_stream:
        assert flask_stream.status == 200 and django_stream.status == 200
        flask_pid = int(flask_stream.next().comment.split("pid=")[1])
        django_pid = int(django_stream.next().comment.split("pid=")[1])
        status, doc = get_json(hybrid.port, "/publish/?channel=mounts&data=both")
        assert status == 200 and doc["enabled"] is True
        for stream in (flask_stream, django_stream):
            event = stream.next_event()
            assert event.id == doc["id"] and json.loads(event.data) == {"data": "both", "from": "django"}
        # Each hold is counted on the mount whose view gated it.
        seen = {}
        for _ in range(200):
            with Conn(hybrid.port) as conn:
                doc = health(conn)
            seen[doc["pid"]] = mounts_of(doc)
            if flask_pid in seen and django_pid in seen:
                break
        assert seen[flask_pid]["/flask"]["held"] >= 1
        assert seen[django_pid]["/"]["held"] >= 1


def test_a_path_no_mount_claims_is_404_from_c(start_server, static_root):
    # No root application: Flask at /flask, the conformance app (under
    # wsgiref.validate) at /raw, static files.
    server = start_server(None, "--mount", "/flask=flaskapp", "--mount", "/raw/=conformance:application",
                          "--static", "/static=%s" % static_root, "--health-path", "/health",
                          app_dir=HYBRID, env={"PYTHONPATH": str(APPS_DIR)})
    with Conn(server.port) as conn:
        before = health(conn)
        targets = ["/", "/nothing", "/flaskx/y", "/stat", "/static%2Fa.txt", "/raw2"]
        for target in targets:
            response = conn.request("GET", target)
            assert response.status == 404, target
            assert response.body == b"404 Not Found: No application is mounted at this path\n"
            assert response.header("connection") is None          # kept alive
        assert conn.request("HEAD", "/nothing").status == 404
        after = health(conn)
    assert after["pid"] == before["pid"]
    assert after["unmounted"] - before["unmounted"] == len(targets) + 1
    for prefix in ("/flask", "/raw", "/static"):
        assert mounts_of(after)[prefix]["requests"] == mounts_of(before)[prefix]["requests"], prefix
    # The mounts themselves answer, SCRIPT_NAME and PATH_INFO as PEP 3333 wants.
    env = json.loads(request(server.port, "GET", "/raw/environ/a%20b?x=1").body)
    assert (env["SCRIPT_NAME"], env["PATH_INFO"], env["QUERY_STRING"]) == ("/raw", "/environ/a b", "x=1")
    assert request(server.port, "GET", "/raw").body == b"ok"              # PATH_INFO "" is the app's root
    assert request(server.port, "GET", "/flask/paths/z").status == 200


def test_asgi_mount_at_api(hybrid):
    status, data = get_json(hybrid.port, "/api/paths/x%20y")
    assert status == 200 and data["app"] == "starlette"
    assert data["root_path"] == "/api"                    # ASGI: root_path is the prefix ...
    assert data["scope_path"] == "/api/paths/x y"         # ... and path the whole path
    assert data["path"] == "/api/paths/x y"
    assert data["url_for"] == "http://127.0.0.1:%d/api/paths/x y" % hybrid.port     # Starlette's own quoting
    assert request(hybrid.port, "GET", "/api").status == 404          # Starlette's own 404
    with Conn(hybrid.port) as conn:             # one connection: one worker
        assert conn.request("GET", "/api/ping").body == b"pong"
        api = mounts_of(health(conn))["/api"]
    assert api["kind"] == "asgi" and api["requests"] >= 1


def test_an_asgi_mount_overlaps_its_slow_requests(hybrid):
    results = []
    began = time.monotonic()
    threads = [threading.Thread(target=lambda: results.append(
        request(hybrid.port, "GET", "/api/sleep?s=1", timeout=20).body)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert results == [b"slept"] * 8
    assert time.monotonic() - began < 3.5        # awaited together, not one after another


def test_bad_mount_flags_exit_2_with_one_line():
    status, stderr = run_to_exit(["--static", "/s=/nonexistent/m0serve-dir", "--bind", "127.0.0.1:0"])
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "--static" in lines[0], stderr
    status, stderr = run_to_exit(["hybridsite", "--mount", "/a/../b=x", "--bind", "127.0.0.1:0"])
    assert status == 2 and "--mount" in stderr
