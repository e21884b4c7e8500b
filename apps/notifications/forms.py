"""The form of the notifications page (the page works without JavaScript: the switches post here)."""
from django import forms


class ProjectNotificationsForm(forms.Form):
    account = forms.CharField(max_length=64)
    waste = forms.BooleanField(required=False)
    straggler = forms.BooleanField(required=False)
