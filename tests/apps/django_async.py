"""A one-module Django project served through Django's ASGIHandler (issue 9).

  /async    an async view
  /sync     a sync view (Django runs it through sync_to_async)
"""

import asyncio

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="asgi-tests",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    DATABASES={},
    USE_TZ=True,
)
django.setup()

from django.core.asgi import get_asgi_application  # noqa: E402
from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402


async def async_view(request):
    await asyncio.sleep(0.01)
    return JsonResponse({"async": True, "path": request.path, "script_name": request.META.get("SCRIPT_NAME", "")})


def sync_view(request):
    return HttpResponse(b"sync", content_type="text/plain")


urlpatterns = [path("async", async_view), path("sync", sync_view)]
application = get_asgi_application()
