"""Settings of the hybrid example's Django site (the root mount).

No database, no migrations. STATIC_URL names the --static mount, which the
server answers from the event loop: Django never sees those requests.
"""
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "m0serve-hybrid-example-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django.contrib.staticfiles"]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
ROOT_URLCONF = "hybridsite.urls"
WSGI_APPLICATION = "hybridsite.wsgi.application"
TEMPLATES = []
DATABASES = {}
USE_TZ = True
TIME_ZONE = "UTC"          # Django exports TIME_ZONE as TZ: keep log times in UTC
STATIC_URL = "/static/"
APPEND_SLASH = False
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
