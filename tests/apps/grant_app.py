"""A WSGI app that mints grants with the key file and grant path m0serve
hands its workers (M0_GRANT_KEY_FILE, M0_GRANT_PATH): /url answers
m0pub.grant_url(["news", "chat"], sub="alice"); anything else 200 "ok"."""

import m0pub


def application(environ, start_response):
    if environ["PATH_INFO"] == "/url":
        body = m0pub.grant_url(["news", "chat"], sub="alice").encode()
    else:
        body = b"ok"
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
