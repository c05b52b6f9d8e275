# docs/realtime.md, "A page that renders what it missed, then subscribes": views.py
from django.shortcuts import render
from m0serve.django import hold_stream_response
import m0pub

def room(request, n):
    h = m0pub.history("room.%d" % n, limit=50)          # the newest 50
    last = h["events"][-1]["id"] if h["events"] else 0
    # The messages: what es.onmessage shows. Named events (join/leave with
    # --presence-events) are in the history too; the stream resumes after them all.
    messages = [e for e in h["events"] if e["event"] in (None, "message")]
    return render(request, "room.html", {"events": messages, "last": last, "n": n,
                                         "gap": not h["complete"]})

def room_events(request, n):
    # The stream starts after the last event the page rendered: what was published
    # in between comes from the journal first. A reconnect's Last-Event-ID wins.
    since = int(request.GET.get("since", "0")) or None
    return hold_stream_response("room.%d" % n, presence=str(request.user.id), last_event_id=since)
