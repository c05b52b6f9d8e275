"""WSGI entry point: ``m0serve hybridsite`` finds ``hybridsite.wsgi:application``."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hybridsite.settings")
application = get_wsgi_application()
