from django.urls import path

from rtsite import views

urlpatterns = [
    path("", views.index),
    path("events", views.events),
    path("publish", views.publish),
    path("pid", views.pid),
    path("client", views.client),
    path("slow", views.slow),
]
