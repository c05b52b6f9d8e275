"""WSGI entry point: ``m0serve djangosite.wsgi:application --app-dir examples/django_site``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "djangosite.settings")

application = get_wsgi_application()
