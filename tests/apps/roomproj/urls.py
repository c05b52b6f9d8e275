from django.urls import path

from . import here, history, live, testviews

urlpatterns = [
    path("room/<int:n>", history.room),
    path("room/<int:n>/events", history.room_events),
    path("here/<int:n>", here.here),
    path("live", live.live),
    path("live/grant", live.live_grant),
    path("login", testviews.login),
    path("say", testviews.say),
]
