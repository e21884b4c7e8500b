"""Writes of the namespaces app: checking and submitting requests, approving, committing to the GitOps
repository, reading status back from Argo CD, and tearing namespaces down in order."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Project

from .argocd import ArgoClient, ArgoUnavailable, summarise, worst
from .choices import ManagedNamespaceStateChoices, NamespaceRequestKindChoices, NamespaceRequestStatusChoices
from .gitops import GitError, GitOpsRepo
from .inventory import Inventory, load_inventory
from .models import ManagedNamespace, NamespaceRequest, RequestEvent, TeamEnvelope
from .render import files as render_files
from .render import render
from .schemas import validate_manifests
from .spec import Check, Usage, namespace_name, normalise, validate
from .spec import usage_of as spec_usage_of
from . import status as status_rules

TEARDOWN_STEPS = ("freeze", "backup", "remove", "prune", "verify", "archive")


@lru_cache(maxsize=4)
def _inventory(path: str) -> Inventory:
    return load_inventory(path or None)


def inventory() -> Inventory:
    return _inventory(settings.NAMESPACES_INVENTORY)


def repository() -> GitOpsRepo:
    return GitOpsRepo(settings.NAMESPACES_GIT_PATH, remote=settings.NAMESPACES_GIT_REMOTE, branch=settings.NAMESPACES_GIT_BRANCH)


# ---------------------------------------------------------------------------------------------
# Usage and envelopes


def usage_of(spec: dict) -> Usage:
    return spec_usage_of(spec, inventory())


def envelope_of(project: Project) -> tuple[dict, list[str]]:
    """The team's envelope (its own values over the inventory's defaults) and its named approvers."""
    envelope = dict(inventory().default_envelope)
    approvers: list[str] = []
    row = TeamEnvelope.objects.filter(project=project).prefetch_related("approvers").first()
    if row:
        for key in ("cpu", "memory", "namespaces"):
            if getattr(row, key) not in (None, ""):
                envelope[key] = getattr(row, key)
        if row.gpus:
            envelope["gpus"] = row.gpus
        if row.storage:
            envelope["storage"] = row.storage
        approvers = sorted(user.get_username() for user in row.approvers.all())
    return envelope, approvers


def _live(exclude: ManagedNamespace | None = None):
    queryset = ManagedNamespace.objects.exclude(state=ManagedNamespaceStateChoices.ARCHIVED).select_related("project")
    return [ns for ns in queryset if exclude is None or ns.pk != exclude.pk]


def context_for(spec: dict, user, *, namespace: ManagedNamespace | None = None) -> dict:
    """Everything ``validate`` needs to judge ``spec`` from ``user`` (for a change: of ``namespace``)."""
    from apps.accounts.selectors import slurm_accounts_for_user

    live = _live(exclude=namespace)
    allocated, team_usage = Usage(), Usage()
    names, hostnames = {}, {}
    team = spec.get("team") if isinstance(spec, dict) else None
    for ns in live:
        usage = usage_of(ns.spec)
        allocated = allocated + usage
        names[ns.name] = ns.project.slurm_account
        for host in ns.spec.get("hostnames") or []:
            hostnames[host] = ns.name
        if ns.project.slurm_account == team:
            team_usage = team_usage + usage
    # requests still in flight hold their names too
    pending = NamespaceRequest.objects.filter(status__in=[NamespaceRequestStatusChoices.WAITING, NamespaceRequestStatusChoices.APPROVED], kind=NamespaceRequestKindChoices.CREATE)
    for name, account in pending.values_list("name", "project__slurm_account"):
        names.setdefault(name, account)
    project = Project.objects.filter(slurm_account=team).first() if team else None
    envelope, approvers = envelope_of(project) if project else (dict(inventory().default_envelope), [])
    member = bool(project) and (user.is_staff or team in slurm_accounts_for_user(user))
    if project and namespace is None and envelope.get("namespaces"):
        count = sum(1 for ns in live if ns.project_id == project.pk)
        envelope = {**envelope, "_namespaces_used": count}
    return {"inventory": inventory(), "team_members": member, "existing": {"names": names, "hostnames": hostnames},
            "allocated": allocated, "team_usage": team_usage, "envelope": envelope, "today": timezone.now().date(),
            "current": namespace.spec if namespace else None, "_approvers": approvers, "_project": project}


def check_request(spec: dict, user, *, namespace: ManagedNamespace | None = None) -> tuple[Check, dict]:
    context = context_for(spec, user, namespace=namespace)
    extra = {key: context.pop(key) for key in list(context) if key.startswith("_")}
    envelope = context["envelope"]
    check = validate(spec, **{**context, "envelope": {k: v for k, v in envelope.items() if not k.startswith("_")}})
    if check.ok and namespace is None and envelope.get("namespaces") and envelope.get("_namespaces_used", 0) >= int(envelope["namespaces"]):
        check.needs_approval.append(f"the team already has {envelope['_namespaces_used']} namespaces, its envelope allows {envelope['namespaces']}")
    return check, extra


@dataclass
class Preview:
    check: Check
    name: str
    manifests: list
    files: dict
    diff: str
    approvers: list


def preview(spec: dict, user, *, namespace: ManagedNamespace | None = None) -> Preview:
    """What submitting ``spec`` would do: the findings, the manifests and the diff against the repository."""
    check, extra = check_request(spec, user, namespace=namespace)
    name = namespace_name(spec.get("team", ""), spec.get("name", "")) if isinstance(spec, dict) else ""
    manifests, rendered, diff = [], {}, ""
    if check.ok:
        spec = normalise(spec, inventory())
        manifests = render(spec, inventory())
        rendered = render_files(spec, manifests)
        try:
            diff = repository().diff(GitOpsRepo.directory(spec["team"], name), rendered)
        except GitError as exc:
            diff = f"(the GitOps repository cannot be read: {exc})"
    return Preview(check, name, manifests, rendered, diff, extra.get("_approvers", []))


@dataclass
class ApprovalFacts:
    manifests: str  # the rendered manifests, as YAML
    diff: str  # against what the repository holds now
    envelope: list  # facts.EnvelopeRow
    capacity: list  # facts.CapacityRow
    over_envelope: list  # resources beyond the envelope after the request
    over_capacity: list  # resources the cluster would not have
    production: bool
    error: str = ""  # why manifests or diff could not be shown


def approval_facts(request: NamespaceRequest) -> ApprovalFacts:
    """What an approver sees before deciding: the manifests the request renders and their diff against the
    repository now, the team's use against its envelope and the cluster's capacity, each after the request."""
    from . import facts

    spec = request.spec or {}
    namespace = request.namespace
    live = _live(exclude=namespace)
    team_other, cluster_other = Usage(), Usage()
    team_count = 0
    for ns in live:
        usage = usage_of(ns.spec)
        cluster_other = cluster_other + usage
        if ns.project_id == request.project_id:
            team_other = team_other + usage
            team_count += 1
    current = usage_of(namespace.spec) if namespace else Usage()
    asked = usage_of(spec)
    envelope, _ = envelope_of(request.project)
    envelope_rows = facts.envelope_rows(team_other=team_other, current=current, asked=asked, envelope=envelope,
                                        namespaces_other=team_count, new_namespace=namespace is None)
    capacity_rows = facts.capacity_rows(inventory(), cluster_other=cluster_other, current=current, asked=asked)
    manifests_text, diff, error = "", "", ""
    try:
        from .render import to_yaml

        manifests = render(spec, inventory())
        manifests_text = to_yaml(manifests)
        diff = repository().diff(GitOpsRepo.directory(request.project.slurm_account, request.name), render_files(spec, manifests))
    except GitError as exc:
        error = f"the GitOps repository cannot be read: {exc}"
    except (KeyError, TypeError, ValueError) as exc:  # a spec stored before a rule changed
        error = f"the request no longer renders: {type(exc).__name__}: {exc}"
    return ApprovalFacts(manifests_text, diff, envelope_rows, capacity_rows, [row.resource for row in envelope_rows if row.over],
                         [row.resource for row in capacity_rows if row.over], is_production(request), error)


# ---------------------------------------------------------------------------------------------
# The workflow


def _event(*, request=None, namespace=None, from_state="", to_state, actor, message="", commit=""):
    return RequestEvent.objects.create(request=request, namespace=namespace, from_state=from_state, to_state=to_state,
                                       actor=str(actor)[:150], message=message[:1000], commit=commit)


def _move(request: NamespaceRequest, to_state: str, actor, message: str = "", commit: str = "") -> None:
    _event(request=request, from_state=request.status, to_state=to_state, actor=actor, message=message, commit=commit)
    request.status = to_state
    if message:
        request.message = message[:1000]
    request.save()


class RequestRefused(ValueError):
    def __init__(self, check: Check):
        self.check = check
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in check.problems))


def submit(spec: dict, user, *, namespace: ManagedNamespace | None = None) -> NamespaceRequest:
    """Check and record a request; approve it at once when it stays inside the team's envelope, otherwise
    wait for the named approvers. Refused (nothing stored) when it breaks a rule."""
    spec = copy.deepcopy(spec)
    check, extra = check_request(spec, user, namespace=namespace)
    if not check.ok:
        raise RequestRefused(check)
    spec = normalise(spec, inventory())
    project = extra["_project"]
    name = namespace_name(spec["team"], spec["name"])
    with transaction.atomic():
        request = NamespaceRequest.objects.create(
            kind=NamespaceRequestKindChoices.CHANGE if namespace else NamespaceRequestKindChoices.CREATE, project=project, namespace=namespace, name=name, spec=spec,
            requested_by=user, needs_approval=check.needs_approval, approvers=extra["_approvers"])
        _event(request=request, to_state=NamespaceRequestStatusChoices.DRAFT, actor=user.get_username(), message="submitted")
        if check.needs_approval:
            who = ", ".join(extra["_approvers"]) or "any staff member"
            _move(request, NamespaceRequestStatusChoices.WAITING, user.get_username(), f"needs approval by {who}: " + "; ".join(check.needs_approval))
        else:
            _move(request, NamespaceRequestStatusChoices.APPROVED, "belvedere", "approved automatically: inside the team's envelope")
            transaction.on_commit(lambda: queue_commit(request.pk))
    return request


class NotAllowed(PermissionError):
    """The request or namespace is not in a state that allows this (the API answers 409)."""


class NotPermitted(NotAllowed):
    """This person may not do this (the API answers 403)."""


def may_approve(request: NamespaceRequest, user) -> bool:
    if not (user.is_authenticated and user.is_staff):
        return False
    return user.is_superuser or not request.approvers or user.get_username() in request.approvers


def is_production(request: NamespaceRequest) -> bool:
    """Whether the request is for an environment where a person always approves (the inventory's ``approval: true``)."""
    environment = (request.spec or {}).get("environment")
    return bool(inventory().environments.get(environment, {}).get("approval"))


def decide(request: NamespaceRequest, user, *, approve: bool, reason: str = "", confirmed: bool = True) -> NamespaceRequest:
    """Approve or reject a waiting request. A rejection says why; approving a production namespace takes a
    note (what the approver checked) and, from the page, the confirmation box (``confirmed``)."""
    if request.status != NamespaceRequestStatusChoices.WAITING:
        raise NotAllowed(f"request {request.number} is {request.get_status_display()}, not waiting for approval")
    if not may_approve(request, user):
        raise NotPermitted(f"only {', '.join(request.approvers) or 'staff'} may decide on {request.number}")
    if not approve and not reason.strip():
        raise NotAllowed("say why the request is rejected: the team reads it")
    if approve and is_production(request):
        environment = request.spec.get("environment")
        if not reason.strip():
            raise NotAllowed(f"{request.number} is a {environment} namespace: approving it takes a note saying what you checked "
                             "(it is recorded in the request's steps); nothing was approved")
        if not confirmed:
            raise NotAllowed(f"{request.number} is a {environment} namespace: tick the confirmation that you checked the manifests, "
                             "the team's envelope and the cluster's capacity; nothing was approved")
    with transaction.atomic():
        request.decided_by, request.decision_reason = user, reason.strip()[:500]
        _move(request, NamespaceRequestStatusChoices.APPROVED if approve else NamespaceRequestStatusChoices.REJECTED, user.get_username(),
              f"{'approved' if approve else 'rejected'} by {user.get_username()}" + (f": {reason.strip()}" if reason.strip() else ""))
        if approve:
            transaction.on_commit(lambda: queue_commit(request.pk))
    return request


def queue_commit(request_pk: int) -> None:
    from .tasks import commit_request_task

    commit_request_task.delay(request_pk)


def commit(request: NamespaceRequest) -> NamespaceRequest:
    """Render the approved request into its directory of the GitOps repository. Idempotent: a request whose
    files are already there is marked 'no change' and makes no commit."""
    if request.status != NamespaceRequestStatusChoices.APPROVED:
        return request
    spec = request.spec
    user = request.requested_by.get_username()
    manifests = render(spec, inventory())
    problems = validate_manifests(manifests)
    if problems:  # a renderer fault must not reach the cluster: nothing is written
        listed = "; ".join(str(problem) for problem in problems[:5])
        _move(request, NamespaceRequestStatusChoices.FAILED, "belvedere", f"the rendered manifests break the bundled schemas, nothing committed: {listed}"[:1000])
        return request
    rendered = render_files(spec, manifests)
    directory = GitOpsRepo.directory(spec["team"], request.name)
    repo = repository()
    diff = repo.diff(directory, rendered)
    how = "approved automatically within the team's envelope" if not request.needs_approval else \
        f"approved by {request.decided_by.get_username() if request.decided_by else 'staff'}"
    message = f"{request.name}: {request.get_kind_display()} ({request.number} by {user}, {how})\n\n{spec.get('purpose', '')[:300]}"
    sha = repo.write(directory, rendered, message)
    with transaction.atomic():
        namespace = request.namespace or ManagedNamespace.objects.filter(name=request.name).first()
        if namespace is None:
            namespace = ManagedNamespace.objects.create(name=request.name, project=request.project, environment=spec["environment"],
                                                        spec=spec)
            _event(namespace=namespace, to_state=ManagedNamespaceStateChoices.PROVISIONING, actor=user, message=f"created by {request.number}")
        request.namespace = namespace
        if sha is None:
            request.diff = ""
            _move(request, NamespaceRequestStatusChoices.UNCHANGED, "belvedere", "the repository already holds exactly this: nothing to commit")
            return request
        request.commit, request.diff = sha, diff
        _move(request, NamespaceRequestStatusChoices.COMMITTED, "belvedere", f"committed {sha[:12]}" + ("" if settings.ARGOCD_URL else
                                                                                        "; no Argo CD configured, so no sync status"), sha)
        namespace.spec, namespace.commit, namespace.environment = spec, sha, spec["environment"]
        if settings.ARGOCD_URL:
            _set_state(namespace, ManagedNamespaceStateChoices.SYNCING, "belvedere", f"{request.number} committed, waiting for Argo CD", sha)
            _move(request, NamespaceRequestStatusChoices.SYNCING, "belvedere", "waiting for Argo CD to sync")
        else:
            # what git knows, by the same rules as the status refresh: a recorded failure keeps its reason
            _event(namespace=namespace, from_state=namespace.state, to_state=namespace.state, actor="belvedere",
                   message=f"{request.number} committed; no Argo CD configured", commit=sha)
            outcome = status_rules.without_argo(_known(namespace), timezone.now())
            _apply(namespace, outcome, "belvedere")
    return request


def _set_state(namespace: ManagedNamespace, state: str, actor, message: str, commit: str = "", force_event: bool = False) -> None:
    if namespace.state != state or force_event:
        _event(namespace=namespace, from_state=namespace.state, to_state=state, actor=actor, message=message, commit=commit)
    namespace.state = state
    namespace.save()


# ---------------------------------------------------------------------------------------------
# Status from Argo CD


def argo_client() -> ArgoClient | None:
    if not settings.ARGOCD_URL:
        return None
    return ArgoClient(settings.ARGOCD_URL, settings.ARGOCD_TOKEN, verify=settings.ARGOCD_VERIFY_TLS, timeout=settings.ARGOCD_TIMEOUT)


def applications_of(namespace: ManagedNamespace) -> list[tuple[str, str]]:
    """(application, project) of the namespace: the tenant's own (made by the platform's ApplicationSet, in the
    platform's project) and one per blueprint (in the namespace's own AppProject)."""
    apps = [(settings.ARGOCD_TENANT_APP.format(namespace=namespace.name, team=namespace.project.slurm_account),
             settings.ARGOCD_TENANT_PROJECT)]
    apps += [(f"{namespace.name}-{item['id']}", namespace.name)
             for item in sorted(namespace.spec.get("blueprints") or [], key=lambda b: b["id"])]
    return apps


def committed_at(namespace: ManagedNamespace):
    """When the namespace's last commit was made (the first step recorded with it), or None."""
    if not namespace.commit:
        return None
    found = RequestEvent.objects.filter(namespace=namespace, commit=namespace.commit).order_by("created").values_list("created", flat=True).first()
    if found is None:
        found = RequestEvent.objects.filter(request__namespace=namespace, commit=namespace.commit).order_by("created") \
            .values_list("created", flat=True).first()
    return found


def _known(namespace: ManagedNamespace) -> status_rules.Known:
    return status_rules.Known(state=namespace.state, message=namespace.status_message, commit=namespace.commit,
                              committed_at=committed_at(namespace), created=namespace.created or timezone.now())


def _apply(namespace: ManagedNamespace, outcome: status_rules.Outcome, actor: str) -> None:
    namespace.status_message = outcome.message[:1000]
    detail = dict(namespace.status_detail or {})
    if outcome.remark:
        detail["remark"] = outcome.remark[:1000]
    else:
        detail.pop("remark", None)
    namespace.status_detail = detail
    _set_state(namespace, outcome.state, actor, outcome.message, namespace.commit if namespace.state != outcome.state else "")


def refresh_status(namespace: ManagedNamespace, client: ArgoClient | None = None) -> ManagedNamespace:
    """Ask Argo CD how the namespace's applications are; move the namespace and its open requests.
    The rules of what a refresh may change are ``status.py``'s: a recorded failure and its reason are never
    replaced by "no Argo CD" or "unreachable"; without Argo CD a waiting namespace says what git knows."""
    client = client or argo_client()
    if namespace.state == ManagedNamespaceStateChoices.ARCHIVED:
        return namespace
    now = timezone.now()
    known = _known(namespace)
    if client is None:
        _apply(namespace, status_rules.without_argo(known, now), "belvedere")
        if namespace.state == ManagedNamespaceStateChoices.FAILED and known.state != namespace.state:
            for request in namespace.requests.filter(status__in=[NamespaceRequestStatusChoices.SYNCING, NamespaceRequestStatusChoices.COMMITTED]):
                _move(request, NamespaceRequestStatusChoices.FAILED, "belvedere", namespace.status_message)
        elif namespace.state == ManagedNamespaceStateChoices.COMMITTED:
            # Its requests say what the namespace says: committed, nothing reports a sync (not "syncing" forever).
            for request in namespace.requests.filter(status=NamespaceRequestStatusChoices.SYNCING):
                _move(request, NamespaceRequestStatusChoices.COMMITTED, "belvedere", namespace.status_message)
        return namespace
    namespace.status_checked = now
    try:
        apps = [client.application(name, project) for name, project in applications_of(namespace)]
    except ArgoUnavailable as exc:
        _apply(namespace, status_rules.argo_unreachable(known, str(exc)), "argocd")
        return namespace
    summary = summarise(apps)
    namespace.sync_status, namespace.health_status = worst(apps)
    namespace.status_detail = {**(namespace.status_detail or {}), "apps": summary.apps}
    if namespace.state in (ManagedNamespaceStateChoices.TEARING_DOWN, ManagedNamespaceStateChoices.FROZEN):
        namespace.status_message = summary.message[:1000]
        namespace.status_detail.pop("remark", None)
        namespace.save()
        return namespace
    outcome = status_rules.from_argo(known, summary.state, summary.message, now)
    _apply(namespace, outcome, "argocd")
    for request in namespace.requests.filter(status__in=[NamespaceRequestStatusChoices.SYNCING, NamespaceRequestStatusChoices.COMMITTED]):
        if outcome.state == "syncing" and request.status == NamespaceRequestStatusChoices.COMMITTED:
            _move(request, NamespaceRequestStatusChoices.SYNCING, "argocd", outcome.message)
        elif outcome.state == "ready":
            _move(request, NamespaceRequestStatusChoices.READY, "argocd", outcome.message)
        elif outcome.state in ("failed", "degraded"):
            _move(request, NamespaceRequestStatusChoices.FAILED, "argocd", outcome.message)
    return namespace


# ---------------------------------------------------------------------------------------------
# Teardown: freeze, (backup), remove from git, wait for prune, verify, archive


def teardown_request(namespace: ManagedNamespace, user, *, backup: bool, reason: str, confirm: str) -> NamespaceRequest:
    """Start tearing ``namespace`` down. ``confirm`` must be the namespace's name, typed by the person."""
    if namespace.state in (ManagedNamespaceStateChoices.TEARING_DOWN, ManagedNamespaceStateChoices.ARCHIVED):
        raise NotAllowed(f"{namespace.name} is already {namespace.get_state_display()}")
    if (confirm or "").strip() != namespace.name:
        typed = (confirm or "").strip()
        raise NotAllowed(f"type the namespace's name, {namespace.name}, to confirm the teardown"
                         + (f" ('{typed[:80]}' is not it)" if typed else "") + "; nothing was torn down")
    if not reason.strip():
        raise NotAllowed("say why the namespace goes away")
    with transaction.atomic():
        request = NamespaceRequest.objects.create(kind=NamespaceRequestKindChoices.TEARDOWN, project=namespace.project, namespace=namespace,
                                                  name=namespace.name, spec=namespace.spec, requested_by=user,
                                                  message=reason.strip()[:1000])
        _event(request=request, to_state=NamespaceRequestStatusChoices.DRAFT, actor=user.get_username(), message=f"tear down: {reason.strip()}")
        _move(request, NamespaceRequestStatusChoices.APPROVED, user.get_username(), "a team member may tear down their namespace")
        namespace.backup_requested = backup
        namespace.teardown_step = ""
        _set_state(namespace, ManagedNamespaceStateChoices.TEARING_DOWN, user.get_username(), f"teardown requested ({request.number}): {reason.strip()}")
        transaction.on_commit(lambda: queue_teardown(namespace.pk))
    return request


def queue_teardown(namespace_pk: int) -> None:
    from .tasks import teardown_task

    teardown_task.delay(namespace_pk)


def teardown_advance(namespace: ManagedNamespace, *, actor: str = "belvedere", client: ArgoClient | None = None,
                     backup_done: bool = False) -> str:
    """Take the next teardown steps that can be taken now; returns the step the namespace waits at
    ("" when archived). Steps run in order and are each recorded once."""
    client = client if client is not None else argo_client()
    repo = repository()
    directory = GitOpsRepo.directory(namespace.project.slurm_account, namespace.name)
    request = namespace.requests.filter(kind=NamespaceRequestKindChoices.TEARDOWN).order_by("-created").first()
    while True:
        step = namespace.teardown_step
        done = TEARDOWN_STEPS.index(step) + 1 if step else 0
        if done >= len(TEARDOWN_STEPS):
            return ""
        following = TEARDOWN_STEPS[done]
        if following == "freeze":
            frozen = {**namespace.spec, "quota": {**(namespace.spec.get("quota") or {})}}
            manifests = render(frozen, inventory())
            for manifest in manifests:
                if manifest["kind"] == "ResourceQuota":
                    manifest["spec"]["hard"]["pods"] = "0"
                if manifest["kind"] == "Namespace":
                    manifest["metadata"]["labels"]["belvedere.io/frozen"] = "true"
            rendered = render_files(frozen, manifests)
            sha = repo.write(directory, rendered, f"{namespace.name}: freeze before teardown (no new pods)") or ""
            _record_step(namespace, "freeze", actor, "frozen: the quota allows no new pods", sha)
        elif following == "backup":
            if namespace.backup_requested and not backup_done:
                return "backup"  # a person confirms the volumes were saved
            _record_step(namespace, "backup", actor, "volumes backed up (confirmed)" if namespace.backup_requested else "no backup asked for")
        elif following == "remove":
            sha = repo.remove(directory, f"{namespace.name}: remove (teardown {request.number if request else ''})".strip()) or ""
            _record_step(namespace, "remove", actor, "removed from the GitOps repository; Argo CD prunes what it created", sha)
        elif following in ("prune", "verify"):
            if client is None:
                _record_step(namespace, following, actor, "not verifiable: no Argo CD configured")
                continue
            try:
                remaining = [name for name, project in applications_of(namespace) if not client.application(name, project).missing]
            except ArgoUnavailable as exc:
                namespace.status_message = f"waiting to {following}: {exc}"
                namespace.save()
                return following
            if remaining:
                namespace.status_message = f"waiting for Argo CD to prune {', '.join(remaining)}"
                namespace.save()
                return following
            _record_step(namespace, following, actor, "Argo CD has no application left" if following == "prune" else
                         "verified: nothing of the namespace is left in Argo CD")
        elif following == "archive":
            _record_step(namespace, "archive", actor, "archived")
            namespace.archived = timezone.now()
            namespace.status_message = "torn down and archived"
            _set_state(namespace, ManagedNamespaceStateChoices.ARCHIVED, actor, "archived after teardown")
            if request:
                _move(request, NamespaceRequestStatusChoices.READY, actor, "torn down and archived")
            return ""


def _record_step(namespace: ManagedNamespace, step: str, actor: str, message: str, commit: str = "") -> None:
    _event(namespace=namespace, from_state=namespace.teardown_step or ManagedNamespaceStateChoices.TEARING_DOWN, to_state=step, actor=actor, message=message,
           commit=commit)
    namespace.teardown_step = step
    if commit:
        namespace.commit = commit
    namespace.save()


def allocated_now(exclude: ManagedNamespace | None = None) -> Usage:
    """What every live namespace holds (for the capacity left on the cluster); a change of ``exclude``
    may use what that namespace holds already."""
    total = Usage()
    for namespace in _live(exclude=exclude):
        total = total + usage_of(namespace.spec)
    return total
