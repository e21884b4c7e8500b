"""Read access to vetting history, node states, rules and recommendations.

Whether a node passed vetting is a fact about the machine: every logged-in user sees results and
node states. *Whose* job vetted it is not: the job id and user of a result are shown only to staff,
the job's user and members of its account (``job_visible``), and filtering by a job or user that
one may not see finds nothing. Rules and recommendations are read by all, changed by staff.

A job token (``JobTokenUser``) reads its own job's vetting only: the runs posted for its job, and the
results on its nodes while it ran that belong to no other job. Everything else does not exist for it.
"""
from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import TruncDate
from django.utils import timezone

from apps.accounts.selectors import slurm_accounts_for_user
from apps.jobs.authentication import JobTokenUser

from .choices import NodeHealthStateChoices, RuleSeverityChoices
from .models import NodeHealth, NodeHealthEvent, Recommendation, Rule, VettingResult, VettingRun
from .records import BAD_OUTCOMES


def _token_job(user):
    """The job a job token's stand-in user acts for, or None for people."""
    return user.job if isinstance(user, JobTokenUser) else None


def job_visibility(user) -> tuple[bool, str, set[str]]:
    """(staff?, username, Slurm accounts) of the viewer. A job token sees as its job's user, but only ever
    gets its own job's rows (``runs_for_user``, ``results_for_user``)."""
    if not getattr(user, "is_authenticated", False):
        return False, "", set()
    job = _token_job(user)
    if job is not None:
        return False, job.user_name, set()
    return bool(user.is_staff), user.get_username(), set(slurm_accounts_for_user(user))


def job_visible(viewer: tuple[bool, str, set[str]], user_name: str, account: str) -> bool:
    staff, me, accounts = viewer
    return staff or (bool(user_name) and user_name == me) or (bool(account) and account in accounts)


def _own_runs(job) -> Q:
    return Q(job=job) | Q(job__isnull=True, cluster_id=job.cluster_id, job_id_number=job.job_id)


def results_for_user(user) -> QuerySet[VettingResult]:
    """Every result for people (node health is a fact about the machine); for a job token, its job's results
    and those on its nodes during the job that name no other job."""
    job = _token_job(user)
    if job is None:
        return VettingResult.objects.all()
    own = Q(run__job=job) | Q(run__job__isnull=True, run__cluster_id=job.cluster_id, run__job_id_number=job.job_id)
    window = job.run_window(open_end=True)
    if window is None or not job.node_list:  # not started: no nodes yet
        return VettingResult.objects.filter(own)
    start, end = window
    during = Q(host__in=list(job.node_list), time__gte=start) & (
        Q(job_id_number__isnull=True) | Q(job_id_number=job.job_id, run__cluster_id=job.cluster_id))
    if end is not None:
        during &= Q(time__lte=end)
    return VettingResult.objects.filter(own | during)


def runs_for_user(user) -> QuerySet[VettingRun]:
    """Every run for people; for a job token, the runs posted for its job."""
    queryset = VettingRun.objects.select_related("cluster", "job")
    job = _token_job(user)
    return queryset if job is None else queryset.filter(_own_runs(job))


def restrict_private_filters(queryset: QuerySet, user, *, job=None, user_name=None) -> QuerySet:
    """Filtering by a job or a user the viewer may not see finds nothing (it would say whose job it was).
    A job token's rows are its own job's already (``results_for_user``, ``runs_for_user``)."""
    staff, me, accounts = job_visibility(user)
    if staff or _token_job(user) is not None:
        return queryset
    if user_name and user_name != me:
        return queryset.filter(Q(user_name=user_name) & Q(account__in=accounts))
    if job:
        return queryset.filter(Q(user_name=me) | Q(account__in=accounts))
    return queryset


def history_page(queryset: QuerySet[VettingResult], *, before=None, size: int = 100) -> tuple[list[VettingResult], bool]:
    """One page of results, newest first, after the (time, id) cursor ``before``; and whether more follow.
    Keyset, not offset: the thousandth page costs what the first does."""
    page = queryset.order_by("-time", "-id")
    if before is not None:
        moment, pk = before
        page = page.filter(Q(time__lt=moment) | Q(time=moment, id__lt=pk))
    rows = list(page[: size + 1])
    return rows[:size], len(rows) > size


def failure_rates(queryset: QuerySet[VettingResult]) -> list[dict]:
    """Per evaluation: results, failures (fail or critical), and the failure rate, worst first."""
    rows = (queryset.order_by().values("eval_name", "kind")
            .annotate(total=Count("id"), failed=Count("id", filter=Q(outcome__in=BAD_OUTCOMES))))
    out = [{**row, "rate": row["failed"] / row["total"] if row["total"] else 0.0} for row in rows]
    return sorted(out, key=lambda row: (-row["rate"], -row["failed"], row["eval_name"]))


