"""A WSGI app that mints grants with the key file and grant path m0serve
hands its workers (M0_GRANT_KEY_FILE, M0_GRANT_PATH): /url answers
m0pub.grant_url(["news", "chat"], sub="alice"); /block streams "started",
then waits (up to 60 s) for the file GRANT_APP_GATE names to exist before
its last line -- a worker draining with it in flight lives on, and its
kept connection takes one more request; anything else 200 "ok". Every answer says which worker gave it (X-Pid).
When the file GRANT_APP_FAIL names exists, importing it fails (a reload that
cannot boot)."""

import os
import time

import m0pub

if os.environ.get("GRANT_APP_FAIL") and os.path.exists(os.environ["GRANT_APP_FAIL"]):
    raise RuntimeError("grant_app: %s exists: this import fails" % os.environ["GRANT_APP_FAIL"])


def block():
    yield b"started\n"                     # the head goes out: the connection is kept after it
    gate = os.environ["GRANT_APP_GATE"]
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    yield b"released\n"


def application(environ, start_response):
    headers = [("Content-Type", "text/plain"), ("X-Pid", str(os.getpid()))]
    if environ["PATH_INFO"] == "/block":
        start_response("200 OK", headers)
        return block()
    if environ["PATH_INFO"] == "/url":
        body = m0pub.grant_url(["news", "chat"], sub="alice").encode()
    else:
        body = b"ok"
    start_response("200 OK", headers)
    return [body]
