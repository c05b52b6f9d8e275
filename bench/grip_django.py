"""A one-module django-eventstream project for bench/grip.sh (issue 19),
set up as its documentation does, run four ways: behind m0serve's GRIP
(--grip-key-file/--grip-control), behind Pushpin, and alone (no GRIP) under
gunicorn threads and under uvicorn.

  /events/   django-eventstream's events view, channel "bench"
  /publish?seq=K  send_event("bench", "message", {"t": now, "seq": K}):
             the publish time bench/hold_client.c measures delivery from
  /          "ok" (readiness probe)

Environment: GRIPBENCH_GRIP_URL (the GRIP proxy's control URL with the key;
unset: no GRIP, django-eventstream streams by itself), GRIPBENCH_DB (the
sqlite file for the auth tables django-eventstream imports).
"""

import os
import time

import django
from django.conf import settings

GRIP_URL = os.environ.get("GRIPBENCH_GRIP_URL")
settings.configure(
    DEBUG=False,
    SECRET_KEY="m0serve-bench-not-secret-0123456789abcdef",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_eventstream"],
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                           "NAME": os.environ.get("GRIPBENCH_DB", ":memory:")}},
    MIDDLEWARE=["django_grip.GripMiddleware"] if GRIP_URL else [],
    USE_I18N=False,
    USE_TZ=True,
    **({"GRIP_URL": GRIP_URL} if GRIP_URL else {}),
)
django.setup()

import django_eventstream  # noqa: E402  (after setup)
from django.http import HttpResponse  # noqa: E402
from django.urls import include, path  # noqa: E402
from django_eventstream import send_event  # noqa: E402


def publish(request):
    seq = int(request.GET.get("seq", "0"))
    send_event("bench", "message", {"t": time.time(), "seq": seq}, async_publish=False)
    return HttpResponse(b"sent\n", content_type="text/plain")


def ok(request):
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [
    path("events/", include(django_eventstream.urls), {"channels": ["bench"]}),
    path("publish", publish),
    path("", ok),
]

if os.environ.get("GRIPBENCH_ASGI"):
    from django.core.asgi import get_asgi_application

    application = get_asgi_application()
else:
    from django.core.wsgi import get_wsgi_application

    application = get_wsgi_application()
