"""One filter set for the job list page and GET /api/v1/jobs/."""
import django_filters
from django.db.models import F

from .models import Job, JobStateChoices

SORTABLE = {
    "submitted": "submit_time", "started": "start_time", "ended": "end_time", "job": "job_id", "nodes": "node_count",
    "state": "state", "user": "user_name", "account": "account", "name": "name", "partition": "partition",
    "saturation": "saturation__score",
}


class JobFilterSet(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name", label="Cluster")
    user = django_filters.CharFilter(field_name="user_name", label="User")
    account = django_filters.CharFilter(field_name="account", label="Account")
    state = django_filters.MultipleChoiceFilter(choices=JobStateChoices.choices, label="State")
    partition = django_filters.CharFilter(field_name="partition", label="Partition")
    node = django_filters.CharFilter(method="filter_node", label="Node (hostname)")
    submitted_after = django_filters.IsoDateTimeFilter(field_name="submit_time", lookup_expr="gte", label="Submitted after")
    submitted_before = django_filters.IsoDateTimeFilter(field_name="submit_time", lookup_expr="lt", label="Submitted before")
    min_nodes = django_filters.NumberFilter(field_name="node_count", lookup_expr="gte", label="At least N nodes")
    max_nodes = django_filters.NumberFilter(field_name="node_count", lookup_expr="lte", label="At most N nodes")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", label="Name contains")
    ordering = django_filters.CharFilter(method="filter_ordering", label="Sort by (submitted, started, ended, job, nodes, state, user, ...; '-' for descending)")

    class Meta:
        model = Job
        fields = []

    def filter_node(self, queryset, name, value):
        hostname = value.strip()
        if not hostname or "," in hostname:
            return queryset.none()
        return queryset.filter(node_search__contains=f",{hostname},")

    def filter_ordering(self, queryset, name, value):
        descending = value.startswith("-")
        field = SORTABLE.get(value.lstrip("-"))
        if field is None:
            return queryset
        expression = F(field).desc(nulls_last=True) if descending else F(field).asc(nulls_last=True)
        return queryset.order_by(expression, "-job_id")
