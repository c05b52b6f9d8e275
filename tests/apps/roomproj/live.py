# docs/realtime.md, "Expiry and refresh": views.py (ttl: ROOMPROJ_TTL, 600 as in the docs
# unless the smoke asks for a short grant)
import os

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from m0serve.django import grant_url

TTL = int(os.environ.get("ROOMPROJ_TTL", "600"))

def channels_of(user):
    return ["news", "user.%d" % user.id]

@login_required
def live(request):
    return render(request, "live.html", {"sse_url": grant_url(channels_of(request.user), request=request,
                                                              ttl=TTL, sub=str(request.user.id))})

@login_required
def live_grant(request):          # urls.py: path("live/grant", live_grant)
    return HttpResponse(grant_url(channels_of(request.user), request=request, ttl=TTL,
                                  sub=str(request.user.id)), content_type="text/plain")
