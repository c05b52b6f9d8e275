"""An ASGI app behind m0serve's GRIP (tests/e2e/test_grip.py): /echo answers
the request headers it got as JSON; /st holds a GRIP stream on channel
"ast" (its body the stream's first bytes); /lp holds a long-poll on "alp"
(answered by its timeout with "timeout body"). ?ch=NAME holds another
channel, ?prev=ID adds its prev-id (and the Grip-Link rel=next it needs)."""
import json
from urllib.parse import parse_qs


def _channel(scope, default):
    q = parse_qs(scope.get("query_string", b"").decode())
    channel = q.get("ch", [default])[0]
    if "prev" in q:
        channel += "; prev-id=%s" % q["prev"][0]
    return channel.encode()


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    if scope["path"] == "/st":
        headers = [(b"content-type", b"text/plain"), (b"grip-hold", b"stream"),
                   (b"grip-channel", _channel(scope, "ast"))]
        if b"prev=" in scope.get("query_string", b""):
            headers.append((b"grip-link", b"</st?" + scope["query_string"] + b">; rel=next"))   # recovery
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"asgi head\n"})
        return
    if scope["path"] == "/lp":
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain"), (b"grip-hold", b"response"),
                                (b"grip-channel", _channel(scope, "alp")), (b"grip-timeout", b"20")]})
        await send({"type": "http.response.body", "body": b"timeout body\n"})
        return
    headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in scope["headers"]]
    body = json.dumps(headers).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})
