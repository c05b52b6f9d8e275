"""Which Python packages an application served by m0serve imports.

  /    JSON: sys.prefix, sys.base_prefix, the Python version, and for
       django and flask: the version and the file the module came from
       (django.__version__; Flask's from its distribution metadata, since
       flask.__version__ is deprecated)
"""

import importlib.metadata
import json
import sys

import django
import flask


def application(environ, start_response):
    body = json.dumps({
        "prefix": sys.prefix,
        "base_prefix": sys.base_prefix,
        "python": sys.version.split()[0],
        "django": {"version": django.__version__, "file": django.__file__},
        "flask": {"version": importlib.metadata.version("flask"), "file": flask.__file__},
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
