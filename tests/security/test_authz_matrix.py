"""The authorization matrix (issue 16, acceptance 2), generated from the URL patterns.

Every pattern of ``portal.urls`` -- pages, ``/api/v1/``, downloads, the Dash explorer, the admin --
is requested by seven identities: anonymous, the owner of the objects, a member of the owner's
project (same Slurm account), a user of another project, staff, the job's own job token and another
job's token. Path arguments are filled from one world of objects through ``KWARGS``, a table keyed
by the argument's name; a pattern with an argument the table cannot fill fails
(``test_every_path_argument_can_be_filled``), so a new endpoint is covered as soon as it exists.

What is checked, for every pattern and identity:

* no answer is a 5xx;
* anonymous callers get 401/403 or a redirect to a login page (unless the pattern is ``PUBLIC``);
* an identity that may not see the object (``SEES``) gets exactly what it gets for an object that
  does not exist (same status, same ``detail``): existence is never revealed, and never a 2xx;
* write methods (POST, PUT, PATCH, DELETE with an empty body) never succeed for identities without
  the right to change the object (``WRITES``), nor for anonymous callers;
* the secret markers of the owner's objects (job name and id, EDF name, namespace name) appear in
  no answer, list or page given to an identity that may not see them.

Known failures in code other helpers own are listed in ``KNOWN_PROBLEMS`` and marked
``xfail(strict=True)``: when one is fixed its test passes, the strict xfail fails, and the entry
must be removed.
"""
import re
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone
from django.utils.regex_helper import normalize

# ---------------------------------------------------------------------------------------------
# Known problems in code this test's author does not own: route -> what is wrong. Remove an entry
# when it is fixed (the strict xfail then fails to remind you).
# ---------------------------------------------------------------------------------------------
KNOWN_PROBLEMS: dict[str, str] = {}

IDENTITIES = ["anonymous", "owner", "member", "other", "staff", "own_job_token", "other_job_token"]
PEOPLE = {"owner", "member", "other", "staff"}
TOKENS = {"own_job_token", "other_job_token"}

JOB_ID, MISSING_JOB_ID, OTHER_JOB_ID = 918273645, 918273699, 918273612
JOB_NAME = "zzsecret-olive-job"
EDF_NAME = "zzsecret-olive-edf"
CAMPAIGN_NAME = "zzsecret-olive-campaign"
SECOND_JOB_ID = 7700001  # the campaign's other job: the job token sees one of its two jobs, so not the campaign
NAMESPACE = "a-llm01-zzsecret"
# What an identity that may not see the owner's objects must never read anywhere.
MARKERS = {"job": [JOB_NAME, str(JOB_ID)], "edf": [EDF_NAME], "namespace": [NAMESPACE], "campaign": [CAMPAIGN_NAME]}

# Who may see an object of each kind (an identity outside the set must be told it does not exist).
SEES = {
    "job": {"owner", "member", "staff", "own_job_token"},
    "edf": {"owner", "member", "staff"},  # shared with the owner's project
    "namespace": {"owner", "member", "staff"},
    "project": {"owner", "member", "staff"},
    "run": PEOPLE | {"own_job_token"},  # node vetting is a fact about the machine; a token reads its job's runs
    "machine": PEOPLE,  # topology, node health, rules, catalogue: every signed-in person
    "admin": {"staff"},
    "triage": {"staff"},  # the staff triage inbox
    "campaign": {"owner", "member", "staff"},  # whoever sees every job of it (the job's token sees one of two)
    "node": {"owner", "member", "staff"},  # a node's history: staff and whoever sees a job that ran on it, no token
}
# Who may change an object of each kind.
WRITES = {
    "job": {"owner", "staff", "own_job_token"},
    "edf": {"owner"},
    "namespace": {"owner", "member", "staff"},
    "project": {"staff"},
    "run": {"staff"},
    "machine": {"staff"},
    "admin": {"staff"},
    "triage": {"staff"},
    "campaign": {"owner", "staff"},
    "node": {"staff"},
}
# Patterns anyone may request without logging in (by route name).
PUBLIC = {"accounts:login", "accounts:logout", "healthz", "demo-build", "api-schema", "api-docs", "api-redoc", "edf:schema",
          "accounts-api:token", "api-root", "admin:login", "admin:logout"}
# Patterns not requested, with the reason.
EXCLUDED = {"readyz": "waits for a worker's answer to a ping (503 by design without one); tests/core/test_health covers it"}
WRITE_METHODS = ("post", "put", "patch", "delete")
# Each test runs in a savepoint inside the module's world (pytest-django rolls it back).
pytestmark = pytest.mark.django_db


