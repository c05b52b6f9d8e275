from django.urls import path

from rtsite import views

urlpatterns = [
    path("", views.index),
    path("events", views.events),
    path("publish", views.publish),
    path("pid", views.pid),
    path("client", views.client),
    path("slow", views.slow),
    path("chat", views.chat),
    path("ws/chat", views.ws_chat),
    path("ws/echo", views.ws_echo),
]
