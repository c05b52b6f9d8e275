"""A WSGI app that does what Django does with TIME_ZONE at import: set TZ in
the process environment and apply it. The server's log lines must stay UTC."""

import os
import time

os.environ["TZ"] = "America/Chicago"
time.tzset()


def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [time.strftime("%z").encode()]
