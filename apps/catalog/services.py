"""Writes of the catalog app: loading product files (a new version whenever a file changed), running a
product's quality checks, keeping their history, and opening and closing incidents."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.telemetry.fields import FIELDS

from . import quality
from .choices import CheckRunStatusChoices
from .definitions import ProductProblem, load_folder
from .models import CheckRun, DataProduct, Incident, IncidentSubscription, ProductVersion
from .sources import Observation, SourceProblem, declared_schema, hosts_expected_until, observe, population

BUILT_IN = Path(__file__).with_name("products")


def catalog_folders() -> list[Path]:
    return [BUILT_IN, *(Path(folder) for folder in settings.CATALOG_PATHS)]


def field_units() -> dict[int, str]:
    return {field_id: known.unit for field_id, known in FIELDS.items()}


@dataclass
class LoadReport:
    created: list = field(default_factory=list)
    updated: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)
    problems: list[ProductProblem] = field(default_factory=list)


def _search_text(product: dict) -> str:
    parts = [product["name"], product["title"], product["domain"], product["owner"]["team"], *product["description"].values(),
             *product["tags"], *(column["name"] for column in product["schema"]),
             *(column.get("description", "") for column in product["schema"])]
    return " ".join(part for part in parts if part).lower()


def load_catalog(folders: list[Path] | None = None, *, dry_run: bool = False) -> LoadReport:
    """Validate every product file; store the valid ones (a file whose text changed becomes a new version).
    Invalid files change nothing of what was stored."""
    report = LoadReport()
    products = []
    seen: dict[str, str] = {}
    for folder in folders or catalog_folders():
        if not Path(folder).is_dir():
            report.problems.append(ProductProblem(str(folder), None, None, "", "not a folder of product files"))
            continue
        found, problems = load_folder(folder, field_units=field_units())
        report.problems.extend(problems)
        for product in found:
            if product["name"] in seen:
                report.problems.append(ProductProblem(product["file"], 1, 1, "name",
                                                      f"{product['name']!r} is already declared in {seen[product['name']]}"))
                continue
            seen[product["name"]] = product["file"]
            products.append(product)
    if dry_run:
        report.unchanged = [p["name"] for p in products]
        return report
    now = timezone.now()
    for product in products:
        with transaction.atomic():
            row = DataProduct.objects.select_for_update().filter(name=product["name"]).first()
            values = {"title": product["title"], "domain": product["domain"], "status": product["status"],
                      "owner_team": product["owner"]["team"], "owner_contact": product["owner"]["contact"], "version": product["version"],
                      "definition": product, "source_file": product["file"], "digest": product["digest"], "loaded": now,
                      "search_text": _search_text(product)}
            if row is None:
                row = DataProduct.objects.create(name=product["name"], next_run=now, **values)
                ProductVersion.objects.create(product=row, version=product["version"], digest=product["digest"], definition=product,
                                              changes=["created"], loaded=now)
                report.created.append(row.name)
            elif row.digest != product["digest"]:
                before = row.definition
                changes = sorted(key for key in set(before) | set(product) if key not in ("digest", "file") and before.get(key) != product.get(key))
                for key, value in values.items():
                    setattr(row, key, value)
                row.next_run = now  # a changed contract is checked at once
                row.save()
                ProductVersion.objects.create(product=row, version=product["version"], digest=product["digest"], definition=product,
                                              changes=changes or ["formatting"], loaded=now)
                report.updated.append(row.name)
            else:
                report.unchanged.append(row.name)
    return report


# ---------------------------------------------------------------------------------------------
# Quality checks


def evaluate(product: dict, observation: Observation, now: datetime) -> list[quality.Result]:
    """The four checks of ``product`` on what its source holds (plain computation over the observation)."""
    if observation.problem:
        return [quality.Result(kind, "skipped", f"source unavailable: {observation.problem}") for kind in ("freshness", "coverage", "gaps",
                                                                                                          "drift")]
    slo, window = product["slo"], product["checks"]["window"]
    name_members = not quality.members_are_jobs(product)  # summaries (and so incidents) never name a job
    results = [quality.freshness(observation.newest, now, warn=slo["freshness"]["warn"], error=slo["freshness"]["error"])]
    coverage = slo.get("coverage")
    if coverage and observation.present is not None:
        try:
            expected = population(coverage["population"], now=now, window=timedelta(seconds=window))
        except SourceProblem as exc:
            results.append(quality.Result("coverage", "error", str(exc)))
        else:
            results.append(quality.coverage(observation.present, expected.members, target=coverage["target"],
                                            population=coverage["population"], expected_per_host=expected.per_host,
                                            name_members=name_members))
    else:
        results.append(quality.Result("coverage", "skipped", "no coverage target declared" if not coverage else
                                      "the source has no members to count"))
    if slo.get("sampling_period") and observation.counts is not None:
        expected = (hosts_expected_until(now=now, window=timedelta(seconds=window)) if slo.get("expected_while") == "jobs"
                    else None)
        results.append(quality.gaps(observation.counts, start=now - timedelta(seconds=window), end=now, period=slo["sampling_period"],
                                    gap_after=slo["gap_after"], name_members=name_members, expected_until=expected))
    else:
        results.append(quality.Result("gaps", "skipped", "no sampling period declared" if not slo.get("sampling_period") else
                                      "no samples in the window"))
    declared = declared_schema(product)
    if product["source"]["kind"] == "telemetry" and observation.schema is not None:
        # The registry is the source of a DCGM field's unit: a declared unit that no longer matches it is drift.
        observed = {key: {"unit": (FIELDS[int(key)].unit if int(key) in FIELDS else None)} for key in observation.schema}
        results.append(quality.drift(declared, observed, report_new=False))
    else:
        results.append(quality.drift(declared, observation.schema, aliases=observation.aliases,
                                     report_new=product["source"]["kind"] != "model") if declared else
                       quality.Result("drift", "skipped", "no columns mapped to the source's fields"))
    for note in observation.notes:
        results[0].measured.setdefault("notes", []).append(note)
    return results


def run_checks(product: DataProduct, *, now: datetime | None = None) -> list[CheckRun]:
    """Run every check of ``product`` now; store the runs, move its state and its incidents."""
    now = now or timezone.now()
    started = time.perf_counter()
    observation = observe(product.definition, now)
    results = evaluate(product.definition, observation, now)
    elapsed = int((time.perf_counter() - started) * 1000)
    runs = []
    with transaction.atomic():
        for result in results:
            run = CheckRun.objects.create(product=product, kind=result.kind, ran=now, status=result.status, summary=result.summary[:1000],
                                          measured=result.measured, duration_ms=elapsed)
            runs.append(run)
            _incident(product, run)
        fresh = next(r for r in results if r.kind == "freshness")
        product.state = quality.product_state(results)
        product.state_as_of = now
        product.newest_sample = fresh.measured.get("newest")
        cover = next(r for r in results if r.kind == "coverage")
        product.coverage = cover.measured.get("ratio") if cover.status in ("pass", "fail") else None
        product.summary = {r.kind: {"status": r.status, "summary": r.summary[:300]} for r in results}
        product.last_run = now
        product.next_run = now + timedelta(seconds=product.definition["checks"]["every"])
        product.save(update_fields=["state", "state_as_of", "newest_sample", "coverage", "summary", "last_run", "next_run"])
    return runs


def _incident(product: DataProduct, run: CheckRun) -> None:
    """A failing check opens an incident (one per product and check); the first pass closes it."""
    current = Incident.objects.filter(product=product, kind=run.kind, closed__isnull=True).first()
    if run.status == CheckRunStatusChoices.FAIL and current is None:
        incident = Incident.objects.create(product=product, kind=run.kind, opened=run.ran, opened_by=run, message=run.summary[:1000])
        transaction.on_commit(lambda: mail_subscribers(incident.pk))
    elif run.status == CheckRunStatusChoices.FAIL:  # still breached: the message says how it is now, the opening time stays
        current.message = run.summary[:1000]
        current.save(update_fields=["message"])
    elif run.status == CheckRunStatusChoices.PASS and current is not None:
        current.closed, current.closed_by = run.ran, run
        current.save(update_fields=["closed", "closed_by"])


def due_products(now: datetime | None = None):
    now = now or timezone.now()
    return DataProduct.objects.exclude(status="retired").filter(next_run__lte=now)


# ---------------------------------------------------------------------------------------------
# Incidents: the people's side (acknowledge, assign, resolve) and mail to subscribers


class IncidentChangeError(ValueError):
    """A change an incident cannot take: ``field`` names the value at fault, the message says why."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


