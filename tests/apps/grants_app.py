"""The app behind tests/e2e/test_grants.py (issue 18): it counts its own
calls, so a test can show a grant subscribe runs no Python.

  /calls                       the number of calls so far (this one excluded)
  /publish?channel=C&data=D    publish D on C; answers the id ("7")
  /hold?channel=a,b            a view hold on the M0-Channel list "a,b"
  /inbound                     a granted socket's message (--grant-inbound):
                               answers "SUB|CHANNELS|BODY", and "|saw NAMES"
                               when it got a query or an Authorization
                               header (the grant's token must not reach it)
  /url                         m0pub.grant_url(["news", "chat"], sub="alice")
  /page?src=URL                a page whose EventSource (withCredentials)
                               opens URL and lists what it receives
                               (smoke/grants_browser.py)
Anything else: 200 "ok". Every call but /calls and / (the test harness's
readiness probe) is counted.
"""

from urllib.parse import parse_qs

import m0pub

CALLS = [0]

PAGE = """<!doctype html><title>grant</title><p id="state">connecting</p><ul id="log"></ul>
<script>
const src = new URLSearchParams(location.search).get("src");
const es = new EventSource(src, {withCredentials: true});
es.onopen = () => { document.getElementById("state").textContent = "open"; };
es.onerror = () => { document.getElementById("state").textContent = "error " + es.readyState; };
es.onmessage = (e) => {
  const li = document.createElement("li");
  li.textContent = e.lastEventId + ":" + e.data;
  document.getElementById("log").appendChild(li);
};
</script>"""


def _q(environ):
    return {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def application(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/calls":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(CALLS[0]).encode()]
    if path != "/":
        CALLS[0] += 1
    q = _q(environ)
    if path == "/publish":
        ident = m0pub.publish(q["channel"], q.get("data", "x"))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(ident).encode()]
    if path == "/hold":
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("M0-Hold", "stream"),
                                  ("M0-Channel", q.get("channel", "news"))])
        return [b": held\n\n"]
    if path == "/inbound":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        out = "%s|%s|%s" % (environ.get("HTTP_M0_GRANT_SUB", "-"), environ.get("HTTP_M0_GRANT_CHANNELS", "-"),
                            body.decode())
        seen = [k for k in ("QUERY_STRING", "HTTP_AUTHORIZATION") if environ.get(k)]
        if seen:
            out += "|saw " + ",".join(seen)
        start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
        return [out.encode()]
    if path == "/page":
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8")])
        return [PAGE.encode()]
    if path == "/url":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [m0pub.grant_url(["news", "chat"], sub="alice").encode()]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
