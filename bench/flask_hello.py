"""A one-route Flask app (bench/wsgi_table.sh, bench/run.sh --app flask).

  /   "Hello, World!" as text/plain, through Flask's request context, URL
      map and response object: what every Flask view pays.
"""

from flask import Flask, Response

app = Flask(__name__)
BODY = b"Hello, World!"


@app.route("/")
def hello():
    return Response(BODY, mimetype="text/plain")


application = app
