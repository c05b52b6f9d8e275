"""--reload's Python side: which directories hold the application's modules.

``start(root)`` hands m0serve the directory of every imported module whose
file lies under ``root`` (the --app-dir), now and then once a second from one
daemon thread, so modules imported late (Django imports views on the first
request) are watched too. m0serve watches those directories with inotify and
replaces the workers when a ``.py`` file in one of them changes; nothing here
reads or polls files. Installed packages (the virtualenv, even one inside
``root``) are left out.
"""

import os
import sys
import threading
import time

import m0

_SCAN_INTERVAL = 1.0


def _skip_prefixes():
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


def _module_dirs(root, skip):
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        path = os.path.realpath(path)
        if path.startswith(root) and not path.startswith(skip) and "site-packages" not in path:
            yield os.path.dirname(path)


def start(root):
    """Watch the app's module directories under root, and keep watching new ones."""
    root = os.path.realpath(root) + os.sep
    skip = _skip_prefixes()
    watched = set()

    def scan():
        for directory in set(_module_dirs(root, skip)) - watched:
            watched.add(directory)
            try:
                m0._watch(directory)
            except OSError as exc:
                print("m0serve --reload: cannot watch %s: %s" % (directory, exc), file=sys.stderr)

    def run():
        while True:
            time.sleep(_SCAN_INTERVAL)
            scan()

    scan()
    threading.Thread(target=run, name="m0serve-reload", daemon=True).start()
