"""Writes of the vetting app: storing runs, evaluating rules, moving nodes between health states."""
from __future__ import annotations

import hashlib
import json
import logging
import urllib.error
import urllib.request
from datetime import timedelta

import pandas as pd
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from apps.core.bulk import insert_rows

from .choices import RecommendationStatusChoices, VettingRunSourceChoices
from .models import NodeHealth, NodeHealthEvent, Recommendation, Rule, RuleVersion, VettingResult, VettingRun
from .node_states import ACTION_WORDS, RULE_ACTIONS, STATE_WORDS, TransitionError, can, rule_target, staff_target, would_words
from .records import BAD_OUTCOMES, Run
from .rules import BUILT_IN_RULES, HISTORY_COLUMNS, RuleSpec, check_rule, empty_history, evaluate
from .scontrol import ActionRefused, SlurmNodeActions

log = logging.getLogger(__name__)
ACTIVE = (RecommendationStatusChoices.OPEN, RecommendationStatusChoices.ACKNOWLEDGED)


# ---------------------------------------------------------------------------------------------
# Ingestion


def protocol_hash(text: str | None) -> str:
    return hashlib.sha256(text.encode()).hexdigest() if text else ""


def _places(hosts) -> dict:
    """host -> (group, switch of NIC 0) from the current topology."""
    from apps.topology.selectors import topology_index_current

    index = topology_index_current()
    out = {}
    for host in hosts:
        found = index.nic_of(host, 0)
        if found:
            out[host] = (found.group, found.switch_label)
    return out


def run_store(run: Run, *, cluster, job=None, submitter: str = "") -> VettingRun:
    """Store a parsed run and its results in one transaction, then queue the rules for its nodes."""
    from apps.topology.selectors import topology_index_current

    started = run.started or timezone.now()
    index = topology_index_current()
    places = _places(run.hosts)
    with transaction.atomic():
        stored = VettingRun.objects.create(
            cluster=cluster, job=job, job_id_number=job.job_id if job else run.job_id, source=run.source,
            protocol_name=run.protocol_name[:200], protocol_hash=run.protocol_hash, started=started, ended=run.ended,
            submitter=submitter[:150], user_name=job.user_name if job else "", account=job.account if job else "",
            hosts=len(run.hosts), failed_hosts=run.failed_hosts, results_total=len(run.results),
            results_failed=sum(1 for r in run.results if r.outcome in BAD_OUTCOMES), warnings=run.warnings[:50])
        rows = []
        for result in run.results:
            group, switch = places.get(result.host, (None, ""))
            if result.gpu is not None and result.host in index.row_of:
                found = index.nic_of(result.host, int(result.gpu))
                if found:
                    switch = found.switch_label
            rows.append(VettingResult(
                run=stored, time=started, host=result.host[:64], group=group, switch=switch, job_id_number=stored.job_id_number,
                user_name=stored.user_name, account=stored.account, kind=result.kind, eval_name=result.eval_name[:200], eval_type=result.eval_type[:200],
                status=str(result.status)[:20], outcome=result.outcome, rank=result.rank, local_rank=result.local_rank,
                gpu=result.gpu, elapsed_s=result.elapsed_s, bandwidth_gbs=result.bandwidth_gbs,
                metrics=result.metrics if isinstance(result.metrics, dict) else {"items": result.metrics},
                thresholds=result.thresholds, message=result.message[:4000]))
        insert_rows(VettingResult, rows)
        for host in run.hosts:
            NodeHealth.objects.get_or_create(host=host, defaults={"since": started})
        if run.source == VettingRunSourceChoices.PREFLIGHT:
            _preflight_versions(run, started, cluster, job)
        transaction.on_commit(lambda: _queue_rules(stored.pk))
    return stored


