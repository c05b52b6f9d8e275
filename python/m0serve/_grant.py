"""What the framework helpers' grant_url share (see m0pub.grant_url)."""


def absolute(scheme, netloc, path, ws):
    """scheme://netloc/path, with ws:// or wss:// for a WebSocket. The grant
    path is the server's (answered before any mount), so no script name or
    root_path goes before it."""
    if ws:
        scheme = "wss" if scheme in ("https", "wss") else "ws"
    return "%s://%s%s" % (scheme, netloc, path)
