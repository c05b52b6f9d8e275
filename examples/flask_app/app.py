"""Flask example for m0serve: ``m0serve app:app --app-dir examples/flask_app``.

The index page links to the other routes with ``url_for`` (relative and
absolute links), so following them checks SCRIPT_NAME, PATH_INFO and Host
handling end to end.
"""

import os

from flask import Flask, Response, request, url_for

app = Flask(__name__)

NAMES = ("world", "m0serve")


@app.route("/")
def index():
    links = "".join(
        '<li><a href="%s">hello %s</a></li>' % (url_for("hello", name=name), name) for name in NAMES
    )
    return (
        "<!doctype html><title>m0serve Flask example</title>"
        "<ul>%s<li><a href=\"%s\">pid</a></li></ul>"
        '<p>Absolute: <a id="external" href="%s">pid</a></p>'
        '<form method="post" action="%s"><textarea name="text"></textarea>'
        "<button>echo</button></form>"
    ) % (links, url_for("pid"), url_for("pid", _external=True), url_for("echo"))


@app.route("/hello/<name>")
def hello(name):
    return Response("Hello, %s!" % name, mimetype="text/plain")


@app.route("/echo", methods=["POST"])
def echo():
    return Response(request.get_data(), mimetype=request.mimetype or "application/octet-stream")


@app.route("/pid")
def pid():
    return Response(str(os.getpid()), mimetype="text/plain")
