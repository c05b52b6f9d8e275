"""Settings for the m0serve Django example.

No database and no migrations: the only installed app is ``pages``, and the
CSRF middleware keeps its secret in a cookie.  Environment knobs:

  DJANGO_DEBUG=1        turn DEBUG on (default off)
  DJANGO_SECRET_KEY     the signing key (a fixed development key otherwise)
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "m0serve-example-insecure-development-key")
DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = ["pages"]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "djangosite.urls"
WSGI_APPLICATION = "djangosite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    },
]

DATABASES = {}

USE_I18N = False
USE_TZ = True
TIME_ZONE = "UTC"
