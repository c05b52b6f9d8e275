"""The WhiteNoise peer of bench/static.sh: a minimal Django site that serves
its static files the way most Django deployments do without a proxy —
WhiteNoiseMiddleware first in MIDDLEWARE, STATIC_ROOT the collected files.

    gunicorn whitenoise_site:application               (WSGI)
    uvicorn  whitenoise_site:asgi_application          (ASGI: Django runs the
                                                        middleware in a thread)

STATIC_ROOT comes from $BENCH_STATIC_DIR; files are served under /static/.
"""
import os

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="bench-not-secret",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    INSTALLED_APPS=["django.contrib.staticfiles"],
    MIDDLEWARE=["whitenoise.middleware.WhiteNoiseMiddleware"],
    STATIC_URL="/static/",
    STATIC_ROOT=os.environ["BENCH_STATIC_DIR"],
    DATABASES={},
    USE_TZ=True,
    TIME_ZONE="UTC",
)
django.setup()

urlpatterns = []

from django.core.asgi import get_asgi_application  # noqa: E402  (after settings)
from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()
asgi_application = get_asgi_application()
