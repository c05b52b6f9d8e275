#!/usr/bin/env python3
"""docs/realtime.md's page examples in a real browser (issue 32): headless
Chromium against tests/apps/roomproj, whose views and templates are the
docs' code, under `m0serve roomproj.wsgi --workers 2 --grant-path /rt
--presence-events room. --presence-debounce 1 --grant-refresh 2` with
4-second grants on the live page.

1. History ("A page that renders what it missed, then subscribes"): events
   published before the page loaded are rendered, one published while the
   page's stream request is held back in the browser (after the render,
   before the subscription) and one published live are shown too; after a
   reload (the join the page's own stream caused is now in the history)
   the list is the same messages, each once, and a live one follows.
2. Who's here: alice's and bob's pages (two browser contexts, two logins)
   both list both users, also when bob joins while alice's stream request
   is held back, and when bob's page reloads while alice's reload is held
   back (no connection holds her as bob's page renders, and she is back
   within the debounce: no join); when bob's page closes, alice's list
   drops him after the debounce.
3. Expiry and refresh: the live page's grant lives 4 s; the page gets
   m0-refresh, fetches /live/grant and reopens with &last_event_id=; events
   published every 150 ms for 9 s are each shown exactly once, in order,
   including those after the first grant's exp.

Driven over the DevTools protocol (smoke/chat_browser.py's helpers):

    make smoke-room-browser                  # installs chromium, builds, runs this
    .venv/bin/python smoke/room_browser.py [--chromium PATH]   # M0SERVE=binary to test another build

Exits 0 when every check holds, 1 otherwise (with what each page showed).
Every wait is bounded; the server and the browser are stopped on the way
out.
"""

import argparse
import asyncio
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from chat_browser import CDP, start_browser, start_server as start_m0serve, stop  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "tests" / "apps"
TTL = 4
DEBOUNCE = 1

# Before any script of a page: note each EventSource the page makes, and the
# m0-refresh notices it gets, without touching the docs' code.
WATCH = """(() => {
  const ES = window.EventSource;
  window.__es = []; window.__refresh = 0;
  window.EventSource = class extends ES {
    constructor(url, init) {
      super(url, init);
      window.__es.push({url: String(url), es: this});
      this.addEventListener("m0-refresh", () => { window.__refresh += 1; });
    }
  };
})();"""
ES_OPEN = "(window.__es || []).length > 0 && window.__es[window.__es.length - 1].es.readyState === 1"
LOG = "Array.from(document.querySelectorAll('#log li')).map(l => l.textContent)"
HERE = "Array.from(document.querySelectorAll('#here li')).map(l => l.textContent)"


