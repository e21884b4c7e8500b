"""Reads of the catalog app. Products, their checks and incidents are visible to every signed-in user:
they describe the machine's data, not anyone's jobs (reading the data itself keeps its own rules)."""
from django.db.models import Count, Q, QuerySet

from .models import CheckRun, DataProduct, Incident

STATES = ("fresh", "aging", "stale", "unknown")


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
