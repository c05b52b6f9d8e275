"""FastAPI (and Starlette) helpers for m0serve's signed stream grants.

    from fastapi import FastAPI, Request
    from m0serve.fastapi import grant_url

    @app.get("/subscribe")
    def subscribe(request: Request, user=Depends(current_user)):
        return {"url": grant_url(["news", f"user_{user.id}"], request=request, sub=str(user.id))}

Under ``m0serve --grant-path /rt --grant-key-file keys`` the page opens
``new EventSource(url)`` (or ``new WebSocket(url)`` with ws=True) and the
server verifies the grant and holds the stream in C, with no Python call.
Nothing here imports FastAPI or Starlette: any object with Starlette's
``request.url`` will do.
"""

import m0pub
from m0serve._grant import absolute

__all__ = ["grant_url"]


def grant_url(channels, request=None, ws=False, **kwargs):
    """The URL of a granted stream on channels: ``PREFIX/sse?token=GRANT``
    (``PREFIX/ws?token=...`` with ws=True), GRANT from m0pub.grant(channels,
    **kwargs) (ttl, sub, kid, key_file, prefix). With request (a Starlette
    or FastAPI Request) the URL is absolute on its scheme and host -- not
    under the app's root_path: the grant path is the server's; without, a
    path the page resolves. Safe to call from a coroutine: it reads the key
    file only when it changed (a stat otherwise)."""
    path = m0pub.grant_url(channels, ws=ws, **kwargs)
    if request is None:
        return path
    return absolute(request.url.scheme, request.url.netloc, path, ws)