class Browser(CDP):
    """CDP with the events that arrive kept (Fetch.requestPaused), browser
    contexts (a login each) and request interception."""

    def __init__(self, ws):
        super().__init__(ws)
        self.events = []

    async def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        await self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), 30))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    async def event(self, method, session, timeout, what):
        """The first event `method` of session not yet taken (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events:
                if e["method"] == method and e.get("sessionId") == session:
                    self.events.remove(e)
                    return e["params"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(what)
            try:
                msg = json.loads(await asyncio.wait_for(self.ws.recv(), left))
            except asyncio.TimeoutError:
                raise TimeoutError(what) from None
            if "method" in msg:
                self.events.append(msg)

    async def user_page(self, base, user):
        """A new browser context logged in as user, on a blank page with
        WATCH installed: (context, session)."""
        ctx = (await self.call("Target.createBrowserContext"))["browserContextId"]
        target = (await self.call("Target.createTarget", url="about:blank", browserContextId=ctx))["targetId"]
        session = (await self.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
        await self.call("Page.enable", session)
        await self.call("Page.addScriptToEvaluateOnNewDocument", session, source=WATCH)
        await self.go(session, base + "/login?" + urllib.parse.urlencode({"user": user}))
        await self.until(session, "document.body && document.body.textContent.includes('\"id\"')", 15,
                         "%s could not log in" % user)
        return ctx, session

    async def go(self, session, url):
        await self.call("Page.navigate", session, url=url)
        path = urllib.parse.urlsplit(url).path
        await self.until(session, "location.pathname === %s && document.readyState === 'complete'"
                         % json.dumps(path), 15, "%s did not load" % url)

    async def reload(self, session):
        await self.js(session, "window.__old = 1")
        await self.call("Page.reload", session)
        await self.until(session, "!window.__old && document.readyState === 'complete'", 15, "no reload")

    async def hold_requests(self, session, pattern):
        await self.call("Fetch.enable", session, patterns=[{"urlPattern": pattern}])

    async def release(self, session, what):
        """Let the next held request go on, and stop holding."""
        paused = await self.event("Fetch.requestPaused", session, 15, what)
        await self.call("Fetch.continueRequest", session, requestId=paused["requestId"])
        await self.call("Fetch.disable", session)


def migrate(env):
    r = subprocess.run([sys.executable, "-m", "django", "migrate", "-v0"], env=env, capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit("migrate failed:\n" + r.stderr)


def get(base, path, **q):
    url = base + path + ("?" + urllib.parse.urlencode(q) if q else "")
    return urllib.request.urlopen(url, timeout=10).read().decode()


def say(base, channel, data):
    return int(get(base, "/say", channel=channel, data=data))


async def check_history(b, base, shown):
    _, page = await b.user_page(base, "hana")
    before = ["before %d" % i for i in range(3)]
    for text in before:
        say(base, "room.1", text)
    # The stream's request is held back in the browser: an event published
    # after the render and before the subscription must come from the journal.
    await b.hold_requests(page, "*/room/1/events*")
    await b.go(page, base + "/room/1")
    say(base, "room.1", "between")
    await b.release(page, "the history page's stream request")
    await b.until(page, ES_OPEN, 15, "the history page's EventSource did not open")
    say(base, "room.1", "live 1")
    want = before + ["between", "live 1"]
    try:
        await b.until(page, "%s.length >= %d" % (LOG, len(want)), 10, "history")
    except TimeoutError:
        pass
    shown["history: rendered, then between and live, once each"] = (await b.js(page, LOG)) == want or \
        await b.js(page, LOG)
    # A reload renders it all from history (now with the page's own join in
    # the channel), then a live one.
    await b.reload(page)
    await b.until(page, ES_OPEN, 15,
                  "the reloaded history page's EventSource did not open")
    say(base, "room.1", "live 2")
    want += ["live 2"]
    try:
        await b.until(page, "%s.length >= %d" % (LOG, len(want)), 10, "history after reload")
    except TimeoutError:
        pass
    got = await b.js(page, LOG)
    shown["history: after a reload, the same messages once each, then live"] = got == want or got


async def lists_both(b, alice, bob, both, shown, when):
    for name, s in [("alice", alice), ("bob", bob)]:
        try:
            await b.until(s, "JSON.stringify(%s.sort()) === %s" % (HERE, json.dumps(json.dumps(both, separators=(",", ":")))), 10, name)
            shown["here: %s's page lists both%s" % (name, when)] = True
        except TimeoutError:
            shown["here: %s's page lists both%s" % (name, when)] = await b.js(s, HERE)


async def check_here(b, base, shown):
    actx, alice = await b.user_page(base, "alice")
    bctx, bob = await b.user_page(base, "bob")
    aid = json.loads(await b.js(alice, "document.body.textContent"))["id"]
    bid = json.loads(await b.js(bob, "document.body.textContent"))["id"]
    both = sorted([str(aid), str(bid)])
    say(base, "room.2", "a room that has seen an event")
    # Alice's page renders the list, but its stream's request is held back
    # while bob's page opens: bob's join must still reach her list.
    await b.hold_requests(alice, "*/rt/sse*")
    await b.go(alice, base + "/here/2")
    await b.go(bob, base + "/here/2")
    await b.until(bob, ES_OPEN, 15, "bob's EventSource did not open")
    await b.release(alice, "alice's stream request")
    await b.until(alice, ES_OPEN, 15, "alice's EventSource did not open")
    await lists_both(b, alice, bob, both, shown, "")
    # Alice reloads while bob's page renders: her old stream is gone and her
    # new one is held back, so no connection holds her when bob's view asks
    # presence(); she is back within the debounce (no join is published):
    # bob's new page must list her from the render.
    await b.hold_requests(alice, "*/rt/sse*")
    await b.reload(alice)
    await b.reload(bob)
    await b.until(bob, ES_OPEN, 15, "bob's reloaded EventSource did not open")
    await b.release(alice, "alice's reloaded stream request")
    await b.until(alice, ES_OPEN, 15, "alice's reloaded EventSource did not open")
    await lists_both(b, alice, bob, both, shown, " after alice's reload during bob's")
    closed = time.monotonic()
    await b.call("Target.disposeBrowserContext", browserContextId=bctx)
    try:
        await b.until(alice, "JSON.stringify(%s) === %s" % (HERE, json.dumps(json.dumps([str(aid)]))),
                      DEBOUNCE + 10, "leave")
        after = time.monotonic() - closed
        shown["here: bob's leave after the debounce (%.1f s)" % after] = after >= DEBOUNCE - 0.2 or after
    except TimeoutError:
        shown["here: bob's leave"] = await b.js(alice, HERE)
    await b.call("Target.disposeBrowserContext", browserContextId=actx)


def grant_exp(url):
    token = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["token"][0]
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"]


async def check_refresh(b, base, shown):
    _, page = await b.user_page(base, "carol")
    await b.go(page, base + "/live")
    await b.until(page, ES_OPEN, 15, "the live page's EventSource did not open")
    first = await b.js(page, "window.__es[0].url")
    exp = grant_exp(first)
    published = []
    end = time.monotonic() + 2 * TTL + 1
    while time.monotonic() < end:                 # the pace of a busy channel, not a wait
        published.append((say(base, "news", "n%d" % len(published)), time.time()))
        await asyncio.sleep(0.15)
    want = ["%d n%d" % (i, k) for k, (i, _) in enumerate(published)]
    try:
        await b.until(page, "%s.length >= %d" % (LOG, len(want)), 10, "live")
    except TimeoutError:
        pass
    got = await b.js(page, LOG)
    streams = await b.js(page, "window.__es.length")
    refreshes = await b.js(page, "window.__refresh")
    late = sum(1 for _, t in published if t > exp + 1)
    ok = got == want
    shown["refresh: %d events, each once in order (%d after the first grant's exp)" % (len(want), late)] = \
        ok or [g for g in got if got.count(g) > 1 or g not in want] + ["missing:"] + [w for w in want if w not in got]
    shown["refresh: m0-refresh %d times, %d streams" % (refreshes, streams)] = refreshes >= 2 and streams >= 3
    shown["refresh: the reopened streams carry last_event_id"] = all(
        "&last_event_id=" in e for e in await b.js(page, "window.__es.slice(1).map(e => e.url)")) \
        or await b.js(page, "window.__es.map(e => e.url.slice(-30))")
    shown["refresh: events after the first grant's exp shown"] = late > 0 and ok


async def drive(browser_ws, port):
    base = "http://127.0.0.1:%d" % port
    shown = {}
    async with websockets.connect(browser_ws, max_size=None, open_timeout=10) as ws:
        b = Browser(ws)
        await check_history(b, base, shown)
        await check_here(b, base, shown)
        await check_refresh(b, base, shown)
    return shown


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    if not os.access(a.chromium, os.X_OK):
        raise SystemExit("no chromium at %s (make smoke-room-browser installs it)" % a.chromium)
    tmp = Path(tempfile.mkdtemp(prefix="m0room."))
    keys = tmp / "keys"
    keys.write_text("k1 room-smoke-secret-0123456789abcdef\n")
    keys.chmod(0o600)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(APPS), str(REPO / "python")]),
               DJANGO_SETTINGS_MODULE="roomproj.settings", ROOMPROJ_DB=str(tmp / "db.sqlite3"),
               ROOMPROJ_TTL=str(TTL), PYTHONWARNINGS="ignore")
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    migrate(env)
    server = browser = None
    shown = {}
    try:
        server, port = start_m0serve("roomproj.wsgi", APPS,
                                     ("--workers", "2", "--grant-key-file", str(keys), "--grant-path", "/rt",
                                      "--presence-events", "room.", "--presence-debounce", str(DEBOUNCE),
                                      "--grant-refresh", "2", "--publish-socket", ""), env)
        browser, browser_ws = start_browser(a.chromium, str(tmp / "profile"))
        shown = asyncio.run(asyncio.wait_for(drive(browser_ws, port), 150))
    finally:
        stop(browser, server)
        shutil.rmtree(tmp, ignore_errors=True)
    ok = bool(shown) and all(v is True for v in shown.values())
    for k, v in shown.items():
        print("  %s: %s" % (k, "ok" if v is True else "FAILED, showed %r" % (v,)))
    print("room_browser: %s" % ("ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
