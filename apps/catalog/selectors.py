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