def failures_by_node_and_day(queryset: QuerySet[VettingResult], *, top: int = 40) -> tuple[list[str], list, dict]:
    """The ``top`` nodes with the most failures, the days, and {(host, day): (failed, total)}."""
    bad = queryset.filter(outcome__in=BAD_OUTCOMES)
    hosts = [row["host"] for row in bad.order_by().values("host").annotate(n=Count("id")).order_by("-n", "host")[:top]]
    if not hosts:
        return [], [], {}
    rows = (queryset.filter(host__in=hosts).order_by().annotate(day=TruncDate("time")).values("host", "day")
            .annotate(total=Count("id"), failed=Count("id", filter=Q(outcome__in=BAD_OUTCOMES))))
    cells = {(row["host"], row["day"]): (row["failed"], row["total"]) for row in rows}
    days = sorted({day for _, day in cells})
    return hosts, days, cells


def node_states(hosts=None) -> dict[str, str]:
    """host -> health state, for the nodes that are not plainly healthy."""
    queryset = NodeHealth.objects.exclude(state=NodeHealthStateChoices.HEALTHY)
    if hosts is not None:
        queryset = queryset.filter(host__in=list(hosts))
    return dict(queryset.values_list("host", "state"))


def recent_outcomes(days: int = 7) -> dict[str, str]:
    """host -> 'failed' or 'passed' over the last ``days`` of vetting results (for the topology)."""
    since = timezone.now() - timedelta(days=days)
    rows = (VettingResult.objects.filter(time__gte=since).order_by().values("host")
            .annotate(failed=Count("id", filter=Q(outcome__in=BAD_OUTCOMES))))
    return {row["host"]: "failed" if row["failed"] else "passed" for row in rows}


TRIAGE_ORDER = {"drain_recommended": 0, "suspect": 1, "returned": 2, "drained": 3, "in_repair": 4}


def triage_nodes() -> list[NodeHealth]:
    """Nodes that need a look, those waiting for a decision first (drain recommended, then suspect;
    critical before warning; not yet acknowledged first; the longest waiting first), then the ones
    already taken out (drained, in repair)."""
    nodes = list(NodeHealth.objects.exclude(state=NodeHealthStateChoices.HEALTHY))
    return sorted(nodes, key=lambda n: (TRIAGE_ORDER.get(n.state, 9), n.severity != RuleSeverityChoices.CRITICAL, n.acknowledged_at is not None, n.since))


def repeat_offenders(days: int = 30, limit: int = 20) -> list[dict]:
    since = timezone.now() - timedelta(days=days)
    rows = (VettingResult.objects.filter(time__gte=since, outcome__in=BAD_OUTCOMES).order_by().values("host")
            .annotate(failures=Count("run_id", distinct=True), evals=Count("eval_name", distinct=True)).order_by("-failures", "host")[:limit])
    return [row for row in rows if row["failures"] >= 2]


def node_timeline(host: str, days: int = 90) -> tuple[list[VettingResult], list[NodeHealthEvent]]:
    since = timezone.now() - timedelta(days=days)
    results = list(VettingResult.objects.filter(host=host, time__gte=since).order_by("time", "id")[:20000])
    events = list(NodeHealthEvent.objects.filter(host=host).order_by("created"))
    return results, events


def open_recommendations() -> QuerySet[Recommendation]:
    return Recommendation.objects.filter(status__in=["open", "acknowledged"]).select_related("rule")


def rules_catalogue() -> QuerySet[Rule]:
    return Rule.objects.prefetch_related("versions")


VETTING_LABEL_COLOURS = {"failed vetting (7 days)": "#e57373", "passed vetting (7 days)": "#81c784", "suspect": "#ed8b00",
                         "drain recommended": "#d84315", "drained": "#b71c1c", "in repair": "#6a1b9a", "returned to service": "#1565c0"}


def vetting_labels(days: int = 7) -> tuple[dict[str, str], dict[str, str]]:
    """host -> label for colouring the topology (health state first, then the last ``days`` of results),
    and the colours those labels mean."""
    from .node_states import STATE_WORDS

    labels = {host: f"{outcome} vetting ({days} days)" for host, outcome in recent_outcomes(days).items()}
    labels.update({host: STATE_WORDS[state] for host, state in node_states().items()})
    return labels, VETTING_LABEL_COLOURS


def job_vetting_rows(job, *, start, end, now, window: timedelta) -> dict:
    """What the job page's vetting panel reads about ``job``'s nodes (see ``assessment.assess``): this allocation's
    runs; per node and check the time of the latest result in the ``window`` before ``start`` or in those runs; the
    failed results from then until now; how many nodes were checked again after the start; their health states.
    Aggregates and the rare failed rows only: a few queries whatever the job's size."""
    from django.db.models import Max

    from .assessment import CheckResult, NodeState

    hosts = list(job.node_list or [])
    runs = list(VettingRun.objects.filter(_own_runs(job)).order_by("-started", "-id")[:10])
    own = set(VettingRun.objects.filter(_own_runs(job)).values_list("id", flat=True))
    on_nodes = VettingResult.objects.filter(host__in=hosts)
    before = Q(time__gte=start - window, time__lte=start) | Q(run_id__in=own)
    latest = {(row["host"], row["eval_name"]): row["last"] for row in
              on_nodes.filter(before).order_by().values("host", "eval_name").annotate(last=Max("time"))}
    fields = ("host", "time", "eval_name", "outcome", "kind", "eval_type", "status", "gpu", "bandwidth_gbs", "metrics", "thresholds",
              "message", "run_id")
    bad = [CheckResult(**row, own_run=row["run_id"] in own) for row in
           on_nodes.filter(Q(time__gte=start - window) | Q(run_id__in=own), outcome__in=BAD_OUTCOMES, time__lte=now)
           .order_by("time", "id").values(*fields)[:5000]]
    since = on_nodes.filter(time__gt=start, time__lte=end or now).exclude(run_id__in=own)
    states = [NodeState(host, state, moment, reason) for host, state, moment, reason in
              NodeHealth.objects.filter(host__in=hosts).exclude(state=NodeHealthStateChoices.HEALTHY).values_list("host", "state", "since", "reason")]
    return {"runs": runs, "latest_before": latest, "bad": bad, "checked_since": since.values("host").distinct().count(), "states": states}


