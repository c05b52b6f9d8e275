"""Routes of the Django site at the root mount."""
from django.urls import path, re_path

from hybridsite import views

urlpatterns = [
    path("", views.index, name="index"),
    path("paths/<str:name>/", views.paths, name="paths"),
    path("slow/", views.slow, name="slow"),
    path("publish/", views.publish, name="publish"),
    path("events/", views.events, name="events"),
    re_path(r"^(?P<rest>.*)$", views.anything, name="anything"),
]
