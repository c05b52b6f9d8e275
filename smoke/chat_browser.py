#!/usr/bin/env python3
"""The demo's chat page in a real browser (issue 10, "Done when"): headless
Chromium opens /chat?channel=news twice and the live feed (/) once, against
`m0serve rtsite.wsgi:application --workers 2 --realtime`; one chat tab sends
a message over its WebSocket; both chat tabs must show it (it went through
the Django view that gates the socket, which published it) and so must the
live feed's EventSource.

Driven over the Chrome DevTools Protocol with the `websockets` library (the
one the e2e suite uses), so nothing but Debian's `chromium` is needed:

    make smoke-chat-browser          # installs chromium, builds, runs this
    .venv/bin/python smoke/chat_browser.py [--screenshot FILE] [--chromium PATH]

Exits 0 when every page showed the message, 1 otherwise (with what each page
showed). Every wait is bounded; the server and the browser are stopped on
the way out.
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import websockets

REPO = Path(__file__).resolve().parents[1]
SITE = REPO / "examples" / "django_realtime"
# The flags /work/.library/env/machines/polyglot.md lists as known to work
# headless as root on a closed network.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--remote-debugging-port=0", "--remote-allow-origins=*"]


def start_server(app="rtsite.wsgi:application", app_dir=SITE, args=("--workers", "2", "--realtime"),
                 env=None, bind="127.0.0.1:0"):
    """m0serve APP from app_dir on bind (an ephemeral port by default) with
    args, in env (default: this process's, with the project's .venv when
    there is one and no VIRTUAL_ENV was given); waits for the banner (20 s):
    (process, port). Exits with the server's stderr when it does not start."""
    env = dict(os.environ if env is None else env)
    venv = REPO / ".venv"
    if "VIRTUAL_ENV" not in env and venv.is_dir():
        env["VIRTUAL_ENV"] = str(venv)
    proc = subprocess.Popen([os.environ.get("M0SERVE") or str(REPO / "m0serve"), app, "--app-dir", str(app_dir), "--bind", bind, *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=env)
    deadline = time.monotonic() + 20
    banner = b""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        banner += line
        m = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("m0serve did not start:\n" + banner.decode(errors="replace"))


def stop(*procs):
    """Stop each process group started here (None: not started): SIGTERM,
    SIGKILL after 10 s."""
    for p in procs:
        if p is not None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(p.pid, signal.SIGKILL)


def start_browser(chromium, profile):
    proc = subprocess.Popen([chromium, *CHROMIUM_FLAGS, "--user-data-dir=%s" % profile, "about:blank"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    port_file = Path(profile) / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if port_file.exists():
            lines = port_file.read_text().split("\n")
            if len(lines) >= 2 and lines[1]:
                return proc, "ws://127.0.0.1:%s%s" % (lines[0], lines[1])
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("chromium did not open its DevTools port")


class CDP:
    """Just enough of the DevTools protocol: commands (flat sessions), replies."""

    def __init__(self, ws):
        self.ws, self.next_id = ws, 0

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

    async def open(self, url):
        target = (await self.call("Target.createTarget", url=url))["targetId"]
        return (await self.call("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]

    async def js(self, session, expr):
        r = await self.call("Runtime.evaluate", session, expression=expr, returnByValue=True)
        return r.get("result", {}).get("value")

    async def until(self, session, expr, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if await self.js(session, expr):
                    return
            except RuntimeError:
                pass              # the page has no execution context yet: still loading
            await asyncio.sleep(0.05)
        raise TimeoutError(what)


async def drive(browser_ws, port, screenshot):
    base = "http://127.0.0.1:%d" % port
    text = "hello from headless chromium %d" % os.getpid()
    async with websockets.connect(browser_ws, max_size=None, open_timeout=10) as ws:
        cdp = CDP(ws)
        feed = await cdp.open(base + "/")
        chats = [await cdp.open(base + "/chat?channel=news") for _ in range(2)]
        for s in chats:
            await cdp.until(s, "document.getElementById('state').dataset.open === '1'", 15,
                            "a chat page's WebSocket did not open")
        await cdp.until(feed, "document.getElementById('state').textContent === 'connected'", 15,
                        "the live feed's EventSource did not open")
        proto = await cdp.js(chats[0], "socket.protocol")
        await cdp.js(chats[0], "document.getElementById('text').value = %s; "
                               "document.querySelector('#send button').click(); true" % json.dumps(text))
        shown = {}
        for name, s, sel in [("chat 1", chats[0], "#log"), ("chat 2", chats[1], "#log"), ("feed", feed, "#feed")]:
            try:
                await cdp.until(s, "document.querySelector(%s).textContent.includes(%s)"
                                % (json.dumps(sel), json.dumps(text)), 10, name)
                shown[name] = True
            except TimeoutError:
                shown[name] = await cdp.js(s, "document.querySelector(%s).textContent" % json.dumps(sel))
        if screenshot:
            png = (await cdp.call("Page.captureScreenshot", chats[1]))["data"]
            Path(screenshot).write_bytes(__import__("base64").b64decode(png))
        return proto, shown


def run_smoke(name, description, target, start, drive, timeout=90):
    """A browser smoke's main: --chromium and --screenshot from the command
    line; start(tmp) makes the server in a scratch directory and returns
    (process, *args); drive(browser_ws, *args, screenshot) returns
    {check: True, or what the page showed instead}. Prints one line
    (NAME: check=True, ... -> ok or FAILED, then what each failed check
    showed), stops the server and the browser, removes the scratch
    directories, and exits 0 when every check is True, else 1; exits with a
    message naming make TARGET when there is no chromium."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshot", default="", help="save the second page as PNG")
    a = ap.parse_args()
    if not os.access(a.chromium, os.X_OK):
        raise SystemExit("no chromium at %s (apt-get install chromium, or make %s)" % (a.chromium, target))
    tmp = tempfile.mkdtemp(prefix="m0%s." % name)
    server, *args = start(tmp)
    profile = tempfile.mkdtemp(prefix="m0%s-profile." % name)
    browser = None
    try:
        browser, browser_ws = start_browser(a.chromium, profile)
        shown = asyncio.run(asyncio.wait_for(drive(browser_ws, *args, a.screenshot), timeout))
    finally:
        stop(browser, server)
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    ok = all(v is True for v in shown.values())
    print("%s_browser: %s -> %s" % (name, ", ".join("%s=%s" % (k, v is True) for k, v in shown.items()),
                                    "ok" if ok else "FAILED"))
    for k, v in shown.items():
        if v is not True:
            print("  %s showed: %r" % (k, v))
    sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshot", default="", help="save the second chat tab as PNG")
    a = ap.parse_args()
    if not os.access(a.chromium, os.X_OK):
        raise SystemExit("no chromium at %s (apt-get install chromium, or make smoke-chat-browser)" % a.chromium)
    server, port = start_server()
    profile = tempfile.mkdtemp(prefix="m0chat.")
    browser = None
    try:
        browser, browser_ws = start_browser(a.chromium, profile)
        proto, shown = asyncio.run(asyncio.wait_for(drive(browser_ws, port, a.screenshot), 90))
    finally:
        stop(browser, server)
        shutil.rmtree(profile, ignore_errors=True)
    ok = all(v is True for v in shown.values()) and proto == "chat.v1"
    print("chat_browser: subprotocol %r; message shown: %s -> %s"
          % (proto, ", ".join("%s=%s" % (k, v is True) for k, v in shown.items()), "ok" if ok else "FAILED"))
    if not ok:
        for k, v in shown.items():
            if v is not True:
                print("  %s showed: %r" % (k, v))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
