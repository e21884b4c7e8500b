"""Reads of the catalog app. Products, their checks and incidents are visible to every signed-in user:
they describe the machine's data, not anyone's jobs (reading the data itself keeps its own rules). Where a
product's members are jobs, what a check measured names only the jobs the reader may see (``measured_for``):
staff all, others their own and their projects' jobs; the counts stay whole."""
from django.db.models import Count, Q, QuerySet

from . import quality
from .choices import DataProductStateChoices
from .models import CheckRun, DataProduct, Incident

STATES = tuple(DataProductStateChoices.values)  # fresh, aging, stale, unknown


def products(*, q: str = "", domain: str = "", owner: str = "", state: str = "") -> QuerySet[DataProduct]:
    queryset = DataProduct.objects.annotate(open_incidents=Count("incidents", filter=Q(incidents__closed__isnull=True)))
    for word in q.lower().split()[:8]:
        queryset = queryset.filter(search_text__contains=word)
    if domain:
        queryset = queryset.filter(domain=domain)
    if owner:
        queryset = queryset.filter(owner_team=owner)
    if state in STATES:
        queryset = queryset.filter(state=state)
    return queryset.order_by("domain", "name")


def facets() -> dict:
    return {"domains": sorted(set(DataProduct.objects.values_list("domain", flat=True))),
            "owners": sorted(set(DataProduct.objects.values_list("owner_team", flat=True))), "states": STATES}


def product_get(name: str) -> DataProduct | None:
    return DataProduct.objects.filter(name=name).first()


def latest_checks(product: DataProduct) -> dict[str, CheckRun]:
    """The last run of each check kind."""
    out: dict[str, CheckRun] = {}
    for run in CheckRun.objects.filter(product=product).order_by("-ran", "-id")[:40]:
        out.setdefault(run.kind, run)
    order = ("freshness", "coverage", "gaps", "drift")
    return {kind: out[kind] for kind in sorted(out, key=lambda k: order.index(k) if k in order else len(order))}


def check_history(product: DataProduct, *, kind: str = "", limit: int = 100) -> QuerySet[CheckRun]:
    queryset = CheckRun.objects.filter(product=product)
    if kind:
        queryset = queryset.filter(kind=kind)
    return queryset.order_by("-ran", "-id")[:limit]


def incidents(product: DataProduct) -> QuerySet[Incident]:
    return Incident.objects.filter(product=product).order_by("-opened", "-id")


def visible_job_members(user, members: set[str]) -> set[str]:
    """The ``cluster/job_id`` members among ``members`` that ``user`` may see (apps.jobs' access rule)."""
    from apps.jobs.selectors import job_list_for_user

    ids = {int(job_id) for _, sep, job_id in (member.partition("/") for member in members) if sep and job_id.isascii() and job_id.isdigit()}
    if not ids:
        return set()
    rows = job_list_for_user(user).filter(job_id__in=ids).values_list("cluster__name", "job_id")
    return {f"{cluster}/{job_id}" for cluster, job_id in rows} & members


def measured_for(user, product: DataProduct, run: CheckRun) -> dict:
    """What ``run`` measured, as ``user`` may read it: member lists of a product whose members are jobs keep only
    the jobs ``user`` may see (staff: all)."""
    if getattr(user, "is_staff", False) or not quality.members_are_jobs(product.definition):
        return run.measured
    members = quality.listed_members(run.kind, run.measured)
    return quality.redact_members(run.kind, run.measured, visible_job_members(user, members) if members else set())


# ---------------------------------------------------------------------------------------------
# "Run it": the sample query as the reader may run it


def latest_job_for(user, product: DataProduct):
    """The reader's latest job that fits the product (staff: the machine's latest), as ``cluster/id``, or None:
    for a model source whose members are jobs, the newest row among the jobs the reader may see; for
    telemetry, the latest job that started on nodes."""
    from django.apps import apps as django_apps

    from apps.jobs.selectors import job_list_for_user

    jobs = job_list_for_user(user)
    source = product.definition["source"]
    members = source.get("member_field")
    if source["kind"] == "model" and isinstance(members, list) and members and str(members[0]).startswith("job__"):
        try:
            model = django_apps.get_model(source["model"])
        except LookupError:
            return None
        row = (model.objects.filter(job__in=jobs).order_by(f"-{source['time_field']}")
               .values_list("job__cluster__name", "job__job_id").first())
        return f"{row[0]}/{row[1]}" if row else None
    started = jobs.exclude(start_time__isnull=True).exclude(state="PENDING").order_by("-start_time", "-pk")[:50]
    job = next((job for job in started if job.node_list), None)
    return f"{job.cluster.name}/{job.job_id}" if job else None


def sample_query_for(user, product: DataProduct, now=None):
    """The product's sample query as ``user`` runs it (``queries.SampleQuery``): staff the declared one, everyone
    else its ``job_api`` form on their latest job; ``{job}`` resolved to the reader's latest fitting job."""
    from django.utils import timezone

    from .queries import choose_query, needs_job, sample_query

    sample = product.definition.get("sample_query") or {}
    staff = bool(getattr(user, "is_staff", False))
    job = latest_job_for(user, product) if needs_job(choose_query(sample, staff=staff)) else None
    return sample_query(sample, staff=staff, now=now or timezone.now(), job=job)


# ---------------------------------------------------------------------------------------------
# Incidents across products


def visible_products(user) -> QuerySet[DataProduct]:
    """The products ``user`` may see: every product for a signed-in person (the catalogue describes the machine's
    data); nothing for anyone else. Incidents follow their product."""
    if not getattr(user, "is_authenticated", False):
        return DataProduct.objects.none()
    return DataProduct.objects.all()


INCIDENT_STATES = ("active", "open", "acknowledged", "resolved", "all")


def incident_list(user, *, state: str = "active", product: str = "", assignee: str = "") -> QuerySet[Incident]:
    """Incidents of the products ``user`` may see, newest first. ``state``: active (open or acknowledged), open
    (nobody acknowledged it yet), acknowledged, resolved, all; ``assignee``: a username, or "none"."""
    queryset = (Incident.objects.filter(product__in=visible_products(user))
                .select_related("product", "assignee", "acknowledged_by", "resolved_by").order_by("-opened", "-id"))
    if state == "active":
        queryset = queryset.filter(closed__isnull=True)
    elif state == "open":
        queryset = queryset.filter(closed__isnull=True, acknowledged__isnull=True)
    elif state == "acknowledged":
        queryset = queryset.filter(closed__isnull=True, acknowledged__isnull=False)
    elif state == "resolved":
        queryset = queryset.filter(closed__isnull=False)
    if product:
        queryset = queryset.filter(product__name=product)
    if assignee == "none":
        queryset = queryset.filter(assignee__isnull=True)
    elif assignee:
        queryset = queryset.filter(assignee__username=assignee)
    return queryset


def incident_get(user, pk: int) -> Incident | None:
    return incident_list(user, state="all").filter(pk=pk).first()


def waiting_incidents() -> int:
    """Open incidents nobody acknowledged yet: the staff page's "what waits" count."""
    return Incident.objects.filter(closed__isnull=True, acknowledged__isnull=True).count()


def assignable_staff():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(is_staff=True, is_active=True).order_by("username")


def subscribed_products(user) -> set[str]:
    from .models import IncidentSubscription

    if not getattr(user, "is_authenticated", False):
        return set()
    return set(IncidentSubscription.objects.filter(user=user).values_list("product__name", flat=True))
