"""A small Django project whose pages are docs/realtime.md's page examples,
copied as the docs write them (smoke/room_browser.py drives them in headless
Chromium): the history page and the who's-here list of "Who is listening,
and what they missed", and the grant refresh of "Expiry and refresh".
Users log in with django.contrib.auth (sqlite at ROOMPROJ_DB; the smoke
migrates it first); /login?user=NAME is the test's stand-in for a login
form."""
import os
from pathlib import Path

SECRET_KEY = "roomproj-test-secret-key-not-for-production-0000"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions"]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "roomproj.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": os.environ.get("ROOMPROJ_DB", "/tmp/roomproj.sqlite3")}}
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates",
              "DIRS": [Path(__file__).resolve().parent / "templates"], "APP_DIRS": False}]
LOGIN_URL = "/login"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
