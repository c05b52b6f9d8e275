"""Views of the example site: a template page, a CSRF-protected form, the pid."""

import os

from django.http import HttpResponse
from django.shortcuts import render

from .forms import NameForm


def index(request):
    context = {"greeting": "Hello from Django on m0serve", "pid": os.getpid()}
    return render(request, "index.html", context)


def form(request):
    if request.method == "POST":
        form = NameForm(request.POST)
        if form.is_valid():
            return render(request, "form.html", {"form": NameForm(), "name": form.cleaned_data["name"]})
        return render(request, "form.html", {"form": form}, status=400)
    return render(request, "form.html", {"form": NameForm()})


def pid(request):
    return HttpResponse(str(os.getpid()), content_type="text/plain")
