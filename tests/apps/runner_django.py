"""A one-module Django project behind Django's ASGIHandler, for the runner
tests (tests/e2e/test_runners.py).

  /stream        StreamingHttpResponse over an async generator: 64 KiB
                 blocks, one every 10 ms, for up to 30 s (the client leaves)
  /mark?text=T   writes "runner: T" to stderr, answers "ok"
"""

import asyncio
import sys

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="runner-tests",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=[],
    DATABASES={},
    USE_TZ=True,
)
django.setup()

from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import HttpResponse, StreamingHttpResponse  # noqa: E402
from django.urls import path  # noqa: E402


async def _blocks():
    for _ in range(3000):
        yield b"x" * 65536
        await asyncio.sleep(0.01)


async def stream(request):
    return StreamingHttpResponse(_blocks(), content_type="application/octet-stream")


def mark(request):
    print("runner: %s" % request.GET["text"], file=sys.stderr, flush=True)
    return HttpResponse("ok")


urlpatterns = [path("stream", stream), path("mark", mark)]
application = get_asgi_application()
