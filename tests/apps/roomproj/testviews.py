"""What the smoke needs around the docs' pages: a login (a test's stand-in
for a login form: /login?user=NAME logs NAME in, creating the user) and a
view that publishes (/say?channel=C&data=D answers the event's id)."""
from django.contrib.auth import get_user_model, login as auth_login
from django.http import HttpResponse, JsonResponse
import m0pub


def login(request):
    name = request.GET.get("user")
    if not name:
        return HttpResponse("log in with /login?user=NAME\n", status=401, content_type="text/plain")
    user, _ = get_user_model().objects.get_or_create(username=name)
    auth_login(request, user)
    return JsonResponse({"id": user.id})


def say(request):
    return HttpResponse(str(m0pub.publish(request.GET["channel"], request.GET["data"])),
                        content_type="text/plain")
