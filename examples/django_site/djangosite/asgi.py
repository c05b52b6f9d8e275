"""ASGI entry point: ``m0serve djangosite.asgi:application --protocol asgi``."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djangosite.settings")

application = get_asgi_application()
