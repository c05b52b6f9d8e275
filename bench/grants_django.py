"""A one-module Django project for bench/grants.sh (issue 18): the view path
a grant replaces, and a call counter.

  /events    a Django view that decides the hold: HttpResponse with
             M0-Hold: stream and M0-Channel: news, through the middleware a
             new project without a database keeps (the request a grant
             subscribe skips)
  /publish?n=N  publish N events on "news"; answers the last id
  /calls     the number of Python calls so far (this one excluded)
  /          "ok" (readiness probe; not counted)
"""

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="m0serve-bench-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=[],
    DATABASES={},
    MIDDLEWARE=[
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    ],
    USE_I18N=False,
    USE_TZ=True,
)
django.setup()

from django.core.wsgi import get_wsgi_application  # noqa: E402  (after setup)
from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402

import m0pub  # noqa: E402

CALLS = [0]


def events(request):
    CALLS[0] += 1
    resp = HttpResponse(b": hi\n\n", content_type="text/event-stream")
    resp["M0-Hold"] = "stream"
    resp["M0-Channel"] = "news"
    return resp


def publish(request):
    CALLS[0] += 1
    last = 0
    for i in range(int(request.GET.get("n", "1"))):
        last = m0pub.publish("news", '{"i": %d}' % i)
    return HttpResponse(str(last), content_type="text/plain")


def calls(request):
    return HttpResponse(str(CALLS[0]), content_type="text/plain")


def ok(request):
    return HttpResponse(b"ok", content_type="text/plain")


urlpatterns = [path("events", events), path("publish", publish), path("calls", calls), path("", ok)]

application = get_wsgi_application()
