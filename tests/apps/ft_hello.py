"""The interpreter a view runs on, as JSON (tests/e2e/test_freethreaded_build.py):
its version, whether it is a free-threaded build, whether the GIL is on now
(sys._is_gil_enabled, 3.13+), and sys.prefix."""

import json
import platform
import sys
import sysconfig


def app(environ, start_response):
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    body = json.dumps({"version": platform.python_version(), "gil_enabled": gil, "prefix": sys.prefix,
                       "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED"))}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