def _preflight_versions(run: Run, started, cluster, job) -> None:
    """The versions a pre-flight read on its node (``metrics.versions`` of its results) become version facts."""
    from apps.telemetry import versions
    from apps.telemetry.services import version_facts_record

    partition = job.partition if job else ""
    seen = []
    for result in run.results:
        found = result.metrics.get("versions") if isinstance(result.metrics, dict) else None
        for item in found if isinstance(found, list) else []:
            if not isinstance(item, dict):
                continue
            try:
                seen.append(versions.observation(result.host, item.get("gpu"), item.get("key"), item.get("value"), started,
                                                 item.get("partition") or partition))
            except (versions.VersionError, TypeError):
                continue  # a reading that is no version is not a fact; the result itself is stored
    if seen:
        version_facts_record(seen, source="preflight", cluster=cluster.name if cluster else "")


def _queue_rules(run_pk: int) -> None:
    from .tasks import evaluate_run_task

    try:
        evaluate_run_task.delay(run_pk)
    except Exception as exc:  # noqa: BLE001 - the broker being down must not lose the stored run; beat evaluates later
        log.warning("could not queue the rules for vetting run %s: %s", run_pk, exc)


# ---------------------------------------------------------------------------------------------
# Rules


def rules_ensure_built_in() -> None:
    """Create the built-in rules that are missing: one read when they all exist (every rules page and answer calls it)."""
    existing = set(Rule.objects.filter(slug__in=[spec.slug for spec in BUILT_IN_RULES]).values_list("slug", flat=True))
    for spec in BUILT_IN_RULES:
        if spec.slug in existing:
            continue
        rule, created = Rule.objects.get_or_create(slug=spec.slug, defaults={
            "name": spec.name, "kind": spec.kind, "params": spec.params, "action": spec.action, "severity": spec.severity,
            "enabled": spec.enabled, "updated_by": "built-in"})
        if created:
            RuleVersion.objects.create(rule=rule, version=1, snapshot=_snapshot(rule), changed_by="built-in", comment="built-in rule")


def _snapshot(rule: Rule) -> dict:
    return {"name": rule.name, "description": rule.description, "kind": rule.kind, "params": rule.params, "action": rule.action,
            "severity": rule.severity, "enabled": rule.enabled}


class RuleInvalid(ValueError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{field}: {message}" for field, message in problems))


def rule_save(rule: Rule | None, data: dict, *, user: str, comment: str = "") -> Rule:
    """Create or change a rule; every change is a new version with who and why. Invalid rules are refused whole."""
    current = _snapshot(rule) if rule else {}
    merged = {**current, **{key: value for key, value in data.items() if key in ("name", "description", "kind", "params", "action",
                                                                                 "severity", "enabled")}}
    problems = []
    if not str(merged.get("name", "")).strip():
        problems.append(("name", "a rule needs a name"))
    params, more = check_rule(merged.get("kind", ""), merged.get("params", {}), merged.get("action", ""), merged.get("severity", ""))
    problems += more
    if problems:
        raise RuleInvalid(problems)
    merged["params"] = params
    with transaction.atomic():
        if rule is None:
            slug = data.get("slug") or ""
            if not slug or Rule.objects.filter(slug=slug).exists():
                raise RuleInvalid([("slug", "a new rule needs a slug no other rule has")])
            rule = Rule.objects.create(slug=slug, updated_by=user, **merged)
        else:
            if merged == current:
                return rule  # nothing changed: no new version
            rule = Rule.objects.select_for_update().get(pk=rule.pk)
            for key, value in merged.items():
                setattr(rule, key, value)
            rule.version += 1
            rule.updated_by = user
            rule.save()
        RuleVersion.objects.create(rule=rule, version=rule.version, snapshot=_snapshot(rule), changed_by=user, comment=comment[:300])
    return rule


def rule_specs() -> list[RuleSpec]:
    return [RuleSpec(slug=r.slug, name=r.name, kind=r.kind, params=r.params, action=r.action, severity=r.severity,
                     version=r.version, enabled=r.enabled) for r in Rule.objects.all()]


def history_frame(*, hosts=None, since=None) -> pd.DataFrame:
    """Results since ``since`` (of ``hosts``, and of every node behind the same switches) as a rules history."""
    queryset = VettingResult.objects.all()
    if since is not None:
        queryset = queryset.filter(time__gte=since)
    if hosts is not None:
        switches = set(VettingResult.objects.filter(host__in=hosts).exclude(switch="").values_list("switch", flat=True).distinct())
        from django.db.models import Q

        queryset = queryset.filter(Q(host__in=hosts) | Q(switch__in=switches))
    rows = list(queryset.values_list(*[c if c != "run_id" else "run_id" for c in HISTORY_COLUMNS]))
    if not rows:
        return empty_history()
    frame = pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))
    frame["switch"] = frame["switch"].replace("", None)
    frame["bandwidth_gbs"] = pd.to_numeric(frame["bandwidth_gbs"], errors="coerce")
    return frame


