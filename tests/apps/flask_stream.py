"""A Flask app for the streaming tests (issue 8).

  /gated?gate=P    stream_with_context: "b1", then "b2" once the file P2 exists
  /page            an ordinary page (Content-Length)
"""

import os
import time

from flask import Flask, Response, request, stream_with_context

app = Flask(__name__)


def _wait_for(p, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(p):
        if time.monotonic() > deadline:
            raise TimeoutError(p)
        time.sleep(0.005)


@app.route("/gated")
def gated():
    gate = request.args["gate"]

    def body():
        yield "b1"
        _wait_for(gate + "2")
        yield "b2"
    return Response(stream_with_context(body()), mimetype="text/plain")


@app.route("/page")
def page():
    return "a page"
