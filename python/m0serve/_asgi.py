"""The ASGI executor: one thread per ASGI application per worker, running a
persistent asyncio loop (uvloop when importable), fed by the C loop.

The C side (src/python/asgi.c, the built-in ``_m0asgi`` module) owns the sockets,
the parser, the framing and the scope's construction; this file owns the
ASGI protocol: one task per request, ``receive``/``send`` (ASGI 3.0, HTTP
spec 2.4) and lifespan (2.0) with uvicorn's "auto" semantics.

Nothing here blocks the event loop: what a request waits for — credit to
send more body, a request body that has not arrived yet (Expect:
100-continue), the client leaving — is polled for in C, and the C loop
answers with a WAKE record on the lane this loop reads (``add_reader``).
After a response is complete its job belongs to the C loop again: a task
that goes on running (background work) gets ``http.disconnect`` from
``receive`` and never touches the job.

Used only by the server; not a public API.
"""

import asyncio
import os
import sys
import threading
import time
import traceback

import _m0asgi as _c

READ_CHUNK = 64 * 1024


def _disconnect():
    """A new http.disconnect message: each is the application's own, to keep
    or change (one shared dict would carry one request's changes into the
    next's)."""
    return {"type": "http.disconnect"}


class ClientDisconnected(OSError):
    """send() on a WebSocket that has closed (ASGI 2.4: an IOError subclass)."""


def _say(level, what):
    """One line on stderr in the server's own log format (src/base/log.c: UTC
    time, pid, level), so the executor's lines read like the loop's."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S +0000", time.gmtime())
    sys.stderr.write("[%s] [%d] [%s] %s\n" % (stamp, os.getpid(), level, what))
    sys.stderr.flush()


def _report(what):
    """The current exception's traceback, on stderr (the server's error log)."""
    _say("ERROR", what)
    traceback.print_exc(file=sys.stderr)
    sys.stderr.flush()


def _count(n, noun):
    return "%d %s%s" % (n, noun, "" if n == 1 else "s")


def _task_names(tasks, most=8):
    """What the tasks run, for the log: each one's coroutine (its qualified
    name), else the task's name; at most `most`, then how many more."""
    names = []
    for task in tasks:
        coro = task.get_coro()
        names.append(getattr(coro, "__qualname__", None) or task.get_name())
    names.sort()
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else "%s and %d more" % (shown, len(names) - most)


class LifespanFailed(RuntimeError):
    """The application refused to start (lifespan.startup.failed, or its
    startup raised), its startup did not complete within --lifespan-timeout,
    or the loops of a worker disagree on whether it speaks lifespan."""


PENDING_EVERY = 5.0          # seconds between the warnings of a startup that waits


def start(app, exec_id, fd, loop_kind, lifespan, graceful_timeout, lifespan_timeout=0.0, name="the application",
          first=None, loop_index=0):
    """Start an executor for app (named name in the log) reading lane fd;
    returns it once lifespan startup is over. Raises LifespanFailed
    (startup.failed, a startup that raised, an error with --lifespan on, no
    completion within lifespan_timeout seconds — 0: no limit —, or, with
    --threads, a lifespan that ran on the first loop's executor `first` and
    not on this one, event loop loop_index, or the reverse) or the loop's
    own error (--loop uvloop without uvloop)."""
    ex = Executor(app, exec_id, fd, loop_kind, lifespan, graceful_timeout, lifespan_timeout, name)
    ex.start()
    if first is not None and first.lifespan_ran != ex.lifespan_ran:
        # One loop would serve without the state the other's startup built.
        ex.stop()
        raise LifespanFailed("its lifespan startup %s on event loop 0, but on event loop %d it %s; the loops "
                             "of a worker run one application" % (
                                 "completed" if first.lifespan_ran else "did not run (no ASGI lifespan)",
                                 loop_index,
                                 "completed" if ex.lifespan_ran else "does not speak ASGI lifespan"))
    return ex


