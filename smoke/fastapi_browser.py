#!/usr/bin/env python3
"""The FastAPI example's page in a real browser (issue 9, "Done when"):
headless Chromium opens `examples/fastapi_app`'s page, served as `make
demo-fastapi` serves it (`m0serve main:app --workers 2 --realtime`), and
the page must show, through the browser's own fetch, EventSource and
WebSocket:

  - the JSON of /api/hello;
  - all five lines of the streamed /api/count;
  - a note published with the page's form, arriving on its held SSE stream;
  - a message sent over its WebSocket, echoed by the FastAPI endpoint.

Driven over the DevTools protocol with the helpers of chat_browser.py:

    make smoke-fastapi-browser       # installs chromium, builds, runs this
    .venv/bin/python smoke/fastapi_browser.py [--screenshot FILE] [--chromium PATH]

Exits 0 when the page showed all four, 1 otherwise (with what it showed).
Every wait is bounded; the server and the browser are stopped on the way out.
"""

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chat_browser import CDP, REPO, start_browser, start_server, stop  # noqa: E402

APP_DIR = REPO / "examples" / "fastapi_app"


def text_of(element_id):
    return "document.getElementById(%s).textContent" % json.dumps(element_id)


async def drive(browser_ws, port, screenshot):
    note = "a note from headless chromium %d" % os.getpid()
    message = "over the websocket %d" % os.getpid()
    checks = {
        "json": "%s.includes('hello from FastAPI on m0serve')" % text_of("hello"),
        "stream": "%s.includes('line 5 of 5')" % text_of("count"),
        "sse": "%s.includes(%s)" % (text_of("notes"), json.dumps(note)),
        "websocket": "%s.includes(%s)" % (text_of("echo"), json.dumps("echo: " + message)),
    }
    async with websockets.connect(browser_ws, max_size=None, open_timeout=10) as ws:
        cdp = CDP(ws)
        page = await cdp.open("http://127.0.0.1:%d/" % port)
        await cdp.until(page, "typeof es !== 'undefined' && es.readyState === 1 && ws.readyState === 1", 15,
                        "the page's EventSource and WebSocket did not open")
        await cdp.js(page, "t.value = %s; f.requestSubmit(); m.value = %s; w.requestSubmit(); true"
                     % (json.dumps(note), json.dumps(message)))
        shown = {}
        for name, expr in checks.items():
            try:
                await cdp.until(page, expr, 10, name)
                shown[name] = True
            except TimeoutError:
                shown[name] = await cdp.js(page, "document.body.innerText")
        if screenshot:
            png = (await cdp.call("Page.captureScreenshot", page))["data"]
            Path(screenshot).write_bytes(__import__("base64").b64decode(png))
        return shown


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshot", default="", help="save the page as PNG")
    a = ap.parse_args()
    if not os.access(a.chromium, os.X_OK):
        raise SystemExit("no chromium at %s (apt-get install chromium, or make smoke-fastapi-browser)" % a.chromium)
    server, port = start_server("main:app", APP_DIR)
    profile = tempfile.mkdtemp(prefix="m0fastapi.")
    browser = None
    try:
        browser, browser_ws = start_browser(a.chromium, profile)
        shown = asyncio.run(asyncio.wait_for(drive(browser_ws, port, a.screenshot), 90))
    finally:
        stop(browser, server)
        shutil.rmtree(profile, ignore_errors=True)
    ok = all(v is True for v in shown.values())
    print("fastapi_browser: %s -> %s" % (", ".join("%s=%s" % (k, v is True) for k, v in shown.items()),
                                         "ok" if ok else "FAILED"))
    if not ok:
        print("  the page showed: %r" % next(v for v in shown.values() if v is not True))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
