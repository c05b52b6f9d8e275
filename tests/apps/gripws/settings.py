"""A Django project set up as django-grip's README sets one up behind a GRIP
proxy with WebSocket-over-HTTP: GripMiddleware first, GRIP_URL at the
proxy's control port with the shared key. Here the proxy is m0serve
(--grip-key-file, --grip-control, --ws-over-http); the tests give GRIP_URL
in the environment, and GRIPWS_LOG a file the views note their events in."""
import os

SECRET_KEY = "gripws-test-secret-key-not-for-production-0000"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = []
MIDDLEWARE = ["django_grip.GripMiddleware"]
ROOT_URLCONF = "gripws.urls"
DATABASES = {}
GRIP_URL = os.environ["GRIPWS_GRIP_URL"]
USE_TZ = True