def versions_frame(specs) -> pd.DataFrame | None:
    """The fleet's current versions with each node's partition (``rules.VERSION_COLUMNS``) when a version rule is on."""
    from apps.telemetry.selectors import partitions_of, versions_current

    from .rules import VERSION_COLUMNS

    keys = {key for spec in specs if spec.enabled and spec.kind == "version_drift"
            for key in (spec.params or {}).get("keys", ["driver", "cuda_driver", "vbios", "inforom_image"])}
    if not keys:
        return None
    where = partitions_of()
    slots: dict[tuple, dict] = {}
    for row in versions_current(keys=keys):
        # a GPU-level key reads "a / b" on a node whose GPUs disagree (as versions.node_values): such a node differs
        slot = slots.setdefault((row["host"], row["key"]), {"values": set(), "seen": row["first_seen"], "partition": row["partition"]})
        slot["values"].add(row["value"])
        slot["seen"] = max(slot["seen"], row["first_seen"])
    return pd.DataFrame([(host, where.get(host, slot["partition"]), key, " / ".join(sorted(slot["values"])), slot["seen"])
                         for (host, key), slot in slots.items()], columns=list(VERSION_COLUMNS))


def rules_evaluate(*, hosts=None, now=None) -> dict:
    """Evaluate every enabled rule (over ``hosts`` and their switches, or all nodes) and record what they
    find. Idempotent: an open recommendation is updated, never duplicated; a resolved one comes back
    only with evidence newer than its resolution."""
    rules_ensure_built_in()
    now = now or timezone.now()
    specs = rule_specs()
    checked = (check_rule(s.kind, s.params, s.action, s.severity) for s in specs)
    longest = max((float(params.get("days", 1)) for params, problems in checked if not problems), default=1.0)
    findings = evaluate(specs, history_frame(hosts=hosts, since=now - timedelta(days=longest)), now=now,
                        versions=versions_frame(specs))
    rules_by_slug = {rule.slug: rule for rule in Rule.objects.all()}
    created, updated = [], 0
    for finding in findings:
        rule = rules_by_slug[finding.rule]
        with transaction.atomic():
            active = (Recommendation.objects.select_for_update()
                      .filter(rule=rule, subject_kind=finding.subject_kind, subject=finding.subject, status__in=ACTIVE).first())
            if active:
                if (active.evidence, active.hosts, active.summary) != (finding.evidence, finding.hosts, finding.summary[:500]):
                    active.evidence, active.hosts, active.summary = finding.evidence, finding.hosts, finding.summary[:500]
                    active.latest_evidence, active.rule_version = finding.latest, finding.rule_version
                    active.save()
                    updated += 1
                continue
            resolved = (Recommendation.objects.filter(rule=rule, subject_kind=finding.subject_kind, subject=finding.subject)
                        .exclude(status__in=ACTIVE).order_by("-resolved_at").first())
            if resolved and resolved.resolved_at and finding.latest and finding.latest <= resolved.resolved_at:
                continue
            recommendation = Recommendation.objects.create(
                rule=rule, rule_version=finding.rule_version, subject_kind=finding.subject_kind, subject=finding.subject,
                hosts=finding.hosts, action=finding.action, severity=finding.severity, summary=finding.summary[:500],
                evidence=finding.evidence, latest_evidence=finding.latest)
            created.append(recommendation)
            for host in finding.hosts:
                _raise_state(host, finding, rule)
    for recommendation in created:
        notify_recommendation(recommendation)
    return {"findings": len(findings), "created": len(created), "updated": updated}


