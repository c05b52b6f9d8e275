#!/bin/sh
# make smoke-grip: django-eventstream/gripcontrol over GRIP, no Pushpin
# Runnable against any binary: M0SERVE=/path/to/m0serve smoke/grip.sh [pytest args]
# (default: the checkout's ./m0serve); PY picks the Python that runs pytest
# (default: .venv/bin/python, made by make venv).
set -e
cd "$(dirname "$0")/.."
exec "${PY:-.venv/bin/python}" -m pytest tests/e2e/test_grip.py -q "$@"