# ---------------------------------------------------------------------------------------------
# The patterns
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Pattern:
    route: str  # the pattern as written, e.g. "api/v1/jobs/<slug:cluster>/<int:job_id>/"
    name: str  # namespace:name, or the route when unnamed
    regex: str
    kwargs: tuple[str, ...]

    @property
    def is_admin(self) -> bool:
        return self.route.startswith("admin/")

    @property
    def is_api(self) -> bool:
        return self.route.startswith("api/")


def _walk(resolver, prefix="", regex="^", namespace=""):
    for entry in resolver.url_patterns:
        part = entry.pattern.regex.pattern.lstrip("^")
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _walk(entry, prefix + str(entry.pattern), regex + part.rstrip("$"), inner)
        elif isinstance(entry, URLPattern):
            route = prefix + str(entry.pattern)
            name = f"{namespace}{entry.name}" if entry.name else route
            full = regex + part
            params = normalize(full)[0][1]
            yield Pattern(route=route, name=name, regex=full, kwargs=tuple(params))


PATTERNS = [p for p in _walk(get_resolver()) if p.name not in EXCLUDED]


# ---------------------------------------------------------------------------------------------
# Filling path arguments: a table keyed by the argument's name
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fill:
    value: object
    missing: object = None  # a value naming nothing (None: this argument is not what is looked up)
    kind: str | None = None
    also: tuple = ()  # more values whose answers are read for leaks (objects everyone sees, tied to jobs)


def _by_route(choices):
    """An argument whose meaning depends on where it appears: the first route prefix that matches."""
    def fill(world, pattern):
        for prefix, make in choices:
            if pattern.route.startswith(prefix):
                return make(world)
        return None
    return fill


def _triage_item(w):
    """A triage item about the owner's job (made on first use, inside the test's savepoint)."""
    from apps.triage.models import TriageItem

    now = timezone.now()
    item, _ = TriageItem.objects.get_or_create(
        key=f"straggler:alps/{JOB_ID}", defaults={"kind": "straggler", "title": f"stragglers in {JOB_NAME}", "owner": "olive",
                                                 "job": w["job"], "first_seen": now, "last_seen": now})
    return item


def _catalog_incident(w=None):
    """An open incident of a catalogue product (made on first use)."""
    from apps.catalog.models import DataProduct, Incident

    incident, _ = Incident.objects.get_or_create(
        product=DataProduct.objects.get(name="saturation-scores"), kind="freshness", closed=None,
        defaults={"opened": timezone.now(), "message": "no score for a day"})
    return incident


# Products whose members are jobs or come from them: their checks name members.
CATALOG_ALSO = ("slurm-jobs", "rank-layouts", "vetting-results")