def _raise_state(host: str, finding, rule: Rule) -> None:
    health, _ = NodeHealth.objects.select_for_update().get_or_create(host=host, defaults={"since": timezone.now()})
    target = rule_target(health.state, finding.action)
    if target is None:
        return
    NodeHealthEvent.objects.create(host=host, from_state=health.state, to_state=target, action="rule",
                                   actor=f"rule:{rule.slug} v{rule.version}", reason=finding.summary[:500])
    health.state, health.since, health.reason = target, timezone.now(), finding.summary[:500]
    health.severity = finding.severity
    health.acknowledged_by, health.acknowledged_at = "", None
    health.save()


# ---------------------------------------------------------------------------------------------
# Staff actions


def node_actions_backend() -> SlurmNodeActions:
    from apps.jobs.slurm import run_slurm_command

    return SlurmNodeActions(run_slurm_command, dry_run=settings.VETTING_ACTIONS_DRY_RUN, timeout=settings.SLURM_COMMAND_TIMEOUT)


class ActionFailed(RuntimeError):
    pass


def node_act(host: str, action: str, *, actor: str, reason: str, backend: SlurmNodeActions | None = None) -> NodeHealthEvent:
    """A staff action on a node (acknowledge, drain, repair, return, clear) with a reason; drain and
    return go through the Slurm backend (a dry run unless VETTING_ACTIONS_DRY_RUN is off). A dry run is
    recorded as an event with ``dry_run`` set and leaves the node's state (and its recommendations) as it was."""
    reason = " ".join(str(reason or "").split())
    if not reason:
        raise TransitionError("say why: a reason is recorded with every action")
    backend = backend or node_actions_backend()
    with transaction.atomic():
        health, _ = NodeHealth.objects.select_for_update().get_or_create(host=host, defaults={"since": timezone.now()})
        target = staff_target(health.state, action)
        result = None
        try:
            if action == "drain":
                result = backend.drain(host, reason)
            elif action == "return":
                if health.drained_by_belvedere or backend.dry_run:
                    result = backend.resume(host)
                else:
                    raise ActionRefused(f"{host} was not drained through Belvedere: return it in Slurm yourself, then here")
        except ActionRefused:
            raise
        except Exception as exc:  # noqa: BLE001 - scontrol missing, timed out or refused: nothing changes here
            raise ActionFailed(f"Slurm did not {action} {host}: {exc}") from exc
        dry_run = bool(result and result.dry_run)
        event = NodeHealthEvent.objects.create(
            host=host, from_state=health.state, to_state=health.state if dry_run else target, action=action, actor=actor[:150],
            reason=reason[:500], command=result.command_line if result else "", executed=bool(result and result.executed),
            dry_run=dry_run, output=(result.message + ("\n" + result.output if result and result.output else "")) if result else "")
        if dry_run:  # recorded as what would have run; the node, its recommendations and Slurm stay as they are
            return event
        if action == "acknowledge":
            health.acknowledged_by, health.acknowledged_at = actor[:150], timezone.now()
            _acknowledge_recommendations(host)
        else:
            if action == "drain":
                health.drained_by_belvedere = bool(result and result.executed)
            if action == "return":
                health.drained_by_belvedere = False
            if action in ("drain", "clear", "return"):
                _resolve_recommendations(host, actor, done=action == "drain")
            health.state, health.since, health.reason = target, timezone.now(), reason[:500]
        health.save()
    return event


