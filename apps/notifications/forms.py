"""The form of the notifications page (the page works without JavaScript: the switches post here)."""
from django import forms


class ProjectNotificationsForm(forms.Form):
    account = forms.CharField(max_length=64)
    waste = forms.BooleanField(required=False)
    straggler = forms.BooleanField(required=False)


class JobEndForm(forms.Form):
    """The user's own switch: a summary mail when one of their jobs ends (``kind=job_end`` tells the page's post)."""

    kind = forms.CharField()
    job_end = forms.BooleanField(required=False)
