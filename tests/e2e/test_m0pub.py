"""m0pub's framing and argument checks, in-process (no server)."""

import sys

import pytest

from serverproc import REPO

sys.path.insert(0, str(REPO / "python"))
import m0pub  # noqa: E402


def test_frame_matches_the_sse_line_rules():
    assert m0pub.frame("hello", "message", 7) == b"id: 7\nevent: message\ndata: hello\n\n"
    assert m0pub.frame("a\nb\r\nc\rd") == b"data: a\ndata: b\ndata: c\ndata: d\n\n"
    assert m0pub.frame(b"caf\xc3\xa9") == "data: café\n\n".encode()
    assert m0pub.frame("", None, 1) == b"id: 1\ndata: \n\n"


@pytest.mark.parametrize("channel", ["", "m0.internal", "a\nb", "x" * 201, "caf\u00e9"])
def test_bad_channels_raise(channel):
    with pytest.raises(ValueError):
        m0pub.publish(channel, "x")


def test_bad_event_and_data_raise():
    with pytest.raises(ValueError):
        m0pub.publish("news", "x", event="two\nlines")
    with pytest.raises(TypeError):
        m0pub.publish("news", 42)
    with pytest.raises(TypeError):
        m0pub.publish(b"news", "x")


def test_frames_over_64kb_raise_even_outside_m0serve():
    m0pub.publish("news", "x" * 60000)          # fits: a no-op here
    with pytest.raises(ValueError, match="exceeds"):
        m0pub.publish("news", "x" * 70000)


# A Django and a Flask app using the hold helpers, served by a plain WSGI
# call (what gunicorn or any other server does), in a process of its own:
# Django's settings are configured once per process.
OTHER_SERVER = r'''
import json, sys, wsgiref.util
import django
from django.conf import settings
from django.urls import path
settings.configure(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["*"], SECRET_KEY="x", MIDDLEWARE=[])
django.setup()
from django.core.handlers.wsgi import WSGIHandler
import flask
import m0serve.django as dj
import m0serve.flask as fl

urlpatterns = [
    path("stream", lambda request: dj.hold_stream_response("news")),
    path("ws", lambda request: dj.hold_websocket_response("room", protocol="chat")),
]
app = flask.Flask(__name__)
app.add_url_rule("/stream", "stream", lambda: fl.hold_stream_response("news"))
app.add_url_rule("/ws", "ws", lambda: fl.hold_websocket_response("room"))

def call(application, target):
    environ = {"PATH_INFO": target, "REQUEST_METHOD": "GET"}
    wsgiref.util.setup_testing_defaults(environ)
    got = {}
    def start_response(status, headers, exc_info=None):
        got["status"], got["headers"] = status, headers
    body = b"".join(application(environ, start_response))
    return {"status": got["status"], "headers": got["headers"], "body": body.decode()}

print(json.dumps({"%s %s" % (name, t): call(a, t) for name, a in (("django", WSGIHandler()), ("flask", app))
                  for t in ("/stream", "/ws")}))
'''


def test_the_hold_helpers_under_another_server_send_no_m0_headers():
    """Under gunicorn (any server but m0serve) the helpers' answers are the
    short degraded responses, and the M0-* instructions, which only
    m0serve reads and removes, are not in them for the client to see."""
    import json
    import os
    import subprocess

    pytest.importorskip("django")
    pytest.importorskip("flask")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), PYTHONWARNINGS="ignore")
    out = subprocess.run([sys.executable, "-c", OTHER_SERVER], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    answers = json.loads(out.stdout)
    assert len(answers) == 4
    for what, a in answers.items():
        assert a["status"].startswith("200"), (what, a)
        names = [name.lower() for name, _ in a["headers"]]
        assert not [n for n in names if n.startswith("m0-")], (what, a["headers"])
    assert answers["django /stream"]["body"] == ": connected\n\n"
    assert "text/event-stream" in dict(answers["flask /stream"]["headers"])["Content-Type"]
    assert "needs m0serve" in answers["django /ws"]["body"]
