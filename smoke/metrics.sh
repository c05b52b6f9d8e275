#!/bin/sh
# make smoke-metrics: the Prometheus endpoint: promtool, a real Prometheus scraping two workers
# Runnable against any binary: M0SERVE=/path/to/m0serve smoke/metrics.sh [pytest args]
# (default: the checkout's ./m0serve); PY picks the Python that runs pytest
# (default: .venv/bin/python, made by make venv).
set -e
cd "$(dirname "$0")/.."
exec "${PY:-.venv/bin/python}" -m pytest tests/e2e/test_metrics.py -q "$@"
