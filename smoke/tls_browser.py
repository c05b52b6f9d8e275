#!/usr/bin/env python3
"""An EventSource and WebSockets over https:// and wss:// in a real browser
(issue 31): headless Chromium loads https://localhost:PORT/p/page.html from
`m0serve tls_app:application --certfile ... --realtime` (the page from
--static), whose EventSource opens /events (an SSE hold), one WebSocket
wss:///ws (a WebSocket hold) and one wss:///a/ws (an ASGI WebSocket that
says its scope's scheme, then echoes). A publish must reach the EventSource
and the held socket, the ASGI socket must say "wss" and echo, and the page
must be https:. The certificate is tests/e2e/tlsfix.Certs' (a CA of the
run's own); Chromium trusts it by the server key's SPKI hash
(--ignore-certificate-errors-spki-list, which needs --user-data-dir), so
any other certificate would still be refused.

    make smoke-tls-browser           # installs chromium, builds, runs this
    .venv/bin/python smoke/tls_browser.py [--chromium PATH]

Exits 0 when it all holds, 1 otherwise. Every wait is bounded; the server
and the browser are stopped on the way out. Reuses chat_browser.py's
DevTools client.
"""

import argparse
import asyncio
import base64
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import chat_browser  # noqa: E402
from chat_browser import CDP, start_browser, stop  # noqa: E402
from tlsfix import Certs, TLSServer, client_context, get  # noqa: E402

PAGE = """<!doctype html>
<title>m0serve over TLS</title>
<ul id="log"></ul>
<script>
const log = (what) => { const li = document.createElement('li'); li.textContent = what;
                        document.getElementById('log').appendChild(li); };
window.seen = {sse: [], hold: [], asgi: [], open: 0};
const es = new EventSource('/events?channel=news');
es.onopen = () => { window.seen.open++; log('sse open'); };
es.onmessage = (e) => { window.seen.sse.push(e.data); log('sse ' + e.data); };
const hold = new WebSocket('wss://' + location.host + '/ws?channel=news');
hold.onopen = () => { window.seen.open++; log('hold open'); };
hold.onmessage = (e) => { window.seen.hold.push(e.data); log('hold ' + e.data); };
const asgi = new WebSocket('wss://' + location.host + '/a/ws');
asgi.onopen = () => { window.seen.open++; log('asgi open'); };
asgi.onmessage = (e) => {
  window.seen.asgi.push(e.data); log('asgi ' + e.data);
  if (window.seen.asgi.length === 1) asgi.send('echo over wss');
};
</script>
"""


def spki_hash(cert):
    """base64(SHA-256(SubjectPublicKeyInfo)) of the PEM certificate cert."""
    pub = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-pubkey"], capture_output=True,
                         check=True, timeout=20).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub, capture_output=True,
                         check=True, timeout=20).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


async def drive(browser_ws, server):
    async with websockets.connect(browser_ws, max_size=None, open_timeout=10) as ws:
        cdp = CDP(ws)
        page = await cdp.open("https://localhost:%d/p/page.html" % server.port)
        await cdp.until(page, "window.seen && window.seen.open === 3", 20,
                        "the EventSource and both WebSockets did not open over TLS")
        q = urllib.parse.urlencode({"channel": "news", "data": "published over tls"})
        status, _, _ = get(server.port, client_context(server.certs), "/publish?" + q)
        assert status == 200
        await cdp.until(page, "window.seen.sse.includes('published over tls') && "
                              "window.seen.hold.includes('published over tls') && "
                              "window.seen.asgi.includes('echo over wss')", 15,
                        "the publish or the echo did not reach the page")
        seen = await cdp.js(page, "JSON.stringify({proto: location.protocol, seen: window.seen})")
        proto = await cdp.js(page, "location.protocol")
        first = await cdp.js(page, "window.seen.asgi[0]")
        return proto == "https:" and '"scheme": "wss"' in first, seen


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    a = ap.parse_args()
    if not os.access(a.chromium, os.X_OK):
        raise SystemExit("no chromium at %s (make smoke-tls-browser installs it)" % a.chromium)
    tmp = Path(tempfile.mkdtemp(prefix="m0tls."))
    certs = Certs(tmp / "certs")
    site = tmp / "site"
    site.mkdir()
    (site / "page.html").write_text(PAGE)
    chat_browser.CHROMIUM_FLAGS = [*chat_browser.CHROMIUM_FLAGS,
                                   "--ignore-certificate-errors-spki-list=" + spki_hash(certs.cert)]
    server = browser = None
    ok, seen = False, None
    try:
        server = TLSServer(certs, "tls_app:application", "--realtime", "--mount", "/a=tls_app:asgi_app",
                           "--static", "/p=%s" % site).start()
        browser, browser_ws = start_browser(a.chromium, str(tmp / "profile"))
        ok, seen = asyncio.run(asyncio.wait_for(drive(browser_ws, server), 90))
    finally:
        stop(browser)
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print("tls_browser: EventSource and WebSockets over https/wss saw %s -> %s" % (seen, "ok" if ok else "FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
