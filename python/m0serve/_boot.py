"""Application discovery for the embedded interpreter (called from C).

``load(spec, protocol, app_dir, factory)`` imports ``MODULE[:ATTR]`` and returns
``(callable, kind, found)`` where kind is ``"wsgi"`` or ``"asgi"`` and
found is the ``MODULE:ATTR`` that was loaded (for the banner); an ASGI 2
application (a class whose instances have an async ``__call__(receive,
send)``) comes back wrapped as ASGI 3.  C calls it once per application
mount (the positional app and each ``--mount``), so every mount has its own
discovery and its own protocol detection.

A bare MODULE tries, in order: ``MODULE.asgi:application``,
``MODULE.wsgi:application``, ``MODULE:application`` (gunicorn's default
attribute, so ``mysite.wsgi`` works as in Django's deployment docs),
``MODULE:app``, ``MODULE.main:app`` (DESIGN.md, capability 2). A candidate is skipped only when the module it
names does not exist; an error raised *inside* an existing module
propagates, so its traceback reaches the user instead of "not found".

ATTR is a name (dotted for an attribute of an attribute), or a call of one
with literal arguments, as gunicorn reads it: ``MODULE:create_app()`` or
``MODULE:create_app('prod', workers=2)`` is an application factory, called
once per worker after the import, whose result is served. The arguments are
parsed with ``ast`` and evaluated by ``ast.literal_eval`` (strings, numbers,
tuples, lists, dicts, sets, booleans, None): nothing in a spec is executed.
With ``factory`` (``--factory``, uvicorn's and Granian's flag) the object a
spec without parentheses names is called with no arguments. A plain function
that takes no argument at all is refused at boot instead of failing every
request: it can only be a factory.

When nothing is found the one-line LoadError says which failure it is: the
module itself cannot be imported from ``sys.path`` (the message names the
current directory and ``--app-dir``: the usual cause is running from the
wrong directory), or it imports and has none of the attributes tried.
"""

import ast
import importlib
import inspect
import os
import sys
# Imported here, on the worker's main thread, so threading.main_thread() is
# that thread: threading takes whichever thread imports it first for the
# main one, and a view on a handler thread that did (uvloop.run, asyncio's
# runners) would then take itself for the main thread and install signal
# handlers the interpreter refuses off it.
import threading  # noqa: F401


class LoadError(Exception):
    """The spec names nothing loadable; the message says what was tried."""


def _is_asgi(app):
    """ASGI 3: a coroutine function, or an object whose __call__ is one."""
    if inspect.iscoroutinefunction(app):
        return True
    if inspect.isclass(app):
        return False
    call = getattr(type(app), "__call__", None)
    return call is not None and inspect.iscoroutinefunction(call)


def _is_asgi2(app):
    """ASGI 2: a class whose instances (one per scope) have an async __call__."""
    return inspect.isclass(app) and inspect.iscoroutinefunction(getattr(app, "__call__", None))


def _asgi2_to_3(app):
    async def asgi3(scope, receive, send):
        instance = app(scope)
        await instance(receive, send)
    asgi3.__wrapped__ = app
    return asgi3


def _missing(exc, modname):
    """True when exc says modname (or one of its parents) does not exist."""
    name = getattr(exc, "name", None)
    return isinstance(exc, ModuleNotFoundError) and name is not None and (
        modname == name or modname.startswith(name + "."))


def _not_importable(spec, exc, app_dir):
    """The LoadError for a spec whose module is not on sys.path (exc says
    which part is missing)."""
    parent, _, child = (exc.name or "").rpartition(".")
    if parent and parent in sys.modules:
        where = getattr(sys.modules[parent], "__file__", None) or "a namespace package"
        return LoadError(f"cannot import {spec!r}: {parent!r} (from {where}) imports but has no module {child!r}")
    try:
        cwd = os.getcwd()
    except OSError as err:
        cwd = "unknown (%s)" % err.strerror
    return LoadError(f"cannot import {spec!r}: no module named {exc.name!r} on sys.path "
                     f"(current directory {cwd}, --app-dir {app_dir or cwd}); run m0serve from the "
                     f"directory that holds it, or give that directory as --app-dir")


