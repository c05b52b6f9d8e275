#!/bin/sh
# make smoke-django-realtime: held SSE streams and m0pub from Django views
# Runnable against any binary: M0SERVE=/path/to/m0serve smoke/django-realtime.sh [pytest args]
# (default: the checkout's ./m0serve); PY picks the Python that runs pytest
# (default: .venv/bin/python, made by make venv).
set -e
cd "$(dirname "$0")/.."
exec "${PY:-.venv/bin/python}" -m pytest tests/e2e/test_realtime.py tests/e2e/test_realtime_edges.py -q "$@"