UNCHANGED = object()


def change_incident(incident: Incident, *, actor, state: str | None = None, assignee=UNCHANGED) -> Incident:
    """Staff: ``state`` acknowledged (someone looks), resolved (closed by hand) or open (acknowledgement taken
    back); ``assignee`` a staff user or None. Assigning an open incident acknowledges it."""
    from .choices import IncidentStateChoices

    now = timezone.now()
    with transaction.atomic():
        incident = Incident.objects.select_for_update().get(pk=incident.pk)
        if incident.closed is not None and (state in (IncidentStateChoices.OPEN, IncidentStateChoices.ACKNOWLEDGED)
                                            or assignee is not UNCHANGED):
            raise IncidentChangeError("state" if state else "assignee",
                                      f"this incident was resolved at {incident.closed:%Y-%m-%d %H:%M} UTC; the next failing "
                                      "check opens a new one")
        if assignee is not UNCHANGED:
            if assignee is not None and not (assignee.is_staff and assignee.is_active):
                raise IncidentChangeError("assignee", f"{assignee.get_username()} is not an active staff member")
            incident.assignee = assignee
            if assignee is not None and incident.acknowledged is None:
                incident.acknowledged, incident.acknowledged_by = now, actor
        if state == IncidentStateChoices.ACKNOWLEDGED and incident.acknowledged is None:
            incident.acknowledged, incident.acknowledged_by = now, actor
        elif state == IncidentStateChoices.OPEN:
            incident.acknowledged = incident.acknowledged_by = None
        elif state == IncidentStateChoices.RESOLVED and incident.closed is None:
            incident.closed, incident.resolved_by = now, actor
            if incident.acknowledged is None:
                incident.acknowledged, incident.acknowledged_by = now, actor
        incident.save()
    return incident


