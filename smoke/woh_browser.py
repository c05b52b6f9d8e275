#!/usr/bin/env python3
"""django-grip's WebSocket views in a real browser, held by m0serve's
WebSocket-over-HTTP (issue 32 item 5): headless Chromium opens the chat
page of tests/apps/gripws twice, against `m0serve gripws.wsgi --workers 2
--grip-key-file KEY --grip-control ADDR --ws-over-http /ws`. Each page's
WebSocket (new WebSocket(...) on /ws/chat/browser/, the `chat` view:
websocket_only, c:subscribe to its room, a gripcontrol publish of each
message) must open, hear its own message back through the room, and both
pages must hear a ws-message published from outside with gripcontrol's
GripPubControl. Then the README's echo view (/ws/echo/) answers a message
sent from page 1, and page 1's chat socket closes cleanly (1000).

Driven over the DevTools protocol (smoke/chat_browser.py's helpers):

    make smoke-woh-browser                   # installs chromium, builds, runs this
    python smoke/woh_browser.py [--screenshot FILE] [--chromium PATH]

Run it with a Python that has the GRIP packages (requirements/test.txt).
Exits 0 when every page showed what it should, 1 otherwise. Every wait is
bounded; the server and the browser are stopped on the way out.
"""

import asyncio
import json
import os
import sys
from pathlib import Path

import websockets
from gripcontrol import GripPubControl, WebSocketMessageFormat
from pubcontrol import Item

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from chat_browser import CDP, run_smoke, start_server as start_m0serve  # noqa: E402
from serverproc import free_port  # noqa: E402  (the one copy, shared with the tests and bench)

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "tests" / "apps"
KEY = "smoke-woh-key-0123456789abcdef-01234567890"
LOG = "document.getElementById('log').textContent"


def start_server(tmp):
    key = Path(tmp) / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    cport = free_port()
    env = dict(os.environ, GRIPWS_GRIP_URL="http://127.0.0.1:%d?iss=pushpin&key=%s" % (cport, KEY),
               GRIPWS_LOG=str(Path(tmp) / "notes.log"), PYTHONPATH=str(APPS),
               DJANGO_SETTINGS_MODULE="gripws.settings", PYTHONWARNINGS="ignore")
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    proc, port = start_m0serve("gripws.wsgi", APPS, ("--workers", "2", "--grip-key-file", str(key),
                                                    "--grip-control", "127.0.0.1:%d" % cport,
                                                    "--ws-over-http", "/ws"), env)
    return proc, port, cport


def publish(cport, channel, text):
    """A ws-message item as an application outside the server sends it."""
    pub = GripPubControl({"control_uri": "http://127.0.0.1:%d" % cport, "key": KEY})
    pub.publish(channel, Item(WebSocketMessageFormat(text)), blocking=True)


async def expect(cdp, shown, name, session, expr, timeout=10):
    try:
        await cdp.until(session, expr, timeout, name)
        shown[name] = True
    except TimeoutError:
        shown[name] = await cdp.js(session, LOG)


async def drive(browser_ws, port, cport, screenshot):
    base = "http://127.0.0.1:%d" % port
    async with websockets.connect(browser_ws, max_size=None, open_timeout=10) as ws:
        cdp = CDP(ws)
        pages = [await cdp.open(base + "/page/") for _ in range(2)]
        shown = {}
        for i, s in enumerate(pages):
            # The page sends "hello from the page" on open; the chat view
            # publishes it to the room, which the socket subscribed to.
            await expect(cdp, shown, "page %d open, own message back" % (i + 1), s,
                         "%s.includes('open\\n') && %s.includes('msg hello from the page')" % (LOG, LOG), 15)
        text = "from gripcontrol %d" % os.getpid()
        await asyncio.to_thread(publish, cport, "room-browser", text)
        for i, s in enumerate(pages):
            await expect(cdp, shown, "page %d got the publish" % (i + 1), s,
                         "%s.includes(%s)" % (LOG, json.dumps("msg " + text)))
        # The README's echo view, from the page's own script context.
        await cdp.js(pages[0], "window.echoed = ''; var e = new WebSocket('ws://' + location.host + '/ws/echo/');"
                               "e.onopen = function () { e.send('echo me'); };"
                               "e.onmessage = function (m) { window.echoed = m.data; e.close(1000); }; true")
        await expect(cdp, shown, "echo", pages[0], "window.echoed === 'echo me'")
        await cdp.js(pages[0], "ws.close(1000); true")
        await expect(cdp, shown, "page 1 closed 1000", pages[0], "%s.includes('close 1000')" % LOG)
        if screenshot:
            png = (await cdp.call("Page.captureScreenshot", pages[1]))["data"]
            Path(screenshot).write_bytes(__import__("base64").b64decode(png))
        return shown


def main():
    run_smoke("woh", __doc__, "smoke-woh-browser", start_server, drive)

if __name__ == "__main__":
    main()
