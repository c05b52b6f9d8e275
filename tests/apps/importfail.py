"""An app module that fails at import time.

``m0serve importfail:application`` must print this traceback on stderr and
exit with status 1 instead of restarting workers forever.
"""

raise RuntimeError("importfail: deliberate failure at import time")


def application(environ, start_response):  # pragma: no cover - never reached
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"unreachable"]
