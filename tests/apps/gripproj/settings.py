"""A django-eventstream project as its documentation sets one up, behind a
GRIP proxy (m0serve --grip-key-file): GripMiddleware first, GRIP_URL at the
proxy's control port with the shared key, the model storage for
Last-Event-ID. The tests give GRIP_URL and the database in the environment."""
import os

SECRET_KEY = "gripproj-test-secret-key-not-for-production-0000"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "django_eventstream"]
MIDDLEWARE = ["django_grip.GripMiddleware"]
ROOT_URLCONF = "gripproj.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["GRIPPROJ_DB"],
                         "OPTIONS": {"timeout": 20}}}
GRIP_URL = os.environ["GRIPPROJ_GRIP_URL"]
EVENTSTREAM_STORAGE_CLASS = "django_eventstream.storage.DjangoModelStorage"
USE_TZ = True
