"""One filter set for the history page /vetting/ and GET /api/v1/vetting/results/.

Every filter maps onto one of VettingResult's (column, time) indexes, newest first, so a filtered
page is an index range scan even with millions of results.
"""
import django_filters
from django import forms

from .choices import VettingResultKindChoices, VettingResultOutcomeChoices
from .models import VettingResult
from .records import BAD_OUTCOMES


BIGINT_MAX = 2**63 - 1


class WholeNumberFilter(django_filters.NumberFilter):
    """A whole number that fits the database's integer columns: "9e20" or "-2.4e209" is a clear 400, not an
    overflow deep in the database driver."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("min_value", 0)
        kwargs.setdefault("max_value", BIGINT_MAX)
        super().__init__(*args, **kwargs)


class VettingResultFilterSet(django_filters.FilterSet):
    node = django_filters.CharFilter(field_name="host", label="Node")
    group = WholeNumberFilter(field_name="group", label="Group")
    switch = django_filters.CharFilter(field_name="switch", label="Switch (group.index)")
    eval = django_filters.CharFilter(field_name="eval_name", label="Evaluation")
    kind = django_filters.ChoiceFilter(choices=VettingResultKindChoices.choices, label="Source")
    outcome = django_filters.ChoiceFilter(method="filter_outcome", choices=[("bad", "failed or critical"), *VettingResultOutcomeChoices.choices],
                                          label="Status")
    since = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="gte", label="Since")
    until = django_filters.IsoDateTimeFilter(field_name="time", lookup_expr="lt", label="Until")
    job = WholeNumberFilter(field_name="job_id_number", label="Job")
    user = django_filters.CharFilter(field_name="user_name", label="User")
    protocol = django_filters.CharFilter(field_name="run__protocol_name", label="Protocol")
    run = WholeNumberFilter(field_name="run_id", label="Run")

    class Meta:
        model = VettingResult
        fields = []

    def filter_outcome(self, queryset, name, value):
        if value == "bad":
            return queryset.filter(outcome__in=BAD_OUTCOMES)
        return queryset.filter(outcome=value)
