#!/bin/sh
# make smoke-deploy: pip install . in a fresh venv, the systemd unit, nginx in front
# Runnable against any binary: M0SERVE=/path/to/m0serve smoke/deploy.sh [pytest args]
# (default: the checkout's ./m0serve); PY picks the Python that runs pytest
# (default: .venv/bin/python, made by make venv).
set -e
cd "$(dirname "$0")/.."
exec "${PY:-.venv/bin/python}" -m pytest tests/deploy tests/e2e/test_proxy_headers.py tests/e2e/test_lifecycle.py -q "$@"