class SwitchActed:
    """What one action over a switch's nodes did: the events (one per node acted on), the nodes left out and why,
    whether it was a dry run, and the sentence the pages show."""

    def __init__(self, switch: str, action: str, dry_run: bool):
        self.switch, self.action, self.dry_run = switch, action, dry_run
        self.events: list[NodeHealthEvent] = []
        self.skipped: list[tuple[str, str]] = []  # (host, why)
        self.failed: list[tuple[str, str]] = []  # (host, what Slurm said)

    @property
    def hosts(self) -> list[str]:
        return [event.host for event in self.events]

    @property
    def words(self) -> str:
        if self.dry_run:
            return (f"switch {self.switch}: {would_words(self.action, self.hosts, self.skipped)} "
                    "(dry run: nothing changed in Slurm or here)")
        done = f"switch {self.switch}: {ACTION_WORDS.get(self.action, self.action)} {len(self.hosts)} node{'s' * (len(self.hosts) != 1)}"
        if self.failed:
            done += f"; Slurm refused {len(self.failed)}: " + "; ".join(f"{host}: {why}" for host, why in self.failed[:5])
        if self.skipped:
            done += f"; {len(self.skipped)} left out: " + "; ".join(f"{host} {why}" for host, why in self.skipped[:5])
        return done

    def as_dict(self) -> dict:
        return {"switch": self.switch, "action": self.action, "dry_run": self.dry_run, "hosts": self.hosts, "count": len(self.hosts),
                "skipped": [{"host": host, "why": why} for host, why in self.skipped],
                "failed": [{"host": host, "why": why} for host, why in self.failed],
                "commands": [event.command for event in self.events if event.command], "message": self.words}


def switch_hosts(switch: str) -> list[str]:
    """The nodes the open (or acknowledged) switch findings about ``switch`` name."""
    hosts: set[str] = set()
    for recommendation in Recommendation.objects.filter(subject_kind="switch", subject=switch, status__in=ACTIVE):
        hosts.update(recommendation.hosts)
    return sorted(hosts)


def switch_act(switch: str, action: str, *, actor: str, reason: str, dry_run: bool, expect: int | None = None,
               backend: SlurmNodeActions | None = None) -> SwitchActed:
    """One staff action (drain) over the nodes behind ``switch`` that its open findings name, with one reason.

    ``dry_run`` asks for a dry run whatever ``VETTING_ACTIONS_DRY_RUN`` says: each node's command is recorded as what
    would run (an event with ``dry_run`` set) and no node's state, counter or recommendation changes. A real run
    (``dry_run`` false; itself a dry run while ``VETTING_ACTIONS_DRY_RUN`` is on) needs ``expect``, the number of nodes
    the dry run said it would drain: when the switch's nodes changed since, nothing runs. Nodes whose state the
    action does not apply to are left out and named."""
    if action != "drain":
        raise TransitionError(f"a switch's nodes are drained together; {action!r} is done node by node")
    if not " ".join(str(reason or "").split()):
        raise TransitionError("say why: a reason is recorded with every action")
    hosts = switch_hosts(switch)
    if not hosts:
        raise TransitionError(f"no open finding about switch {switch}")
    states = dict(NodeHealth.objects.filter(host__in=hosts).values_list("host", "state"))
    drainable = [host for host in hosts if can(action, states.get(host, "healthy"))]
    if backend is None:
        backend = node_actions_backend()
        if dry_run:
            backend = SlurmNodeActions(backend.run, dry_run=True, timeout=backend.timeout, scontrol=backend.scontrol)
    elif dry_run and not backend.dry_run:
        backend = SlurmNodeActions(backend.run, dry_run=True, timeout=backend.timeout, scontrol=backend.scontrol)
    if not backend.dry_run and expect != len(drainable):
        raise TransitionError(f"run the dry run first: it would now drain {len(drainable)} nodes"
                              + (f", not {expect}" if expect is not None else "") + "; check them, then drain")
    acted = SwitchActed(switch, action, backend.dry_run)
    acted.skipped = [(host, f"is {STATE_WORDS.get(states.get(host, 'healthy'))}") for host in hosts if host not in drainable]
    for host in drainable:
        try:
            acted.events.append(node_act(host, action, actor=actor, reason=f"switch {switch}: {reason}", backend=backend))
        except (TransitionError, ActionRefused) as exc:
            acted.skipped.append((host, str(exc)))
        except ActionFailed as exc:
            acted.failed.append((host, str(exc)))
    if not acted.dry_run and acted.events and not acted.failed:
        for recommendation in Recommendation.objects.filter(subject_kind="switch", subject=switch, status__in=ACTIVE):
            recommendation.status = RecommendationStatusChoices.DONE
            recommendation.resolved_by, recommendation.resolved_at = actor[:150], timezone.now()
            recommendation.save(update_fields=["status", "resolved_by", "resolved_at", "updated"])
    return acted


