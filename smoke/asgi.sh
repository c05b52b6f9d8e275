#!/bin/sh
# make smoke-asgi: ASGI apps (HTTP and WebSocket) on the asyncio executor
# Runnable against any binary: M0SERVE=/path/to/m0serve smoke/asgi.sh [pytest args]
# (default: the checkout's ./m0serve); PY picks the Python that runs pytest
# (default: .venv/bin/python, made by make venv).
set -e
cd "$(dirname "$0")/.."
exec "${PY:-.venv/bin/python}" -m pytest tests/e2e/test_asgi.py tests/e2e/test_asgi_ws.py -q "$@"
