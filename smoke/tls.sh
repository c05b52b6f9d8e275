#!/bin/sh
# make smoke-tls: TLS on the transport seam (issue 31): WSGI, ASGI, SSE and
# WebSocket holds, static files, GRIP, grants, mTLS, resumption and a SIGHUP
# re-read over https:// and wss://, checked with Python's ssl, curl and
# openssl s_client (the certificates made by tests/e2e/tlsfix.py).
# Runnable against any binary: M0SERVE=/path/to/m0serve smoke/tls.sh [pytest args]
# (default: the checkout's ./m0serve); PY picks the Python that runs pytest
# (default: .venv/bin/python, made by make venv).
set -e
cd "$(dirname "$0")/.."
command -v openssl >/dev/null || { echo "smoke-tls: needs openssl (the certificates, s_client)" >&2; exit 2; }
command -v curl >/dev/null || { echo "smoke-tls: needs curl" >&2; exit 2; }
exec "${PY:-.venv/bin/python}" -m pytest tests/e2e/test_tls.py -q "$@"
