# docs/realtime.md, 'A "who\'s here" list': views.py
from django.shortcuts import render
from m0serve.django import grant_url
import m0pub

def here(request, n):
    channel = "room.%d" % n
    # The channel's newest id first, then who is here: the stream resumes after that
    # id, so a join or leave between this render and the page's subscription still
    # reaches the page (a join already in the list is skipped below).
    last = m0pub.channel_info(channel)["last_id"] or 0
    return render(request, "here.html", {
        "here": sorted(m0pub.presence(channel)),                 # the subs: user ids here
        "url": grant_url([channel], request=request, sub=str(request.user.id))
               + "&last_event_id=%d" % last,
    })
