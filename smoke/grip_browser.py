#!/usr/bin/env python3
"""A django-eventstream page in a real browser, held by m0serve over GRIP
(issue 19): headless Chromium opens the project's page (an EventSource on
django-eventstream's `events` view) twice, against `m0serve gripproj.wsgi
--workers 2 --grip-key-file KEY --grip-control ADDR` (tests/apps/gripproj);
send_event runs in a view and in another process; both pages must show both
events with django-eventstream's ids (`test:N`, rendered from %I by the
server). Then one page's EventSource is closed and reopened: it resumes with
Last-Event-ID from the project's storage and shows an event sent meanwhile.

Driven over the DevTools protocol (smoke/chat_browser.py's helpers):

    make smoke-grip-browser          # installs chromium, builds, runs this
    python smoke/grip_browser.py [--screenshot FILE] [--chromium PATH]

Run it with a Python that has the GRIP packages (requirements/test.txt).
Exits 0 when every page showed every event, 1 otherwise. Every wait is
bounded; the server and the browser are stopped on the way out.
"""

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from chat_browser import CDP, run_smoke, start_server as start_m0serve  # noqa: E402
from serverproc import free_port  # noqa: E402  (the one copy, shared with the tests and bench)

REPO = Path(__file__).resolve().parents[1]
APPS = REPO / "tests" / "apps"
KEY = "smoke-grip-key-0123456789abcdef-0123456789"


def start_server(tmp):
    key = Path(tmp) / "grip.key"
    key.write_text(KEY + "\n")
    key.chmod(0o600)
    cport = free_port()
    env = dict(os.environ, GRIPPROJ_DB=str(Path(tmp) / "db.sqlite3"),
               GRIPPROJ_GRIP_URL="http://127.0.0.1:%d?iss=pushpin&key=%s" % (cport, KEY),
               PYTHONPATH=str(APPS), DJANGO_SETTINGS_MODULE="gripproj.settings", PYTHONWARNINGS="ignore")
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v0"], env=env, check=True, timeout=60)
    proc, port = start_m0serve("gripproj.wsgi", APPS, ("--workers", "2", "--grip-key-file", str(key),
                                                      "--grip-control", "127.0.0.1:%d" % cport), env)
    return proc, port, env


def send_from_view(port, text):
    urllib.request.urlopen("http://127.0.0.1:%d/send/?text=%s" % (port, text), timeout=10).read()


def send_from_process(env, text):
    code = ("import django; django.setup()\nfrom django_eventstream import send_event\n"
            "send_event('test', 'message', {'text': %r}, async_publish=False)\n" % text)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)


async def drive(browser_ws, port, env, screenshot):
    base = "http://127.0.0.1:%d" % port
    log = "document.getElementById('log').textContent"
    async with websockets.connect(browser_ws, max_size=None, open_timeout=10) as ws:
        cdp = CDP(ws)
        pages = [await cdp.open(base + "/page/") for _ in range(2)]
        for s in pages:
            await cdp.until(s, "typeof es !== 'undefined' && es.readyState === 1", 15, "an EventSource did not open")
        send_from_view(port, "from-view")
        send_from_process(env, "from-process")
        shown = {}
        for i, s in enumerate(pages):
            name = "page %d" % (i + 1)
            try:
                await cdp.until(s, "/test:\\d+ \\{\"text\": \"from-view\"\\}/.test(%s) && %s.includes('from-process')"
                                % (log, log), 10, name)
                shown[name] = True
            except TimeoutError:
                shown[name] = await cdp.js(s, log)
        # Reconnect from the last event's id (its MessageEvent.lastEventId, as
        # the page logged it), as django-eventstream's client does with
        # ?lastEventId=: answered from the project's storage.
        await cdp.js(pages[0], "window.lastId = %s.trim().split('\\n').pop().split(' ')[0]; es.close(); true" % log)
        send_from_view(port, "while-away")
        await cdp.js(pages[0], "es = new EventSource('/events/?lastEventId=' + encodeURIComponent(window.lastId));"
                               "es.addEventListener('message', function (e) {"
                               "document.getElementById('log').textContent += e.lastEventId + ' ' + e.data + '\\n'; });"
                               "true")
        try:
            await cdp.until(pages[0], "%s.includes('while-away')" % log, 10, "resume")
            shown["resume"] = True
        except TimeoutError:
            shown["resume"] = await cdp.js(pages[0], log)
        if screenshot:
            png = (await cdp.call("Page.captureScreenshot", pages[1]))["data"]
            Path(screenshot).write_bytes(__import__("base64").b64decode(png))
        return shown


def main():
    run_smoke("grip", __doc__, "smoke-grip-browser", start_server, drive)

if __name__ == "__main__":
    main()
