"""A one-module Django project with one hello view (bench/before_after.sh).

  /   HttpResponse("Hello, World!"), text/plain, through the middleware a
      new project without a database keeps (security, common, CSRF,
      clickjacking), the URL resolver and the WSGI handler

``application`` (WSGI) and ``asgi_application`` (ASGI, the same view run
by Django's ASGIHandler). No database, no templates: what is measured is
Django's request/response cycle, the part every view pays.
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

from django.core.asgi import get_asgi_application  # noqa: E402  (after setup)
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402

BODY = b"Hello, World!"


def hello(request):
    return HttpResponse(BODY, content_type="text/plain")


urlpatterns = [path("", hello)]

application = get_wsgi_application()
asgi_application = get_asgi_application()