KWARGS = {
    "cluster": lambda w, p: Fill("alps"),
    "job_id": lambda w, p: Fill(JOB_ID, MISSING_JOB_ID, "job"),
    "owner": lambda w, p: Fill("olive"),
    "account": lambda w, p: Fill("a-llm01", "zz-no-such-account", "project"),  # a project's Slurm account
    "name": _by_route([
        ("edf/", lambda w: Fill(EDF_NAME, "zz-no-such-edf", "edf")),
        ("api/v1/edf/", lambda w: Fill(EDF_NAME, "zz-no-such-edf", "edf")),
        ("namespaces/", lambda w: Fill(NAMESPACE, "a-llm01-nosuch", "namespace")),
        ("api/v1/namespaces/", lambda w: Fill(NAMESPACE, "a-llm01-nosuch", "namespace")),
        ("catalog/", lambda w: Fill("saturation-scores", "no-such-product", "machine", CATALOG_ALSO)),
        ("api/v1/catalog/", lambda w: Fill("saturation-scores", "no-such-product", "machine", CATALOG_ALSO)),
        ("jobs/", lambda w: Fill("map")),  # a job-page panel's figure: the job is what is looked up
    ]),
    "panel": lambda w, p: Fill("allocation"),
    "number": _by_route([
        ("edf/", lambda w: Fill(1)),
        ("topology/groups/", lambda w: Fill(0, 999, "machine")),
    ]),
    "pk": _by_route([
        ("vetting/runs/", lambda w: Fill(w["run"].pk, w["run"].pk + 1000, "run")),
        ("api/v1/vetting/runs/", lambda w: Fill(w["run"].pk, w["run"].pk + 1000, "run")),
        ("namespaces/requests/", lambda w: Fill(w["request"].pk, w["request"].pk + 1000, "namespace")),
        ("api/v1/namespaces/requests/", lambda w: Fill(w["request"].pk, w["request"].pk + 1000, "namespace")),
        ("api/v1/vetting/recommendations/", lambda w: Fill(w["recommendation"].pk, w["recommendation"].pk + 1000, "machine")),
        ("api/v1/^projects/", lambda w: Fill(w["project"].pk, w["project"].pk + 1000, "project")),
        ("staff/triage/", lambda w: Fill(_triage_item(w).pk, _triage_item(w).pk + 1000, "triage")),
        ("api/v1/staff/triage/", lambda w: Fill(_triage_item(w).pk, _triage_item(w).pk + 1000, "triage")),
        ("api/v1/catalog/incidents/", lambda w: Fill(_catalog_incident(w).pk, _catalog_incident(w).pk + 1000, "machine")),
        ("campaigns/", lambda w: Fill(w["campaign"].pk, w["campaign"].pk + 1000, "campaign")),
        ("api/v1/campaigns/", lambda w: Fill(w["campaign"].pk, w["campaign"].pk + 1000, "campaign")),
    ]),
    "host": _by_route([  # a node's history (issue 39) spans the jobs that ran there: who may see one of them sees it
        ("nodes/", lambda w: Fill("nid001234", "nid999999", "node")),
        ("api/v1/nodes/<str:host>/history/", lambda w: Fill("nid001234", "nid999999", "node")),
        ("", lambda w: Fill("nid001234", "nid999999", "machine")),
    ]),
    "hostname": lambda w, p: Fill("nid001234", "nid999999", "machine"),
    "slug": lambda w, p: Fill(w["rule"].slug, "no-such-rule", "machine"),
    "table": lambda w, p: Fill("gpus"),
    "extension": lambda w, p: Fill("csv"),
    # The Dash explorer's own routes (layout, dependencies, callbacks) under catalog/explorer/app/.
    "path": lambda w, p: Fill("_dash-layout") if p.route.startswith("catalog/explorer/app/") else None,
    # The admin's.
    "app_label": lambda w, p: Fill("accounts"),
    "object_id": lambda w, p: Fill(w["job"].pk, w["job"].pk + 1000, "admin"),
    "content_type_id": lambda w, p: Fill(w["job_content_type"]),
    "id": lambda w, p: Fill(w["users"]["owner"].pk, w["users"]["owner"].pk + 1000, "admin") if p.is_admin else None,
    "url": lambda w, p: Fill("zz-nothing/"),
}


def fill(pattern: Pattern, world) -> tuple[dict, dict | None, str | None, list[str], list[dict]]:
    """(kwargs for the owner's object, kwargs for a missing one or None, the object's kind, unfillable names,
    kwargs of more objects to read for leaks)."""
    target, missing, kinds, unfillable, also = {}, {}, [], [], []
    for name in pattern.kwargs:
        maker = KWARGS.get(name)
        filled = maker(world, pattern) if maker else None
        if filled is None:
            unfillable.append(name)
            continue
        target[name] = filled.value
        also.extend((name, value) for value in filled.also)
        missing[name] = filled.missing if filled.missing is not None else filled.value
        if filled.kind:
            kinds.append(filled.kind)
    if pattern.is_admin:
        kinds = ["admin"]
    kind = kinds[0] if kinds else None
    return target, (missing if missing != target else None), kind, unfillable, [{**target, n: v} for n, v in also]


def path_of(pattern: Pattern, kwargs: dict) -> str:
    template, params = normalize(pattern.regex)[0]
    path = "/" + template % {name: kwargs[name] for name in params}
    match = resolve(path)  # the path must lead back to the same pattern
    assert match.route.rstrip("$") == pattern.route.rstrip("$").replace("^", "") or match.url_name == pattern.name.rsplit(":", 1)[-1], (
        f"{path} resolves to {match.route}, not {pattern.route}")
    return path