def subscribe(user, product: DataProduct, subscribed: bool) -> bool:
    """Mail ``user`` (or stop mailing) when ``product`` opens an incident; returns whether they are subscribed."""
    if subscribed:
        IncidentSubscription.objects.get_or_create(user=user, product=product)
    else:
        IncidentSubscription.objects.filter(user=user, product=product).delete()
    return subscribed


def incident_mail(incident: Incident, portal_url: str = "") -> tuple[str, str]:
    """(subject, body) of the mail about a new incident."""
    product = incident.product
    subject = f"[Belvedere] {product.name}: {incident.kind} incident opened"
    body = (f"{product.title} ({product.name}) opened a {incident.kind} incident at {incident.opened:%Y-%m-%d %H:%M} UTC:\n\n"
            f"{incident.message}\n\n"
            f"Product: {portal_url}/catalog/{product.name}/\nAll incidents: {portal_url}/catalog/incidents/\n\n"
            f"You get this because you subscribed to {product.name}'s incidents; unsubscribe on the product's page.\n")
    return subject, body


def mail_subscribers(incident_pk: int) -> int:
    """Mail each active subscriber who may see the incident's product (one message each); returns how many."""
    from django.core.mail import send_mass_mail

    from .selectors import visible_products

    incident = Incident.objects.select_related("product").filter(pk=incident_pk).first()
    if incident is None:
        return 0
    subject, body = incident_mail(incident, getattr(settings, "BELVEDERE_BASE_URL", "").rstrip("/"))
    messages = [(subject, body, settings.DEFAULT_FROM_EMAIL, [row.user.email])
                for row in IncidentSubscription.objects.filter(product=incident.product, user__is_active=True).select_related("user")
                if row.user.email and visible_products(row.user).filter(pk=incident.product_id).exists()]
    if not messages:
        return 0
    try:
        return send_mass_mail(messages, fail_silently=False)
    except OSError as exc:  # the mail server is down: the incident stands, the pages show it; say why in the log
        import logging

        logging.getLogger(__name__).warning("incident %s: mail to %d subscriber(s) not sent: %s", incident.pk, len(messages), exc)
        return 0