class Executor:
    def __init__(self, app, exec_id, fd, loop_kind, lifespan, graceful_timeout, lifespan_timeout=0.0,
                 name="the application"):
        self.app = app
        self.name = name
        self.id = exec_id
        self.fd = fd
        self.loop_kind = loop_kind
        self.lifespan = lifespan
        self.startup_timeout = lifespan_timeout
        self.timeout = max(graceful_timeout, 1.0)
        self.state = {}              # lifespan's scope["state"], copied into every request scope
        self.cycles = {}             # job key (from take) -> the request cycle that owns the job
        self.requests = set()        # the tasks running a request's (or a WebSocket's) cycle
        self.loop = None
        self.thread = None
        self._ready = threading.Event()
        self._error = None
        self._ls = None
        self._flush_scheduled = False

    # -------------------------------------------------------------- thread

    def start(self):
        self.thread = threading.Thread(target=self._run, name="m0serve-asgi-%d" % self.id, daemon=True)
        self.thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _new_loop(self):
        if self.loop_kind in ("auto", "uvloop"):
            try:
                import uvloop
                return uvloop.new_event_loop()
            except ImportError:
                if self.loop_kind == "uvloop":
                    raise
        return asyncio.new_event_loop()

    def _run(self):
        try:
            self.loop = loop = self._new_loop()
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._startup())
            _c.defer(self.id, True)   # completions go out in batches: see need_flush()
            loop.add_reader(self.fd, self._drain)
        except BaseException as exc:
            self._error = exc
            self._close_failed()
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            _c.defer(self.id, False)
            loop.remove_reader(self.fd)
            # The requests' own tasks still running (work an application
            # goes on with after its response, as Django's response.close()
            # in a thread; a WebSocket's handler seeing its disconnect)
            # finish first, within the graceful timeout; then lifespan
            # shutdown, as uvicorn does. Other tasks are not waited for: the
            # lifespan may own them and stop them only at its shutdown
            # (Litestar's event emitter, a FastAPI lifespan's consumer).
            # Whatever is left after the shutdown is cancelled, named in
            # the log, and run to its end.
            pending = [t for t in self.requests if not t.done()]
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=self.timeout))
            try:
                loop.run_until_complete(self._shutdown())
            except BaseException:
                _report("lifespan shutdown failed")
            left = asyncio.all_tasks(loop)
            if left:
                _say("WARNING", "%s: cancelled %s still running after lifespan shutdown: %s"
                     % (self.name, _count(len(left), "task"), _task_names(left)))
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=1.0))
            loop.close()

    def _close_failed(self):
        """Startup failed: what it left running (a lifespan task that timed
        out) is cancelled and run to its end, briefly; the loop is closed."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.wait(left, timeout=1.0))
            loop.close()
        except BaseException:
            pass                     # the startup's own error is the one to report

    @property
    def lifespan_ran(self):
        """Lifespan ran on this executor: the application speaks it (false
        with --lifespan off, or when it does not)."""
        return self._ls is not None and self._ls.supported

    def stop(self):
        """Worker shutdown (requests have drained): lifespan shutdown, then
        the loop and its thread end. Called from the worker's main thread."""
        if self.loop is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(2 * self.timeout + 2.0)    # running tasks, then lifespan shutdown

    # ------------------------------------------------------------ the lane

    def need_flush(self):
        """A completion was collected: post the batch once the callbacks
        ready now have run (one wakeup of the C loop per batch)."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self):
        self._flush_scheduled = False
        _c.flush(self.id)

    def _drain(self):
        for kind, slot in _c.take(self.id):
            if kind == _c.START:
                cycle = HTTPCycle(self, slot)
                self.cycles[slot] = cycle
                task = self.loop.create_task(cycle.run())
                self.requests.add(task)
                task.add_done_callback(self.requests.discard)
            else:
                cycle = self.cycles.get(slot)
                if cycle is not None:
                    cycle.wake()
        # After the first steps of the tasks just created (they were queued
        # first): most responses are complete by then, and go out together.
        # (take() itself completes a START whose client has left.)
        self.need_flush()

    # ------------------------------------------------------------ lifespan

    async def _startup(self):
        if self.lifespan == "off":
            return
        self._ls = Lifespan(self)
        await self._ls.startup()

    async def _shutdown(self):
        if self._ls is not None:
            await asyncio.wait_for(self._ls.shutdown(), self.timeout)


class Lifespan:
    """ASGI lifespan 2.0, "auto" as uvicorn's, with one difference: an
    application that raises before it takes lifespan.startup from
    receive(), or that answers the lifespan scope with an HTTP message, does
    not speak the protocol, and serves without it; one that took the
    startup message and then raised speaks it, and its startup failed, as
    with lifespan.startup.failed (uvicorn serves it, with none of the state
    the startup was to build). With --lifespan on, any error is a failure."""

    def __init__(self, ex):
        self.ex = ex
        self.queue = asyncio.Queue()
        self.started = ex.loop.create_future()
        self.finished = ex.loop.create_future()
        self.supported = True
        self.abandoned = False       # startup timed out: its task is cancelled, quietly
        self.took_startup = False    # receive() handed the application lifespan.startup
        self.sent_other = False      # it sent a message that is not lifespan's (an HTTP app)
        self.task = None

    async def startup(self):
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.ex.state}
        self.task = self.ex.loop.create_task(self.main(scope))
        await self.queue.put({"type": "lifespan.startup"})
        error = await self._await_started()
        if error is not None:
            raise LifespanFailed(error)

    async def _await_started(self):
        """The startup's outcome; a warning every PENDING_EVERY s while it is
        pending — connections wait for it — and a failure once it has taken
        longer than --lifespan-timeout."""
        loop, limit = self.ex.loop, self.ex.startup_timeout
        began = loop.time()
        warn_at = began + PENDING_EVERY
        while True:
            now = loop.time()
            until = warn_at if limit <= 0 else min(warn_at, began + limit)
            if until > now:
                await asyncio.wait({self.started}, timeout=until - now)
            if self.started.done():
                return self.started.result()
            now = loop.time()
            if limit > 0 and now - began >= limit:
                self.abandoned = True
                self.task.cancel()
                return ("it did not complete within %g s (--lifespan-timeout); the application "
                        "never sent lifespan.startup.complete" % limit)
            if now >= warn_at:
                warn_at += PENDING_EVERY
                _say("WARNING", "%s: ASGI lifespan startup has not completed after %d s; requests wait for it%s"
                     % (self.ex.name, round(now - began),
                        " (--lifespan-timeout %g s)" % limit if limit > 0 else ""))

    async def shutdown(self):
        if not self.supported or self.task is None or self.task.done():
            return
        await self.queue.put({"type": "lifespan.shutdown"})
        error = await self.finished
        if error is not None:
            _say("ERROR", "lifespan shutdown failed: %s" % error)

    async def main(self, scope):
        try:
            await self.ex.app(scope, self.receive, self.send)
        except BaseException as exc:
            if self.abandoned and isinstance(exc, asyncio.CancelledError):
                return                   # the startup timed out: reported once, by startup()
            if not self.started.done():
                if self.ex.lifespan == "auto" and (not self.took_startup or self.sent_other):
                    self.supported = False
                    _say("INFO", "the application does not speak ASGI lifespan (%s: %s); serving without it"
                         % (type(exc).__name__, exc))
                    self.started.set_result(None)
                else:
                    _report("%s: lifespan startup raised%s" % (
                        self.ex.name, "" if self.ex.lifespan != "auto" else
                        " after taking lifespan.startup (an application that does not speak lifespan: "
                        "--lifespan off)"))
                    self.started.set_result("%s: %s" % (type(exc).__name__, exc))
            else:
                _report("the lifespan task raised")
        finally:
            if not self.started.done():
                self.started.set_result(None)
            if not self.finished.done():
                self.finished.set_result(None)

    async def receive(self):
        message = await self.queue.get()
        if message["type"] == "lifespan.startup":
            self.took_startup = True
        return message

    async def send(self, message):
        kind = message["type"]
        if not kind.startswith("lifespan."):
            self.sent_other = True
        if kind == "lifespan.startup.complete":
            self.started.set_result(None)
        elif kind == "lifespan.startup.failed":
            self.started.set_result(message.get("message", "") or "lifespan.startup.failed")
        elif kind == "lifespan.shutdown.complete":
            self.finished.set_result(None)
        elif kind == "lifespan.shutdown.failed":
            self.finished.set_result(message.get("message", "") or "lifespan.shutdown.failed")
        else:
            raise RuntimeError("unexpected ASGI lifespan message %r" % kind)


class _Cycle:
    """What an HTTP request and a WebSocket share: the slot, the futures its
    receive/send wait on (a WAKE resolves them all; each re-polls), and the
    job's return to the loop."""

    __slots__ = ("ex", "slot", "complete", "waiters")

    def __init__(self, ex, slot):
        self.ex = ex
        self.slot = slot
        self.complete = False       # the job is the C loop's again
        self.waiters = []

    def _give_back(self, how=None, *args):
        """how(slot, *args) ends the job in C (None: it already has); the
        loop is told at the end of this batch."""
        self.complete = True
        if how is not None:
            how(self.slot, *args)
        self.ex.need_flush()
        if self.ex.cycles.get(self.slot) is self:
            del self.ex.cycles[self.slot]
        self.wake()

    def wake(self):
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _wait(self):
        fut = self.ex.loop.create_future()
        self.waiters.append(fut)
        return fut

    def _ended(self):
        return self.complete

    async def _wait_credit(self, ok):
        """ok: what the send that queued bytes returned (False: over the
        credit window, and C armed poll(WAIT_CREDIT), whose WAKE resolves
        _wait). True once the window has room; False when the job (or the
        socket) ended meanwhile: there is nothing left to send."""
        while not ok:
            await self._wait()
            if self._ended():
                return False
            ok = _c.poll(self.slot, _c.WAIT_CREDIT)
        return True


