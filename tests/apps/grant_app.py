"""A WSGI app that mints grants with the key file and grant path m0serve
hands its workers (M0_GRANT_KEY_FILE, M0_GRANT_PATH): /url answers
m0pub.grant_url(["news", "chat"], sub="alice"); anything else 200 "ok".
When the file GRANT_APP_FAIL names exists, importing it fails (a reload that
cannot boot)."""

import os

import m0pub

if os.environ.get("GRANT_APP_FAIL") and os.path.exists(os.environ["GRANT_APP_FAIL"]):
    raise RuntimeError("grant_app: %s exists: this import fails" % os.environ["GRANT_APP_FAIL"])


def application(environ, start_response):
    if environ["PATH_INFO"] == "/url":
        body = m0pub.grant_url(["news", "chat"], sub="alice").encode()
    else:
        body = b"ok"
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