def _acknowledge_recommendations(host: str) -> None:
    for recommendation in Recommendation.objects.filter(status=RecommendationStatusChoices.OPEN):
        if host in recommendation.hosts:
            recommendation.status = RecommendationStatusChoices.ACKNOWLEDGED
            recommendation.save(update_fields=["status", "updated"])


def _resolve_recommendations(host: str, actor: str, *, done: bool) -> None:
    for recommendation in Recommendation.objects.filter(status__in=ACTIVE):
        if host in recommendation.hosts and (recommendation.subject_kind == "node" or len(recommendation.hosts) == 1):
            recommendation.status = RecommendationStatusChoices.DONE if done else RecommendationStatusChoices.DISMISSED
            recommendation.resolved_by, recommendation.resolved_at = actor[:150], timezone.now()
            recommendation.save(update_fields=["status", "resolved_by", "resolved_at", "updated"])


def recommendation_resolve(recommendation: Recommendation, *, actor: str, dismiss: bool) -> Recommendation:
    recommendation.status = RecommendationStatusChoices.DISMISSED if dismiss else RecommendationStatusChoices.DONE
    recommendation.resolved_by, recommendation.resolved_at = actor[:150], timezone.now()
    recommendation.save(update_fields=["status", "resolved_by", "resolved_at", "updated"])
    return recommendation


# ---------------------------------------------------------------------------------------------
# Notifications


