"""Reads of the catalog app. Products, their checks and incidents are visible to every signed-in user:
they describe the machine's data, not anyone's jobs (reading the data itself keeps its own rules). Where a
product's members are jobs, what a check measured names only the jobs the reader may see (``measured_for``):
staff all, others their own and their projects' jobs; the counts stay whole."""
from django.apps import apps as django_apps
from django.core.exceptions import FieldDoesNotExist
from django.db.models import CASCADE, Count, Q, QuerySet

from apps.telemetry.backends.base import TelemetryUnavailable
from apps.telemetry.retention import TIER_SECONDS, TIER_WORDS, TIERS
from apps.telemetry.store import telemetry_store

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
# Retention: how long a product is kept (issue 40)


def _days_words(days: float) -> str:
    days = float(days)
    if days % 365 == 0:
        return f"{int(days // 365)} year" + ("s" if days != 365 else "")
    return f"{days:g} day" + ("s" if days != 1 else "")


def _kept_with_job(source: dict) -> bool:
    """A model source whose rows belong to one job each and go with it (``job`` deleted in cascade)."""
    members = source.get("member_field")
    first = members if isinstance(members, str) else (members or [""])[0]
    if source.get("kind") != "model" or not str(first).startswith("job__"):
        return False
    try:
        field = django_apps.get_model(source["model"])._meta.get_field("job")
    except (LookupError, FieldDoesNotExist, KeyError, ValueError):
        return False
    return getattr(field.remote_field, "on_delete", None) is CASCADE


def product_retention(definition: dict, now=None) -> dict:
    """How long a product is kept, as its page and the API say it.

    * ``source.kind: telemetry`` — the samples live in the telemetry store, whose tiers decide (settings
      ``TELEMETRY_RETENTION_RAW_DAYS``, ``_1M_DAYS``, ``_10M_DAYS``; a product file may not declare its own
      ``retention``): ``tiers`` lists each tier with its resolution (raw: the product's sampling period, samples as
      sent; then 60 s and 600 s rollups), its days and ``since``, the oldest instant it still answers for (counted from
      the store's clock); ``seconds`` is the raw tier's; ``text`` "raw for 30 days, 1-min to 90 days, 10-min to 1 year".
    * any other source — the file's ``retention`` (``text`` "400 days"); a per-job model row without one is kept "as
      long as its job"; otherwise ``text`` is None (the file says nothing).

    Pages write "Kept: " before ``text``.

    Returns ``{"text", "seconds", "tiers", "store"}``; ``tiers`` and ``store`` are None outside the store."""
    source = definition.get("source") or {}
    declared = definition.get("retention")
    if source.get("kind") == "telemetry":
        alias = source.get("store") or "default"
        try:
            store = telemetry_store(alias)
        except TelemetryUnavailable as exc:
            return {"text": f"by the telemetry store {alias!r}, which cannot be read: {exc}", "seconds": None,
                    "tiers": None, "store": alias}
        retention = store.retention
        now = now or store.now()
        sampling = (definition.get("slo") or {}).get("sampling_period") or 0
        tiers = [{"tier": tier, "words": TIER_WORDS[tier],
                  "resolution_s": int(sampling) if tier == "raw" else TIER_SECONDS[tier],
                  "days": _number(retention.days(tier)), "kept": _days_words(retention.days(tier)),
                  "since": retention.horizon(tier, now)} for tier in TIERS]
        return {"text": retention.describe(), "seconds": int(retention.raw_days * 86400), "tiers": tiers, "store": alias}
    if declared:
        return {"text": _days_words(declared / 86400) if declared % 86400 == 0 else _seconds_words(declared),
                "seconds": declared, "tiers": None, "store": None}
    if _kept_with_job(source):
        return {"text": "as long as its job", "seconds": None, "tiers": None, "store": None}
    return {"text": None, "seconds": None, "tiers": None, "store": None}


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def _seconds_words(seconds: int) -> str:
    hours = seconds / 3600
    return f"{hours:g} hour" + ("s" if hours != 1 else "")


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
