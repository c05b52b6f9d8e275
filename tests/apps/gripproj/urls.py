from django.urls import include, path

import django_eventstream

from . import views

urlpatterns = [
    path("events/", include(django_eventstream.urls), {"channels": ["test"]}),
    path("events2/", include(django_eventstream.urls), {"channels": ["test", "two"]}),
    path("send/", views.send),
    path("echo/", views.echo),
    path("lp/", views.longpoll),
    path("st/", views.stream),
    path("ws/", views.ws),
    path("sse/", views.sse),
    path("m0publish/", views.m0publish),
    path("page/", views.page),
    path("bad/", views.bad),
]
