"""Application discovery for the embedded interpreter (called from C).

``load(spec, protocol)`` imports ``MODULE[:ATTR]`` and returns
``(callable, kind, found)`` where kind is ``"wsgi"`` or ``"asgi"`` and
found is the ``MODULE:ATTR`` that was loaded (for the banner).  C calls it
once per application mount (the positional app and each ``--mount``), so
every mount has its own discovery and its own protocol detection.

A bare MODULE tries, in order: ``MODULE.asgi:application``,
``MODULE.wsgi:application``, ``MODULE:app``, ``MODULE.main:app``
(DESIGN.md, capability 2). A candidate is skipped only when the module it
names does not exist; an error raised *inside* an existing module
propagates, so its traceback reaches the user instead of "not found".
While this build has no ASGI host, a discovered ASGI candidate is passed
over in favour of a later WSGI one.
"""

import importlib
import inspect

ASGI_SUPPORTED = False


class LoadError(Exception):
    """The spec names nothing loadable; the message says what was tried."""


def _is_asgi(app):
    if inspect.iscoroutinefunction(app):
        return True
    call = getattr(type(app), "__call__", None)
    return call is not None and inspect.iscoroutinefunction(call)


def _missing(exc, modname):
    """True when exc says modname (or one of its parents) does not exist."""
    name = getattr(exc, "name", None)
    return isinstance(exc, ModuleNotFoundError) and name is not None and (
        modname == name or modname.startswith(name + "."))


def _resolve(modname, attr):
    module = importlib.import_module(modname)
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise LoadError(f"module {modname!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise LoadError(f"{modname}:{attr} is not callable")
    return obj


def _kind(app, protocol):
    if protocol in ("wsgi", "asgi"):
        return protocol
    return "asgi" if _is_asgi(app) else "wsgi"


def load(spec, protocol="auto"):
    """Import spec and return (app, kind, found). Raises LoadError or the app's own error."""
    if ":" in spec:
        modname, attr = spec.split(":", 1)
        if not modname or not attr:
            raise LoadError(f"invalid application spec {spec!r} (want MODULE[:ATTR])")
        app = _resolve(modname, attr)
        return app, _kind(app, protocol), spec

    candidates = [(spec + ".asgi", "application"), (spec + ".wsgi", "application"),
                  (spec, "app"), (spec + ".main", "app")]
    tried = []
    passed_over = None
    for modname, attr in candidates:
        try:
            app = _resolve(modname, attr)
        except ModuleNotFoundError as exc:
            if _missing(exc, modname):
                tried.append(f"{modname}:{attr}")
                continue
            raise
        except LoadError:
            tried.append(f"{modname}:{attr}")
            continue
        kind = _kind(app, protocol)
        if kind == "asgi" and not ASGI_SUPPORTED and protocol == "auto":
            passed_over = passed_over or (app, kind, f"{modname}:{attr}")
            tried.append(f"{modname}:{attr} (ASGI)")
            continue
        return app, kind, f"{modname}:{attr}"
    if passed_over is not None:
        return passed_over
    raise LoadError(f"no application found for {spec!r}; tried " + ", ".join(tried))