# ---------------------------------------------------------------------------------------------
# The world: built once for the module inside a transaction that is rolled back at the end;
# every test runs in a savepoint of its own (the django_db mark).
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            yield _build_world()
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def _build_world() -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.contenttypes.models import ContentType
    from django.core.management import call_command

    from apps.accounts.models import Membership, Project
    from apps.catalog.services import load_catalog
    from apps.edf.services import edf_create, edf_share
    from apps.jobs.models import Cluster, Job, JobToken, node_search_text
    from apps.namespaces.models import ManagedNamespace, NamespaceRequest
    from apps.saturation.models import JobSaturation
    from apps.vetting.models import Recommendation, VettingRun
    from apps.vetting.services import rules_ensure_built_in
    from tests.namespaces.conftest import typical

    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    users = {}
    for role, username, accounts, staff in [("owner", "olive", ["a-llm01"], False), ("member", "mia", ["a-llm01"], False),
                                            ("other", "oscar", ["a-moe02"], False), ("staff", "sam", [], True)]:
        user = get_user_model().objects.create_user(username=username, password="pw-for-tests-1", is_staff=staff)
        for account in accounts:
            project, _ = Project.objects.get_or_create(slurm_account=account, defaults={"title": f"Project {account}"})
            Membership.objects.create(user=user, project=project)
        users[role] = user
    project = Project.objects.get(slurm_account="a-llm01")
    now = timezone.now()
    start = now - timedelta(minutes=30)
    nodes = ["nid001234", "nid001235"]
    cluster = Cluster.objects.create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=JOB_ID, name=JOB_NAME, user_name="olive", account="a-llm01", state="RUNNING",
                             submit_time=start, start_time=start, nodes="nid[001234-001235]", node_list=nodes, node_count=2,
                             node_search=node_search_text(nodes))
    elsewhere = Job.objects.create(cluster=cluster, job_id=OTHER_JOB_ID, name="oscar-job", user_name="oscar", account="a-moe02",
                                   state="RUNNING", submit_time=start, start_time=start)
    _, own_key = JobToken.issue(job)
    _, other_key = JobToken.issue(elsewhere)
    JobSaturation.objects.create(job=job, status="ready", score=50.0, computed=now)
    document = edf_create(users["owner"], name=EDF_NAME, text='image = "nvcr.io#nvidia/pytorch:24.01-py3"\n')
    edf_share(users["owner"], document, ["a-llm01"])
    spec = {**typical(), "name": NAMESPACE.removeprefix("a-llm01-")}
    namespace = ManagedNamespace.objects.create(name=NAMESPACE, project=project, environment="dev", spec=spec, state="ready")
    request = NamespaceRequest.objects.create(kind="create", project=project, namespace=namespace, name=NAMESPACE, spec=spec,
                                              status="ready", requested_by=users["owner"])
    run = VettingRun.objects.create(cluster=cluster, job=job, job_id_number=JOB_ID, source="api", started=start,
                                    submitter="olive", user_name="olive", account="a-llm01", hosts=2)
    rules_ensure_built_in()
    from apps.vetting.models import Rule

    rule = Rule.objects.order_by("slug").first()
    recommendation = Recommendation.objects.create(rule=rule, rule_version=1, subject_kind="node", subject="nid001234",
                                                   hosts=["nid001234"], action="drain", severity="warning", summary="test")
    from apps.campaigns.services import campaign_create_manual

    second = Job.objects.create(cluster=cluster, job_id=SECOND_JOB_ID, name="olive-chain-2", user_name="olive", account="a-llm01",
                                state="COMPLETED", submit_time=start - timedelta(hours=3), start_time=start - timedelta(hours=3),
                                end_time=start - timedelta(hours=1))
    campaign = campaign_create_manual(name=CAMPAIGN_NAME, jobs=[second, job])
    load_catalog()
    # Measured once, so product pages and answers carry what the checks saw (members, stalest ones).
    from apps.catalog.models import DataProduct
    from apps.catalog.services import run_checks

    for product in DataProduct.objects.filter(name__in=["saturation-scores", "slurm-jobs", "rank-layouts", "vetting-results"]):
        run_checks(product)
    return {"users": users, "keys": {"own_job_token": own_key, "other_job_token": other_key}, "job": job, "run": run,
            "request": request, "namespace": namespace, "project": project, "rule": rule, "recommendation": recommendation,
            "document": document, "campaign": campaign, "job_content_type": ContentType.objects.get_for_model(Job).pk}


# ---------------------------------------------------------------------------------------------
# Asking
# ---------------------------------------------------------------------------------------------
def client_for(identity: str, world):
    from django.test import Client

    client = Client(raise_request_exception=False)
    if identity in world["users"]:
        client.force_login(world["users"][identity])
    elif identity in world["keys"]:
        client.defaults["HTTP_AUTHORIZATION"] = f"JobToken {world['keys'][identity]}"
    return client


