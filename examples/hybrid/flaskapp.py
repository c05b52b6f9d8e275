"""The Flask application of the hybrid example, mounted at /flask.

``--mount /flask=flaskapp`` finds ``flaskapp:app`` by discovery. Under the
mount, SCRIPT_NAME is /flask and PATH_INFO the rest, so url_for() builds
/flask/... links and request.path is the path inside the application.
"""
import os

from flask import Flask, jsonify, request, url_for

from m0serve.flask import hold_stream_response

app = Flask(__name__)


@app.get("/")
def index():
    return ("<!doctype html><title>Flask under /flask</title>"
            "<p>Flask, worker %d, mounted at <code>%s</code>.</p>"
            '<p><a href="%s">what Flask sees</a> · <a href="/">back to Django</a></p>'
            % (os.getpid(), request.script_root, url_for("paths", name="example")))


@app.get("/paths/<name>")
def paths(name):
    return jsonify(app="flask", path=request.path, script_root=request.script_root,
                   url_for=url_for("paths", name=name),
                   external=url_for("paths", name=name, _external=True),
                   full_path=request.full_path)


@app.get("/events")
def events():
    return hold_stream_response(request.args.get("channel", "hybrid"), head=": flask pid=%d\n\n" % os.getpid())
