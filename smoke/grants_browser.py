#!/usr/bin/env python3
"""A cross-origin EventSource on a signed grant in a real browser (issue 18):
headless Chromium loads a page from http://localhost:PORT whose EventSource
(withCredentials) opens http://127.0.0.1:PORT/rt/sse?token=GRANT — another
origin — against `m0serve grants_app:application --realtime --grant-path /rt
--grant-cors-origin http://localhost:PORT`. The stream must open (the CORS
answer lets the browser read it) and show the events published on the
grant's channels, and not one of another channel. (An origin not listed
gets a 403: tests/e2e/test_grants.py.)

    make smoke-grants-browser        # installs chromium, builds, runs this
    .venv/bin/python smoke/grants_browser.py [--chromium PATH]

Exits 0 when it all holds, 1 otherwise. Every wait is bounded; the server
and the browser are stopped on the way out. Reuses chat_browser.py's
DevTools client.
"""

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from chat_browser import CDP, start_browser, start_server as start_m0serve, stop  # noqa: E402
from serverproc import free_port  # noqa: E402  (the one copy, shared with the tests and bench)

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
import m0pub  # noqa: E402


def start_server(port, key_file):
    return start_m0serve("grants_app:application", REPO / "tests" / "apps",
                         ("--workers", "1", "--realtime", "--grant-key-file", str(key_file), "--grant-path", "/rt",
                          "--grant-cors-origin", "http://localhost:%d" % port),
                         bind="127.0.0.1:%d" % port)[0]


def publish(port, channel, data):
    q = urllib.parse.urlencode({"channel": channel, "data": data})
    return int(urllib.request.urlopen("http://127.0.0.1:%d/publish?%s" % (port, q), timeout=10).read())


async def drive(browser_ws, port, token):
    src = urllib.parse.quote("http://127.0.0.1:%d/rt/sse?token=%s" % (port, token), safe="")
    async with websockets.connect(browser_ws, max_size=None, open_timeout=10) as ws:
        cdp = CDP(ws)
        page = await cdp.open("http://localhost:%d/page?src=%s" % (port, src))
        await cdp.until(page, "document.getElementById('state').textContent === 'open'", 15,
                        "the cross-origin EventSource did not open")
        ids = [publish(port, "news", "first"), publish(port, "secret", "never"), publish(port, "chat", "second")]
        want = "%d:first|%d:second" % (ids[0], ids[2])
        await cdp.until(page, "Array.from(document.querySelectorAll('#log li')).map(l => l.textContent)"
                              ".join('|') === %r" % want, 10, "the page did not show " + want)
        shown = await cdp.js(page, "Array.from(document.querySelectorAll('#log li')).map(l => l.textContent).join('|')")
        return shown == want, shown


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    if not os.access(a.chromium, os.X_OK):
        raise SystemExit("no chromium at %s (make smoke-grants-browser installs it)" % a.chromium)
    tmp = Path(tempfile.mkdtemp(prefix="m0grants."))
    key_file = tmp / "keys"
    key_file.write_text("k1 browser-smoke-secret-0123456789abcdef\n")
    key_file.chmod(0o600)
    port = free_port()
    server = start_server(port, key_file)
    browser = None
    ok, shown = False, None
    try:
        token = m0pub.grant(["news", "chat"], ttl=120, sub="browser", key_file=key_file)
        browser, browser_ws = start_browser(a.chromium, str(tmp / "profile"))
        ok, shown = asyncio.run(asyncio.wait_for(drive(browser_ws, port, token), 90))
    finally:
        stop(browser, server)
        shutil.rmtree(tmp, ignore_errors=True)
    print("grants_browser: cross-origin EventSource showed %r -> %s" % (shown, "ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
