"""URL routes of the example site."""

from django.urls import path

from pages import views

urlpatterns = [
    path("", views.index, name="index"),
    path("form", views.form, name="form"),
    path("pid", views.pid, name="pid"),
]
