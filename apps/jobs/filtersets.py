"""One filter set for the job list page and GET /api/v1/jobs/."""
import django_filters

from apps.core.job_columns import job_columns
from apps.core.ordering import NullsLastOrderingFilter

from .models import Job, JobStateChoices

# field -> the ``ordering`` parameter's key (the job list's column names)
ORDERING = [
    ("submit_time", "submitted"), ("start_time", "started"), ("end_time", "ended"), ("job_id", "job"),
    ("node_count", "nodes"), ("state", "state"), ("user_name", "user"), ("account", "account"), ("name", "name"),
    ("partition", "partition"),
]


def registered_ordering() -> list[tuple[str, str]]:
    """Sort keys of the columns higher apps add to the job list (apps.core.job_columns), e.g. saturation."""
    return [(column.order_by, column.key) for column in job_columns() if column.order_by]


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
    ordering = NullsLastOrderingFilter(fields=ORDERING, more_fields=registered_ordering, tie_break=["-job_id"],
                                       label="Sort by (submitted, started, ended, job, nodes, state, user, ...; '-' for descending)")

    class Meta:
        model = Job
        fields = []

    def filter_node(self, queryset, name, value):
        hostname = value.strip()
        if not hostname or "," in hostname:
            return queryset.none()
        return queryset.filter(node_search__contains=f",{hostname},")
