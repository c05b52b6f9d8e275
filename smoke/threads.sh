#!/bin/sh
# make smoke-threads: the free-threaded build, Python in parallel in one
# worker (--threads). Runnable against any free-threaded binary:
#   M0SERVE=/path/to/m0serve PY=/path/to/venv-of-python3.14t/bin/python smoke/threads.sh
# (make smoke-threads builds the interpreter, the binary and the venv, and
# passes all three, with M0_PYTHON_FT for test_freethreaded_build.py).
set -e
cd "$(dirname "$0")/.."
: "${M0SERVE:?set M0SERVE to a free-threaded build of m0serve}"
export M0SERVE
exec "${PY:-build/venv-threads/bin/python}" -m pytest tests/e2e/test_threads.py tests/e2e/test_freethreaded_build.py -q "$@"