# --- GPU-health counters (the telemetry store) ---------------------------------------------------------------

GPU_HEALTH_BUCKETS = 16  # a job or window of any length is judged from at most ~17 buckets per GPU series


def gpu_health_aggregate(*, start, end, cluster: str | None = None, hosts=None, buckets: int = GPU_HEALTH_BUCKETS):
    """The GPU-health fields (``gpu_health.HEALTH_FIELDS``) of ``hosts`` (None: every node) in [start, end), as
    per-bucket min and max per GPU series — one store query, a bounded table, no SQL. None where the telemetry
    store cannot be read (the caller says nothing rather than something wrong)."""
    import math

    from apps.telemetry.backends.base import Query, TelemetryUnavailable
    from apps.telemetry.store import telemetry_store

    from .gpu_health import HEALTH_FIELDS

    if end <= start or (hosts is not None and not list(hosts)):
        return None
    from apps.telemetry.selectors import readable_step

    step = max(60, math.ceil((end - start).total_seconds() / max(1, buckets)))
    step = readable_step(start, step) or step  # never finer than the tier that still holds the window
    query = Query(start=start, end=end, cluster=cluster or None, hosts=tuple(hosts) if hosts is not None else None,
                  fields=HEALTH_FIELDS)
    try:
        return telemetry_store().aggregate(query, step, ("min", "max"))
    except (TelemetryUnavailable, ValueError):  # ValueError: retention.TierError, nothing of the window kept
        return None


def job_gpu_health(job, *, start, end):
    """The health counters that changed on ``job``'s GPUs between ``start`` and ``end`` (``gpu_health.HealthChange``,
    most severe first); [] when none did or the store cannot say."""
    from .gpu_health import judge

    aggregate = gpu_health_aggregate(start=start, end=end, cluster=job.cluster.name, hosts=list(job.node_list or []))
    if aggregate is None:
        return []
    return [change for change in judge(aggregate, since=start) if change.new]


def job_preflight(job) -> dict:
    """Which of the job's nodes passed the prolog's pre-flight (deploy/slurm/belvedere-preflight.sh) for this job:
    {"nodes", "checked", "passed": [host], "failed": [{"host", "checks": [{"check", "outcome", "message"}]}],
    "not_checked": [host], "passed_hostlist"}. A node passes when none of its pre-flight results failed."""
    import hostlist

    from .choices import VettingRunSourceChoices

    hosts = list(job.node_list or ())
    rows = (VettingResult.objects.filter(run__source=VettingRunSourceChoices.PREFLIGHT, run__cluster=job.cluster_id,
                                         job_id_number=job.job_id, host__in=hosts)
            .order_by("host", "eval_name", "-time", "-id").values("host", "eval_name", "outcome", "message", "time"))
    latest: dict[tuple, dict] = {}
    for row in rows:
        latest.setdefault((row["host"], row["eval_name"]), row)
    by_host: dict[str, list] = {}
    for (host, _check), row in sorted(latest.items()):
        by_host.setdefault(host, []).append(row)
    passed = sorted(h for h, checks in by_host.items() if not any(c["outcome"] in BAD_OUTCOMES for c in checks))
    failed = [{"host": h, "checks": [{"check": c["eval_name"], "outcome": c["outcome"], "message": c["message"]}
                                     for c in checks if c["outcome"] in BAD_OUTCOMES]}
              for h, checks in sorted(by_host.items()) if h not in passed]
    return {"nodes": len(hosts), "checked": len(by_host), "passed": passed,
            "passed_hostlist": hostlist.collect_hostlist(passed) if passed else "",
            "failed": failed, "not_checked": sorted(set(hosts) - set(by_host)),
            "page_cache_in_gpu": _page_cache_before(job)}


def _page_cache_before(job) -> list[dict]:
    """Page cache held in the job's GPUs' memory just before it started (host samples, issue 39): a fact about the nodes
    the job was given, beside the pre-flight's checks; [] without host samples or a store."""
    from django.conf import settings

    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.selectors import page_cache_before

    try:
        return page_cache_before(job, float(settings.HOST_PAGE_CACHE_GPU_GB) * 1e9)
    except TelemetryUnavailable:
        return []
