"""Forms of the example site."""

from django import forms


class NameForm(forms.Form):
    name = forms.CharField(max_length=50)
