"""Run a WSGI application under one of the servers that are libraries rather
than commands (bench/peers.sh):

    python bench/peers.py bjoern|fastwsgi|socketify|pyruvate MODULE:APP PORT [THREADS]

bjoern 3.2 (C, libev) and fastwsgi 0.0.9 (C, libuv, llhttp) call the
application inline on their one event loop; socketify 0.0.31 (uWebSockets,
through cffi) does too; pyruvate 1.6 (Rust) runs it on THREADS worker
threads (default 1; its own argument, the number of threads that call the
application). Each binds 127.0.0.1:PORT, one process, as its documentation
shows; SIGTERM ends it. The module is imported from bench/ (the
directory of this file), like the other servers' --app-dir/--chdir bench.
"""

import importlib
import os
import signal
import sys


def load(spec):
    module, _, attr = spec.partition(":")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return getattr(importlib.import_module(module), attr or "application")


def main():
    server, spec, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    threads = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    app = load(spec)
    # SIGTERM keeps its default action (the process ends): the C loops of
    # bjoern, fastwsgi and pyruvate never return to the interpreter to run a
    # Python handler.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if server == "bjoern":
        import bjoern
        bjoern.run(app, "127.0.0.1", port)
    elif server == "fastwsgi":
        import fastwsgi
        fastwsgi.run(wsgi_app=app, host="127.0.0.1", port=port)
    elif server == "socketify":
        from socketify import WSGI
        WSGI(app).listen(port, lambda config: None).run()
    elif server == "pyruvate":
        import pyruvate
        pyruvate.serve(app, "127.0.0.1:%d" % port, threads)
    else:
        sys.exit("peers.py: unknown server %r (bjoern, fastwsgi, socketify, pyruvate)" % server)


if __name__ == "__main__":
    main()
