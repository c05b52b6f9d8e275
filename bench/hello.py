"""Minimal WSGI hello-world used by bench/run.sh.

Every server under test (m0serve, gunicorn, uWSGI) loads this same
``application``; nginx answers the same body with ``return 200``.
"""

BODY = b"Hello, World!"
CONTENT_LENGTH = str(len(BODY))


def application(environ, start_response):
    start_response(
        "200 OK",
        [("Content-Type", "text/plain"), ("Content-Length", CONTENT_LENGTH)],
    )
    return [BODY]