def ask(client, method: str, path: str):
    if method == "get":
        return client.get(path)
    return getattr(client, method)(path, data=b"", content_type="application/json")


def detail(response) -> str:
    if "json" not in response.get("Content-Type", ""):
        return ""
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get("detail", "")) if isinstance(body, dict) else ""


def to_login(response) -> bool:
    return response.status_code == 302 and re.match(r"^/(accounts|admin)/login/", response.get("Location", "")) is not None


def refused_anonymously(response) -> bool:
    return response.status_code in (401, 403) or to_login(response)


def success(response) -> bool:
    return 200 <= response.status_code < 300 or (300 <= response.status_code < 400 and not to_login(response))


def _marked(pattern: Pattern):
    reason = KNOWN_PROBLEMS.get(pattern.name) or KNOWN_PROBLEMS.get(pattern.route)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(pattern, id=pattern.name, marks=marks)


def test_every_path_argument_can_be_filled(world):
    unfillable = {p.route: fill(p, world)[3] for p in PATTERNS if fill(p, world)[3]}
    assert not unfillable, f"add these path arguments to KWARGS so the matrix covers the new endpoints: {unfillable}"


def test_the_matrix_covers_every_kind_of_endpoint():
    routes = [p.route for p in PATTERNS]
    for needle in ("api/v1/jobs/<slug:cluster>/<int:job_id>/", "jobs/<slug:cluster>/<int:job_id>/", "/download/",
                   "catalog/explorer/app/<path:path>", "<slug:table>.<slug:extension>", "admin/"):
        assert any(needle in route for route in routes), needle
    assert len(PATTERNS) > 100


@pytest.mark.parametrize("pattern", [_marked(p) for p in PATTERNS])
def test_pattern(pattern: Pattern, world):
    target_kwargs, missing_kwargs, kind, unfillable, also = fill(pattern, world)
    if unfillable:
        pytest.fail(f"{pattern.route}: no way to fill {unfillable} (see test_every_path_argument_can_be_filled)")
    extra = [path_of(pattern, kwargs) for kwargs in also]
    target = path_of(pattern, target_kwargs)
    missing = path_of(pattern, missing_kwargs) if missing_kwargs else None
    sees = SEES.get(kind, PEOPLE)
    writes = WRITES.get(kind, PEOPLE | {"own_job_token"} if pattern.is_api else PEOPLE)
    problems = []
    identities = ["anonymous", "member", "other_job_token", "staff"] if pattern.is_admin else IDENTITIES
    methods = ("get", "post") if pattern.is_admin else ("get", *WRITE_METHODS)
    for identity in identities:
        client = client_for(identity, world)
        for method in methods:
            response = ask(client, method, target)
            where = f"{method.upper()} {target} as {identity}: {response.status_code}"
            if response.status_code >= 500:
                problems.append(f"{where} (server error)")
                continue
            if identity == "anonymous" and pattern.name not in PUBLIC:
                if not refused_anonymously(response) and not (method != "get" and response.status_code == 405):
                    problems.append(f"{where} (anonymous not refused)")
                continue
            if kind is not None and identity not in sees and missing is not None:
                other = ask(client_for(identity, world), method, missing)
                if success(response):
                    problems.append(f"{where} (may not see it, got it)")
                elif (response.status_code, detail(response).replace(str(target_kwargs), "")) != (
                        other.status_code, detail(other).replace(str(missing_kwargs), "")):
                    problems.append(f"{where} but {other.status_code} for a missing one "
                                    f"({detail(response)!r} vs {detail(other)!r}): existence revealed")
            if method != "get" and kind is not None and identity not in writes and success(response) and pattern.name not in PUBLIC:
                problems.append(f"{where} (wrote without the right to)")
            if method == "get":
                for answer, path in [(response, target)] + [(ask(client, "get", path), path) for path in extra]:
                    if answer.status_code >= 500:
                        problems.append(f"GET {path} as {identity}: {answer.status_code} (server error)")
                    elif success(answer):
                        problems.extend(leaks(answer, identity, f"GET {path} as {identity}: {answer.status_code}"))
    assert not problems, "\n".join(problems)


def leaks(response, identity: str, where: str) -> list[str]:
    body = response.content.decode(errors="replace")
    return [f"{where} shows {marker!r} of a {marker_kind} it may not see"
            for marker_kind, markers in MARKERS.items() if identity not in SEES[marker_kind]
            for marker in markers if marker in body]
