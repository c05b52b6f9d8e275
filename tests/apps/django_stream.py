"""A one-module Django project for the streaming tests (issue 8).

  /gated?gate=P        StreamingHttpResponse: "b1", then "b2" once the file P2 exists
  /db-threads?n=N      StreamingHttpResponse: N blocks, each runs a query on the
                       database connection the view opened (Django refuses a
                       connection used from another thread) and yields the
                       thread's ident
  /page                an ordinary HttpResponse (Content-Length, via CommonMiddleware)
"""

import os
import threading
import time

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="streaming-tests",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    USE_TZ=True,
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import connections  # noqa: E402
from django.http import HttpResponse, StreamingHttpResponse  # noqa: E402
from django.urls import path  # noqa: E402


def _wait_for(p, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(p):
        if time.monotonic() > deadline:
            raise TimeoutError(p)
        time.sleep(0.005)


def gated(request):
    gate = request.GET["gate"]

    def body():
        yield b"b1"
        _wait_for(gate + "2")
        yield b"b2"
    return StreamingHttpResponse(body(), content_type="text/plain")


def db_threads(request):
    conn = connections["default"]       # this thread's connection
    n = int(request.GET.get("n", "20"))

    def body():
        for _ in range(n):
            with conn.cursor() as cur:  # DatabaseError if another thread runs this
                cur.execute("SELECT 1")
                cur.fetchone()
            time.sleep(0.01)
            yield (b"%d" % threading.get_ident()).ljust(65535) + b"\n"   # a block per hand-over
    return StreamingHttpResponse(body(), content_type="text/plain")


def page(request):
    return HttpResponse(b"a page", content_type="text/plain")


urlpatterns = [path("gated", gated), path("db-threads", db_threads), path("page", page)]
application = get_wsgi_application()
