from django.urls import path

from . import views

urlpatterns = [
    path("ws/echo/", views.echo),
    path("ws/broadcast/", views.broadcast),
    path("ws/chat/<str:room>/", views.chat),
    path("ws/chat/<str:room>/say/", views.say),
    path("ws/closer/", views.closer),
    path("ws/notes/", views.notes),
    path("ws/meta/", views.meta),
    path("ws/refuse/", views.refuse),
    path("ws/noaccept/", views.noaccept),
    path("ws/detach/", views.detach),
    path("ws/keepalive/", views.keepalive),
    path("ws/bin/", views.binary),
    path("page/", views.page),
    path("plain/", views.plain),
    path("events/", views.events),
    path("next/", views.next_link),
]
