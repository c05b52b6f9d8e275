"""WSGI entry point: ``m0serve rtsite.wsgi:application --realtime``."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rtsite.settings")
application = get_wsgi_application()
