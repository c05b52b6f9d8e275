#!/bin/sh
# make smoke-core: the core suite: HTTP/1.1 conformance, malformed requests, Django and Flask
# Runnable against any binary: M0SERVE=/path/to/m0serve smoke/core.sh [pytest args]
# (default: the checkout's ./m0serve); PY picks the Python that runs pytest
# (default: .venv/bin/python, made by make venv).
set -e
cd "$(dirname "$0")/.."
exec "${PY:-.venv/bin/python}" -m pytest tests/e2e -k "conformance or malformed or django or flask" -q "$@"