def _dotted(node):
    """'a.b.c' for the expression a.b.c (names only), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _parse_attr(spec, attr):
    """(name, call): the dotted name ATTR gives, and (args, kwargs) of the
    literal call it makes, or None when it is a bare name."""
    want = "want MODULE:ATTR, or MODULE:ATTR(...) with literal arguments for an application factory"
    try:
        node = ast.parse(attr.strip(), mode="eval").body
    except SyntaxError:
        raise LoadError(f"invalid application spec {spec!r}: {attr!r} is not an attribute name or a call ({want})") \
            from None
    call = None
    if isinstance(node, ast.Call):
        call, node = node, node.func
    name = _dotted(node)
    if name is None:
        raise LoadError(f"invalid application spec {spec!r}: {attr!r} is not an attribute name or a call ({want})")
    if call is None:
        return name, None
    try:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            raise ValueError
        args = tuple(ast.literal_eval(a) for a in call.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except ValueError:
        raise LoadError(f"invalid application spec {spec!r}: the arguments of {name}() must be literals "
                        f"(strings, numbers, tuples, lists, dicts, sets, True, False, None)") from None
    return name, (args, kwargs)


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


def _build(factory, args, kwargs, where):
    """Call an application factory; its result must be an application."""
    if inspect.iscoroutinefunction(factory):
        raise LoadError(f"{where}: an async application factory cannot be called at import time; "
                        f"make it a plain function that returns the application")
    try:
        app = factory(*args, **kwargs)
    except TypeError as exc:
        # Raised by the call itself (wrong arguments), not inside the
        # factory: one line, as for a spec naming nothing.
        if exc.__traceback__ is not None and exc.__traceback__.tb_next is None:
            raise LoadError(f"{where}: {exc}") from None
        raise
    if app is None or not callable(app):
        raise LoadError(f"{where} returned {app!r}, which is not an application (not callable)")
    return app


def _takes_nothing(obj):
    """A plain function that accepts no argument: never a WSGI or ASGI
    application (those take two or three), so a factory not called."""
    if not inspect.isfunction(obj) or inspect.iscoroutinefunction(obj):
        return False
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    for n in (2, 3):
        try:
            sig.bind(*range(n))
            return False
        except TypeError:
            pass
    try:
        sig.bind()
    except TypeError:
        return False
    return True


def _app_of(spec, modname, attr, factory):
    """The application MODULE:ATTR names: ATTR resolved, then called when
    ATTR is a call or factory is set."""
    name, call = _parse_attr(spec, attr)
    obj = _resolve(modname, name)
    if call is not None:
        return _build(obj, call[0], call[1], f"{modname}:{attr.strip()}")
    if factory:
        return _build(obj, (), {}, f"{modname}:{name}() (--factory)")
    if _takes_nothing(obj):
        raise LoadError(f"{modname}:{name} takes no arguments, so it is no application: if it is an application "
                        f"factory, call it: '{modname}:{name}()' (or --factory)")
    return obj


def _kind(app, protocol):
    """(app, kind): --protocol wins; auto detects ASGI 3 and ASGI 2 (wrapped)."""
    if protocol == "wsgi":
        return app, "wsgi"
    if _is_asgi(app):
        return app, "asgi"
    if _is_asgi2(app) or protocol == "asgi":
        return _asgi2_to_3(app), "asgi"
    return app, "wsgi"


def load(spec, protocol="auto", app_dir=None, factory=False):
    """Import spec and return (app, kind, found). Raises LoadError or the
    app's own error. app_dir is --app-dir as resolved (for the message);
    factory: --factory, call what a spec without parentheses names."""
    if ":" in spec:
        modname, attr = spec.split(":", 1)
        if not modname or not attr:
            raise LoadError(f"invalid application spec {spec!r} (want MODULE[:ATTR])")
        try:
            app = _app_of(spec, modname, attr, factory)
        except ModuleNotFoundError as exc:
            if _missing(exc, modname):
                raise _not_importable(modname, exc, app_dir) from None
            raise
        return _kind(app, protocol) + (spec,)

    candidates = [(spec + ".asgi", "application"), (spec + ".wsgi", "application"),
                  (spec, "application"), (spec, "app"), (spec + ".main", "app")]
    tried = []
    absent = None              # spec itself did not import: the ModuleNotFoundError
    for modname, attr in candidates:
        try:
            obj = _resolve(modname, attr)
        except ModuleNotFoundError as exc:
            if _missing(exc, modname):
                tried.append(f"{modname}:{attr}")
                if modname == spec:
                    absent = exc
                continue
            raise
        except LoadError:
            tried.append(f"{modname}:{attr}")
            continue
        app = _build(obj, (), {}, f"{modname}:{attr}() (--factory)") if factory else obj
        return _kind(app, protocol) + (f"{modname}:{attr}",)
    if absent is not None:
        raise _not_importable(spec, absent, app_dir)
    raise LoadError(f"module {spec!r} imports but has none of the applications tried: " + ", ".join(tried))