class HTTPCycle(_Cycle):
    """One HTTP request: its task, receive and send."""

    __slots__ = ("started", "body_done", "gone")

    def __init__(self, ex, slot):
        _Cycle.__init__(self, ex, slot)
        self.started = False        # http.response.start sent
        self.body_done = False      # receive() handed out the whole request body
        self.gone = False           # http.disconnect was seen

    async def run(self):
        try:
            scope = _c.scope(self.slot)
        except BaseException:
            _report("the request's scope could not be made; answering 500")
            self._end(failed=True)
            return
        if scope is None:                   # a WebSocket handshake refused in C (400/426)
            self._give_back()
            return
        if scope["type"] == "websocket":
            await WebSocketCycle(self.ex, self.slot).run(scope)
            return
        try:
            await self.ex.app(scope, self.receive, self.send)
        except BaseException as exc:
            if self.complete and isinstance(exc, asyncio.CancelledError):
                raise                       # the worker is stopping: nothing was owed
            if self.complete:
                _report("the application raised after its response was complete")
            elif self._client_left():
                # What the application raises because its client left
                # (Starlette's ClientDisconnect from a failed send) is no
                # error of the application's: uvicorn logs nothing either.
                _c.debug("%s %s: the client left; the application raised %s"
                         % (scope.get("method"), scope.get("path"), type(exc).__name__))
                self._end(failed=True)
            else:
                _report("the application raised (%s); answering 500 or aborting the connection"
                        % type(exc).__name__)
                self._end(failed=True)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        if not self.complete:
            if self._client_left():
                # Django's ASGIHandler cancels the response on http.disconnect
                # and returns: nobody is left to complete it for.
                _c.debug("%s %s: the client left; the application returned without %s the response"
                         % (scope.get("method"), scope.get("path"), "completing" if self.started else "starting"))
            else:
                _say("ERROR", "the ASGI application returned without %s the response"
                     % ("completing" if self.started else "starting"))
            self._end(failed=True)

    def _client_left(self):
        """The client is gone (it left, or its body never came): seen by
        receive(), or known to the C loop now."""
        if self.gone:
            return True
        try:
            return bool(_c.poll(self.slot, _c.WAIT_GONE) & _c.WAIT_GONE)
        except Exception:
            return False

    def _end(self, failed=False):
        """The response is complete (or failed): give the job back."""
        self._give_back(_c.fail if failed else None)

    async def receive(self):
        if self.complete or self.gone:
            return _disconnect()
        if not self.body_done:
            while True:
                try:
                    piece = _c.read(self.slot, READ_CHUNK)
                except OSError:
                    # The body will not arrive: the client left, stalled past
                    # --body-timeout or sent a malformed one. To the
                    # application the client is gone (ASGI HTTP 2.4).
                    self.gone = True
                    return _disconnect()
                if piece is not None:
                    break
                self.ex.need_flush()        # a lazy body: 100 Continue is asked for
                await self._wait()
                if self.complete:
                    return _disconnect()
            body, more = piece
            self.body_done = not more
            return {"type": "http.request", "body": body, "more_body": more}
        # The body is consumed: wait for the client to leave (or the
        # response to end), which is all a further receive() can report.
        while not self.complete:
            if _c.poll(self.slot, _c.WAIT_GONE):
                self.gone = True
                break
            await self._wait()
        return _disconnect()

    async def send(self, message):
        kind = message["type"]
        if self.complete:
            raise RuntimeError("ASGI message %r sent after the response was complete" % kind)
        if kind == "http.response.start":
            if self.started:
                raise RuntimeError("http.response.start sent twice")
            _c.start(self.slot, message["status"], message.get("headers", ()))
            self.started = True
        elif kind == "http.response.body":
            more = message.get("more_body", False)
            ok = _c.send(self.slot, message.get("body", b""), more)
            if more:
                self.ex.need_flush()        # a streamed piece went to the loop
            if not await self._wait_credit(ok):
                return
            if not more:
                self._end()
        elif kind == "http.response.pathsend":
            _c.pathsend(self.slot, message["path"])
            self._end()
        else:
            raise RuntimeError("unexpected ASGI message %r in an HTTP response" % kind)


