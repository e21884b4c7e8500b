from django import forms

from apps.accounts.selectors import project_list_for_user

from .models import edf_name_validator
from .vocabulary import MAX_EDF_CHARS


class EdfSaveForm(forms.Form):
    """Save from the editor page: the name is fixed once the EDF exists."""

    name = forms.CharField(max_length=64, validators=[edf_name_validator],
                           help_text="srun --environment=NAME finds it as ~/.edf/NAME.toml.")
    description = forms.CharField(max_length=500, required=False)
    note = forms.CharField(max_length=200, required=False, label="What changed")
    text = forms.CharField(max_length=MAX_EDF_CHARS, required=False, strip=False, widget=forms.Textarea)
    shared_with = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                            label="Share with projects")

    def __init__(self, *args, user, fixed_name: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["shared_with"].choices = [(p.slurm_account, f"{p.slurm_account} — {p.title}")
                                              for p in project_list_for_user(user).filter(memberships__user=user)]
        if fixed_name:
            self.fields["name"].disabled = True
            self.fields["name"].initial = fixed_name

    def clean_name(self):
        name = self.cleaned_data["name"]
        if name.endswith(".toml"):
            raise forms.ValidationError("Leave out '.toml': srun --environment=NAME adds it.")
        return name


# The largest number a version column can hold (a PostgreSQL integer is smaller than what a URL can say).
MAX_VERSION = 2**31 - 1


class VersionsForm(forms.Form):
    """``?from=`` and ``?to=`` of the history page and ``?version=`` of a download: version numbers or nothing."""

    version = forms.IntegerField(min_value=1, max_value=MAX_VERSION, required=False)
    to = forms.IntegerField(min_value=1, max_value=MAX_VERSION, required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["from"] = forms.IntegerField(min_value=1, max_value=MAX_VERSION, required=False)

    def problems(self) -> list[str]:
        return [f"{field}: {' '.join(errors)}" for field, errors in self.errors.items()]