def notify_recommendation(recommendation: Recommendation) -> None:
    """E-mail (VETTING_NOTIFY_EMAILS) and webhook (VETTING_WEBHOOK_URL) for a new recommendation; a
    failing channel is logged, never raised: the recommendation stands either way."""
    verb = {"suspect": "suspect", "drain_recommended": "drain recommended", "exclude_now": "exclude now"}[recommendation.action]
    subject = f"[Belvedere] {verb}: {recommendation.subject_kind} {recommendation.subject}"
    body = (f"{recommendation.summary}\n\nRule: {recommendation.rule.name} (v{recommendation.rule_version}), "
            f"severity {recommendation.severity}.\nNodes: {', '.join(recommendation.hosts)}\n"
            f"Triage: {settings.SITE_URL.rstrip('/')}/vetting/triage/\n")
    sent = False
    if settings.VETTING_NOTIFY_EMAILS:
        try:
            send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, list(settings.VETTING_NOTIFY_EMAILS))
            sent = True
        except Exception as exc:  # noqa: BLE001
            log.warning("vetting e-mail for recommendation %s failed: %s", recommendation.pk, exc)
    if settings.VETTING_WEBHOOK_URL:
        payload = {"event": "vetting.recommendation", "id": recommendation.pk, "rule": recommendation.rule.slug,
                   "rule_version": recommendation.rule_version, "subject_kind": recommendation.subject_kind,
                   "subject": recommendation.subject, "hosts": recommendation.hosts, "action": recommendation.action,
                   "state": STATE_WORDS[RULE_ACTIONS[recommendation.action]], "severity": recommendation.severity,
                   "summary": recommendation.summary, "text": f"{subject}\n{recommendation.summary}"}
        request = urllib.request.Request(settings.VETTING_WEBHOOK_URL, data=json.dumps(payload).encode(),
                                         headers={"Content-Type": "application/json", "User-Agent": "Belvedere"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - a URL staff configured
                sent = sent or 200 <= response.status < 300
        except (urllib.error.URLError, OSError) as exc:
            log.warning("vetting webhook for recommendation %s failed: %s", recommendation.pk, exc)
    if sent:
        Recommendation.objects.filter(pk=recommendation.pk).update(notified=True)


# ---------------------------------------------------------------------------------------------
# Who may post a run, and for what


class IngestRefused(PermissionError):
    def __init__(self, message: str, status: int = 403, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.field = field


def run_check_window(run: Run, token_job) -> None:
    """A job token's run must be dated inside its job's write window (``Job.write_window``: the run time ±
    JOB_WRITE_MARGIN_MINUTES), as every other write of a job token: ``started`` and ``ended`` outside it are a
    400 naming the field and the window. A run without times is dated when it is stored. Others are not bounded
    (staff and service accounts import history)."""
    if token_job is None:
        return
    window = token_job.write_window()
    for field in ("started", "ended"):
        moment = getattr(run, field)
        if moment is not None and (reason := window.refusal(moment, field)) is not None:
            raise IngestRefused(reason, status=400, field=field)


def run_target(user, token_job, *, cluster_name: str | None, job_id: int | None):
    """(cluster, job or None, submitter) for a run posted by ``user`` or a job token.

    A job token posts for its own job only. Staff and service accounts with ``vetting.add_vettingrun``
    post for any job, or for none (health checks, admin vetting). Other users post for jobs they may see."""
    from apps.jobs.models import Cluster, Job
    from apps.jobs.selectors import job_get_for_user

    if token_job is not None:
        if job_id is not None and int(job_id) != token_job.job_id:
            raise IngestRefused(f"this job token belongs to job {token_job.job_id}, not {job_id}")
        if cluster_name and cluster_name != token_job.cluster.name:
            raise IngestRefused(f"this job token belongs to cluster {token_job.cluster.name}, not {cluster_name}")
        return token_job.cluster, token_job, f"job {token_job.cluster.name}/{token_job.job_id}"
    if not getattr(user, "is_authenticated", False):
        raise IngestRefused("log in, or post with a token", status=401)
    privileged = user.is_staff or user.has_perm("vetting.add_vettingrun")
    name = cluster_name or settings.SLURM_CLUSTER_NAME
    if job_id is not None:
        job = (Job.objects.select_related("cluster").filter(cluster__name=name, job_id=job_id).first() if privileged
               else job_get_for_user(user, name, int(job_id)))
        if job is None and not privileged:
            raise IngestRefused(f"no job {name}/{job_id} that you may post vetting results for", status=404)
    else:
        job = None
        if not privileged:
            raise IngestRefused("results without a job (health checks, vetting by staff) need staff rights or a service token "
                                "with vetting.add_vettingrun; for your own job give job=<id>")
    cluster = job.cluster if job else Cluster.objects.filter(name=name).first()
    if cluster is None:
        if not privileged:
            raise IngestRefused(f"no cluster {name}", status=404)
        cluster = Cluster.objects.create(name=name)
    return cluster, job, user.get_username()


# ---------------------------------------------------------------------------------------------
# GPU-health counters -> node states


GPU_HEALTH_ACTOR = "gpu-health counters"


def gpu_health_evaluate(*, now=None, window: timedelta | None = None, hosts=None, cluster: str | None = None) -> dict:
    """Raise the state of nodes whose GPU-health counters rose (or show a failing flag) in the last ``window``
    (``VETTING_GPU_HEALTH_WINDOW_SECONDS``, default one hour): ``gpu_health`` judges, this records. Like the rules
    it only raises a state (suspect, drain recommended), with the reason naming GPU and counter, and it is
    idempotent: a node already there stays, and evidence older than a node's last state change (a staff clear
    or return) does not bring it back."""
    from .gpu_health import judge, node_verdicts
    from .selectors import gpu_health_aggregate

    now = now or timezone.now()
    window = window or timedelta(seconds=getattr(settings, "VETTING_GPU_HEALTH_WINDOW_SECONDS", 3600))
    aggregate = gpu_health_aggregate(start=now - window, end=now, cluster=cluster, hosts=hosts)
    if aggregate is None:
        return {"nodes": 0, "raised": 0, "store": "unavailable"}
    verdicts = node_verdicts(judge(aggregate, since=now - window, levels=("failed", "degraded")))
    raised = 0
    current = {health.host: health for health in NodeHealth.objects.filter(host__in=list(verdicts))}
    for host, verdict in verdicts.items():
        health = current.get(host)
        if health is not None and health.state in ("healthy", "returned"):
            changes = [c for c in verdict.changes if c.first_seen >= health.since]
            if not changes:
                continue  # staff cleared or returned the node after this evidence
        with transaction.atomic():
            health, _ = NodeHealth.objects.select_for_update().get_or_create(host=host, defaults={"since": now})
            target = rule_target(health.state, "drain_recommended" if verdict.state == "drain_recommended" else "suspect")
            if target is None:
                continue
            reason = verdict.reason[:500]
            NodeHealthEvent.objects.create(host=host, from_state=health.state, to_state=target, action="rule",
                                           actor=GPU_HEALTH_ACTOR, reason=reason)
            health.state, health.since, health.reason, health.severity = target, now, reason, verdict.severity
            health.acknowledged_by, health.acknowledged_at = "", None
            health.save()
            raised += 1
    return {"nodes": len(verdicts), "raised": raised}


# ---------------------------------------------------------------------------------------------
# Hardware faults found in jobs' telemetry -> node states


TELEMETRY_ACTOR = "telemetry findings"
TELEMETRY_REASON = "Telemetry: "  # how a reason this raised starts (the triage inbox's node-fault item speaks for it)


def telemetry_findings_evaluate(*, now=None) -> dict:
    """Raise the state of nodes on which a running job's telemetry finds a hardware fault (a NIC retrying its packets,
    a GPU running hot or held down in its clocks: ``apps.core.node_findings``, filled by the apps that find them) to
    suspect, the reason naming the fault and the jobs that saw it. Like the GPU-health counters it only raises a state
    and is idempotent; evidence from before a node's last state change (a staff clear or return) does not bring it
    back."""
    from apps.core.node_findings import by_node, node_findings

    now = now or timezone.now()
    faults: dict[str, list] = {}
    for fault in by_node(node_findings(now)):
        faults.setdefault(fault.host, []).append(fault)
    raised = 0
    current = {health.host: health for health in NodeHealth.objects.filter(host__in=list(faults))}
    for host, found in faults.items():
        health = current.get(host)
        if health is not None and health.state in ("healthy", "returned"):
            found = [fault for fault in found if fault.since is None or fault.since >= health.since]
            if not found:
                continue  # staff cleared or returned the node after this evidence
        with transaction.atomic():
            health, _ = NodeHealth.objects.select_for_update().get_or_create(host=host, defaults={"since": now})
            target = rule_target(health.state, "suspect")
            if target is None:
                continue
            words = "; ".join(f"{fault.what} (seen by {', '.join(job for job, _ in fault.jobs[:3])}"
                              f"{f' and {len(fault.jobs) - 3} more jobs' if len(fault.jobs) > 3 else ''})" for fault in found)
            reason = (TELEMETRY_REASON + words)[:500]
            severity = "critical" if any(fault.severity == "critical" for fault in found) else "warning"
            NodeHealthEvent.objects.create(host=host, from_state=health.state, to_state=target, action="rule",
                                           actor=TELEMETRY_ACTOR, reason=reason)
            health.state, health.since, health.reason, health.severity = target, now, reason, severity
            health.acknowledged_by, health.acknowledged_at = "", None
            health.save()
            raised += 1
    return {"nodes": len(faults), "raised": raised}