# Fields of a 101 the server writes itself (RFC 6455 §4.2.2): an application's
# copy in websocket.accept's headers is dropped (a Sec-WebSocket-Protocol
# there stands for the subprotocol key when that is not given). m0serve
# negotiates no extensions, so the application cannot claim one.
_SERVER_101 = {b"upgrade", b"connection", b"sec-websocket-accept", b"sec-websocket-protocol",
               b"sec-websocket-extensions", b"content-length", b"transfer-encoding"}


def _accept_fields(message):
    """websocket.accept's (subprotocol, headers), the server's own fields removed."""
    subprotocol = message.get("subprotocol")
    headers = []
    for name, value in message.get("headers") or ():
        lname = bytes(name).lower()
        if lname not in _SERVER_101:
            headers.append((name, value))
        elif lname == b"sec-websocket-protocol" and subprotocol is None:
            subprotocol = bytes(value).decode("latin-1").strip()
    return subprotocol, headers


class WebSocketCycle(_Cycle):
    """One WebSocket (ASGI WebSocket spec 2.4): its task, receive and send.

    The C loop speaks the protocol (asgi_ws.c, wshold.c); this keeps the
    order of the application's messages: connect first, then accept, a
    denial response or close; after accept, messages until the socket ends.
    """

    CONNECTING, CONNECTED, CLOSING, RESPONSE = range(4)

    __slots__ = ("state", "connect_sent", "code", "reason")

    def __init__(self, ex, slot):
        _Cycle.__init__(self, ex, slot)
        self.state = self.CONNECTING
        self.connect_sent = False
        self.code = None            # the close code once the socket has ended
        self.reason = ""            # the reason of the peer's close frame
        ex.cycles[slot] = self

    async def run(self, scope):
        try:
            await self.ex.app(scope, self.receive, self.send)
        except BaseException as exc:
            if self.complete and isinstance(exc, asyncio.CancelledError):
                raise
            if self.complete:
                _report("the application raised after its WebSocket ended")
            elif self.state == self.CONNECTING:
                _report("the application raised before accepting the WebSocket (%s); answering 403"
                        % type(exc).__name__)
                self._end(_c.fail, 403)
            elif self.state == self.RESPONSE:
                _report("the application raised in its denial response (%s)" % type(exc).__name__)
                self._end(_c.fail)
            else:
                # After the socket ended (or the application closed it), a
                # send that failed is how the application learns it: no 1011.
                if self.code is None and self.state == self.CONNECTED:
                    _report("the application raised with its WebSocket open (%s); closing it with 1011"
                            % type(exc).__name__)
                    _c.ws_close(self.slot, 1011, "")
                elif not isinstance(exc, (OSError, asyncio.CancelledError)):
                    _report("the application raised after its WebSocket closed")
                self._end(_c.ws_end)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        if not self.complete:
            if self.state == self.CONNECTING:
                self._end(_c.fail, 403)      # returned without accepting: 403
            elif self.state == self.RESPONSE:
                _say("ERROR", "the ASGI application returned without completing its WebSocket denial response")
                self._end(_c.fail)
            else:
                self._end(_c.ws_end)         # the loop closes it (1000) if nobody did

    def _end(self, how, *args):
        """Give the job back to the loop (how: fail or ws_end; None when
        _c.send completed a denial response)."""
        if not self.complete:
            self._give_back(how, *args)

    def _ended(self):
        return self.complete or self.code is not None

    def _disconnect(self):
        return {"type": "websocket.disconnect", "code": self.code if self.code is not None else 1006,
                "reason": self.reason}

    async def receive(self):
        if not self.connect_sent:
            self.connect_sent = True
            return {"type": "websocket.connect"}
        while True:
            if self.code is not None or self.complete:
                return self._disconnect()
            if self.state in (self.CONNECTING, self.RESPONSE):
                # Nothing arrives before the 101: only the client leaving.
                if _c.poll(self.slot, _c.WAIT_GONE):
                    self.code = 1006
                    continue
                await self._wait()
                continue
            got = _c.ws_receive(self.slot)
            if got is None:
                await self._wait()
                continue
            if type(got) is list:
                self.code, self.reason = got
                return self._disconnect()
            _, data = got               # C decoded a text frame to str, a binary one to bytes
            self.ex.need_flush()        # taking the last of a batch posted TAKEN: the loop offers more
            if type(data) is str:
                return {"type": "websocket.receive", "text": data, "bytes": None}
            return {"type": "websocket.receive", "bytes": data, "text": None}

    async def send(self, message):
        kind = message["type"]
        if self.complete:
            raise ClientDisconnected("ASGI message %r sent after the WebSocket ended" % kind)
        state = self.state
        if kind == "websocket.send":
            if state in (self.CONNECTING, self.RESPONSE):
                raise RuntimeError("websocket.send before websocket.accept")
            if self.code is not None or state == self.CLOSING:
                raise ClientDisconnected("the WebSocket is closed")
            data = message.get("bytes")
            if data is None:
                data = message.get("text")
                if data is None:
                    raise TypeError("websocket.send needs 'bytes' or 'text'")
            try:
                ok = _c.ws_send(self.slot, data)
            except OSError:
                raise ClientDisconnected("the WebSocket is closed") from None
            self.ex.need_flush()
            await self._wait_credit(ok)
        elif kind == "websocket.accept":
            if state != self.CONNECTING:
                raise RuntimeError("websocket.accept %s" % ("sent twice" if state != self.RESPONSE
                                                           else "after a denial response started"))
            if self.code is not None:
                raise ClientDisconnected("the client left before the WebSocket was accepted")
            subprotocol, headers = _accept_fields(message)
            _c.ws_accept(self.slot, subprotocol, headers)
            self.state = self.CONNECTED
            self.ex.need_flush()
            # A receive() already waiting (Quart's message task starts before
            # its route accepts) waits only for the client leaving, the one
            # thing that can come before the 101: wake it, so it re-polls
            # and waits for messages now (ws_receive arms WAIT_MSG).
            self.wake()
        elif kind == "websocket.close":
            if state == self.CONNECTING:
                self._end(_c.fail, 403)      # closed before accept: the handshake is refused
            elif state == self.CONNECTED:
                if self.code is None:
                    _c.ws_close(self.slot, message.get("code", 1000) or 1000, message.get("reason") or "")
                    self.ex.need_flush()
                self.state = self.CLOSING
            elif state == self.RESPONSE:
                raise RuntimeError("websocket.close during a denial response")
        elif kind == "websocket.http.response.start":
            if state != self.CONNECTING:
                raise RuntimeError("websocket.http.response.start after the handshake was answered")
            _c.start(self.slot, message["status"], message.get("headers", ()))
            self.state = self.RESPONSE
        elif kind == "websocket.http.response.body":
            if state != self.RESPONSE:
                raise RuntimeError("websocket.http.response.body before websocket.http.response.start")
            more = message.get("more_body", False)
            ok = _c.send(self.slot, message.get("body", b""), more)
            if more:
                self.ex.need_flush()
            if not await self._wait_credit(ok):
                return
            if not more:
                self._end(None)                  # _c.send completed the response
        else:
            raise RuntimeError("unexpected ASGI message %r on a WebSocket" % kind)
