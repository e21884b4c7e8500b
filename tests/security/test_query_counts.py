"""Query counts of every page and API answer a GET reaches (issue 22, acceptance 3), generated from the URL patterns.

Every pattern of ``portal.urls`` that answers GET (of the admin: the list and change pages of this project's
models; less ``EXCLUDED``) is requested by two identities, the owner of the objects (a member of every
project, not staff) and staff, twice: once in a small world (one object of each kind: jobs, their nodes, steps and tokens, vetting runs and results,
recommendations, rule versions, node health, EDFs and their versions and shares, namespaces, requests and
their events, projects and members, catalogue checks, task runs ...) and again after ``GROW`` more of each
kind have been added, with the same objects named in the path (the target job then also runs on more
nodes). Everything is built through the apps' services (``run_store``, ``edf_create``, ``layout_set``,
``run_checks`` ...) or the ORM, as the authorization matrix's world is: nothing is mocked.

For every pattern:

* no answer is a 5xx;
* the number of queries does not grow with the world (an N+1 adds at least ``GROW`` queries);
* the number of queries stays within the bound recorded for the pattern in ``query_counts.toml``
  (the larger of the two identities', in the larger world), NetBox-style: a change that makes a
  page do more work fails here until the table says so;
* every pattern that answers GET has an entry there (``test_every_pattern_has_a_bound``), so a new
  endpoint is counted as soon as it exists. A pattern whose work legitimately grows with the rows
  is listed under ``[scales]`` with the reason; its growth is allowed, its bound still holds.

``BELVEDERE_WRITE_QUERY_COUNTS=1 pytest tests/security/test_query_counts.py`` rewrites the bounds from
what was measured (keeping the ``[scales]`` reasons); review the diff before committing it.
"""
import os
import shutil
import tomllib
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import get_resolver, resolve
from django.utils import timezone

from tests.security.test_authz_matrix import Pattern, _walk, path_of

COUNTS_FILE = Path(__file__).with_name("query_counts.toml")
GROW = 4  # objects of each kind added between the small and the large world
IDENTITIES = ("owner", "staff")
JOB_ID = 818273645
EDF_NAME = "qc-edf"
NAMESPACE = "a-llm01-qcspace"
SMALL_NODES = ["nid001234", "nid001235"]
LARGE_NODES = [f"nid0012{n}" for n in range(34, 42)]  # the target job's nodes in the large world
# Patterns not counted, with the reason.
EXCLUDED = {
    "readyz": "waits for a worker's answer to a ping (503 by design without one); tests/core/test_health covers it",
}
# All the work is in the module's world, measured once: under xdist its tests stay on one worker.
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("query-counts")]


def _project_admin_models() -> dict[str, type]:
    """The admin's list and change pages of this project's models (apps.*), by route name. The rest of the admin
    (its index, add, delete and history pages, and the admins of Django and the libraries) is not counted."""
    from django.contrib import admin

    pages = {}
    for model in admin.site._registry:
        if model.__module__.startswith("apps."):
            for action in ("changelist", "change"):
                pages[f"admin:{model._meta.app_label}_{model._meta.model_name}_{action}"] = model
    return pages


ADMIN_PAGES = _project_admin_models()


def _counted(pattern: Pattern) -> bool:
    return (not pattern.is_admin or pattern.name in ADMIN_PAGES) and pattern.name not in EXCLUDED


PATTERNS = [p for p in _walk(get_resolver()) if _counted(p)]


def read_counts() -> tuple[dict[str, int], dict[str, str]]:
    table = tomllib.loads(COUNTS_FILE.read_text()) if COUNTS_FILE.exists() else {}
    scales = table.pop("scales", {})
    return {name: value for name, value in table.items() if isinstance(value, int)}, scales


BOUNDS, SCALES = read_counts()


# ---------------------------------------------------------------------------------------------
# Path arguments, as in the authorization matrix: keyed by the argument's name (and the route's start)
# ---------------------------------------------------------------------------------------------
def _by_route(choices):
    def fill(world, pattern):
        for prefix, value in choices:
            if pattern.route.startswith(prefix):
                return value(world)
        return None
    return fill


KWARGS = {
    "cluster": lambda w, p: "alps",
    "job_id": lambda w, p: JOB_ID,
    "owner": lambda w, p: "olive",
    "account": lambda w, p: "a-llm01",  # a project's Slurm account (notifications' opt-ins)
    "name": _by_route([
        ("edf/", lambda w: EDF_NAME), ("api/v1/edf/", lambda w: EDF_NAME),
        ("namespaces/", lambda w: NAMESPACE), ("api/v1/namespaces/", lambda w: NAMESPACE),
        ("catalog/", lambda w: "slurm-jobs"), ("api/v1/catalog/", lambda w: "slurm-jobs"),
        ("jobs/", lambda w: "map"),
    ]),
    "panel": lambda w, p: "allocation",
    "number": _by_route([("edf/", lambda w: 1), ("topology/groups/", lambda w: w["group"])]),
    "pk": _by_route([
        ("vetting/runs/", lambda w: w["run"].pk), ("api/v1/vetting/runs/", lambda w: w["run"].pk),
        ("namespaces/requests/", lambda w: w["request"].pk), ("api/v1/namespaces/requests/", lambda w: w["request"].pk),
        ("api/v1/vetting/recommendations/", lambda w: w["recommendation"].pk),
        ("api/v1/^projects/", lambda w: w["project"].pk),
        ("staff/triage/", lambda w: w["triage"].pk), ("api/v1/staff/triage/", lambda w: w["triage"].pk),
        ("api/v1/catalog/incidents/", lambda w: _catalog_incident(w).pk),
        ("campaigns/", lambda w: w["campaign"].pk), ("api/v1/campaigns/", lambda w: w["campaign"].pk),
    ]),
    "host": lambda w, p: SMALL_NODES[0],
    "hostname": lambda w, p: SMALL_NODES[0],
    "slug": lambda w, p: w["rule"].slug,
    "table": lambda w, p: "gpus",
    "extension": lambda w, p: "csv",
    "path": lambda w, p: "_dash-layout" if p.route.startswith("catalog/explorer/app/") else None,
    # An admin change page: the model's first object.
    "object_id": lambda w, p: getattr(ADMIN_PAGES[p.name].objects.order_by("pk").first(), "pk", None) if p.name in ADMIN_PAGES else None,
}


# Query strings a pattern needs to answer with data (the same in both worlds).
QUERIES = {
    "telemetry-api:series": f"?job=alps/{JOB_ID}&field=155",
}


def path_for(pattern: Pattern, world) -> str | None:
    kwargs = {}
    for name in pattern.kwargs:
        value = KWARGS[name](world, pattern) if name in KWARGS else None
        if value is None:
            return None
        kwargs[name] = value
    return path_of(pattern, kwargs) + QUERIES.get(pattern.name, "")


# ---------------------------------------------------------------------------------------------
# The world: small, then grown
# ---------------------------------------------------------------------------------------------
def _build_small() -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.core.management import call_command

    from apps.accounts.models import Membership, Project
    from apps.catalog.services import load_catalog
    from apps.namespaces.models import TeamEnvelope
    from apps.jobs.models import Cluster
    from apps.topology.models import Node
    from apps.vetting.models import Rule
    from apps.vetting.services import rules_ensure_built_in

    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    rules_ensure_built_in()
    load_catalog()
    users = {"owner": get_user_model().objects.create_user(username="olive", password="pw-for-tests-1"),
             "staff": get_user_model().objects.create_user(username="sam", password="pw-for-tests-1", is_staff=True)}
    # Staff may view this project's models in the admin.
    users["staff"].user_permissions.set(Permission.objects.filter(
        codename__startswith="view_", content_type__model__in=[model._meta.model_name for model in ADMIN_PAGES.values()]))
    project = Project.objects.create(slurm_account="a-llm01", title="Project a-llm01")
    Membership.objects.create(user=users["owner"], project=project)
    TeamEnvelope.objects.create(project=project, cpu="64", memory="256Gi").approvers.add(users["staff"])
    world = {"users": users, "project": project, "cluster": Cluster.objects.create(name="alps"),
             "rule": Rule.objects.order_by("slug").first(), "group": Node.objects.get(hostname=SMALL_NODES[0]).group.number}
    world["job"] = _job(world, JOB_ID, SMALL_NODES, "RUNNING", products=False)
    _telemetry(world["job"], SMALL_NODES)
    world["document"] = _edf(world, EDF_NAME)
    world["namespace"], world["request"] = _namespace(world, NAMESPACE)
    world["run"] = _vetting_run(world, world["job"], SMALL_NODES)
    world["recommendation"] = _recommendation(world, SMALL_NODES[0])
    world["triage"] = _triage_item(world["job"], "straggler")
    from apps.campaigns.services import campaign_create_manual

    world["campaign"] = campaign_create_manual(name="olive-campaign", jobs=[world["job"]])
    _more(world, 0)
    return world


def _grow(world: dict) -> None:
    """GROW more objects of every kind; the target job runs on more nodes."""
    from apps.jobs.models import node_search_text
    from apps.ranks.services import layout_set

    job = world["job"]
    job.node_list, job.node_count, job.nodes = LARGE_NODES, len(LARGE_NODES), f"nid[001234-0012{33 + len(LARGE_NODES)}]"
    job.node_search = node_search_text(LARGE_NODES)
    job.save()
    layout_set(job, {"tp": 4, "pp": 1}, source="api", submitted_by="olive")
    _telemetry(job, LARGE_NODES[len(SMALL_NODES):])
    for index in range(1, GROW + 1):
        _more(world, index)


def _triage_item(job, kind: str):
    """An item of the staff triage inbox about ``job``."""
    from apps.triage.models import TriageItem

    now = timezone.now()
    return TriageItem.objects.create(key=f"{kind}:{job.cluster.name}/{job.job_id}", kind=kind, title=f"{kind} in {job.job_id}",
                                     owner=job.user_name, job=job, first_seen=now, last_seen=now, gpu_hours_lost=1.0)


def _catalog_incident(w=None):
    """An open incident of a catalogue product (made on first use)."""
    from apps.catalog.models import DataProduct, Incident

    incident, _ = Incident.objects.get_or_create(
        product=DataProduct.objects.get(name="saturation-scores"), kind="freshness", closed=None,
        defaults={"opened": timezone.now(), "message": "no score for a day"})
    return incident


def _more(world: dict, index: int) -> None:
    """One more object of each kind, and one more row of each kind related to the target objects."""
    from django.contrib.auth import get_user_model

    from apps.accounts.models import Membership, Project
    from apps.catalog.models import DataProduct
    from apps.catalog.services import run_checks
    from apps.core.models import Heartbeat, TaskRun
    from apps.edf.services import edf_share, edf_update
    from apps.jobs.models import JobStep, JobToken
    from apps.namespaces.models import RequestEvent, TeamEnvelope
    from apps.vetting.models import NodeHealth, NodeHealthEvent
    from apps.vetting.services import rule_save

    now = timezone.now()
    owner, job = world["users"]["owner"], world["job"]
    # People and projects: the owner is in one more project, the target project has one more member.
    member = get_user_model().objects.create_user(username=f"member{index}", password="pw-for-tests-1")
    Membership.objects.create(user=member, project=world["project"])
    project = Project.objects.create(slurm_account=f"a-more{index:02d}", title=f"Project {index}")
    Membership.objects.create(user=owner, project=project)
    TeamEnvelope.objects.create(project=project, cpu="16").approvers.add(world["users"]["staff"], member)
    # Jobs: one more running and one more finished job, on nodes of their own; the target job has one more step and token.
    hosts = [f"nid0013{2 * index:02d}", f"nid0013{2 * index + 1:02d}"]
    other = _job(world, JOB_ID + 100 + index, hosts, "RUNNING", account=project.slurm_account)
    finished = _job(world, JOB_ID + 200 + index, hosts, "COMPLETED")
    from apps.campaigns.models import CampaignJob

    CampaignJob.objects.create(job=finished, campaign=world["campaign"], pinned=True)  # the campaign grows by a job
    _triage_item(other, "wasteful_job")
    JobStep.objects.create(job=job, step_id=str(index), name=f"step {index}", nodes=job.nodes, tasks=4, state="RUNNING",
                           start_time=job.start_time)
    JobToken.issue(job, created_by="olive")
    # Vetting: a run of the other job and one more of the target job, one more recommendation, health events.
    _vetting_run(world, other, hosts)
    _vetting_run(world, job, job.node_list)
    _recommendation(world, hosts[0])
    NodeHealth.objects.get_or_create(host=hosts[0], defaults={"since": now, "state": "suspect", "reason": "test"})
    NodeHealthEvent.objects.create(host=job.node_list[0], from_state="healthy", to_state="suspect", action="rule",
                                   actor="rule:test v1", reason=f"event {index}")
    rule = world["rule"]
    rule_save(rule, {"name": rule.name, "description": f"{rule.description} ({index})", "kind": rule.kind,
                     "params": rule.params, "action": rule.action, "severity": rule.severity, "enabled": rule.enabled},
              user="sam", comment=f"change {index}")
    # EDFs: one more document, one more version of the target, shared with one more project.
    _edf(world, f"{EDF_NAME}-{index}")
    edf_update(owner, world["document"], text=f'image = "nvcr.io#nvidia/pytorch:24.0{index}-py3"\n', note=f"v{index}")
    edf_share(owner, world["document"], sorted(world["document"].shared_with.values_list("slurm_account", flat=True))
              + [project.slurm_account])
    # Namespaces: one more namespace with its request; one more event of the target request and namespace.
    _namespace(world, f"a-llm01-qcmore{index}")
    RequestEvent.objects.create(request=world["request"], from_state="submitted", to_state="approved", actor="sam",
                                message=f"event {index}")
    RequestEvent.objects.create(namespace=world["namespace"], from_state="ready", to_state="ready", actor="belvedere",
                                message=f"synced {index}")
    # The catalogue: one more round of checks of every product.
    for product in DataProduct.objects.all():
        run_checks(product)
    # The staff page: one more task run and heartbeat.
    TaskRun.objects.create(name="jobs.sync_cluster", subject=f"cluster {index}", requested_by=owner, status="succeeded",
                           started=now)
    Heartbeat.objects.create(name=f"qc heartbeat {index}", last_seen=now)


def _telemetry(job, hosts: list[str]) -> None:
    """Ten minutes of the synthetic Megatron trace from ``hosts`` in the store, then the job's telemetry product and
    saturation score built from it by the refresh services."""
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.services import job_telemetry_refresh
    from apps.telemetry.store import telemetry_store
    from apps.telemetry.synthetic_jobs import job_chunks

    store = telemetry_store()
    for chunk in job_chunks("megatron", hosts, job.start_time, 600, seed=22):
        store.write(chunk)
    assert job_telemetry_refresh(job).status == "ready"
    assert job_saturation_refresh(job).status == "ready"


def _job(world, job_id: int, nodes: list[str], state: str, account: str = "a-llm01", products: bool = True):
    from apps.jobs.models import Job, node_search_text
    from apps.saturation.models import JobSaturation

    now = timezone.now()
    start = now - timedelta(minutes=30)
    job = Job.objects.create(cluster=world["cluster"], job_id=job_id, name=f"qc-job-{job_id}", user_name="olive",
                             account=account, state=state, submit_time=start - timedelta(minutes=2), start_time=start,
                             end_time=now - timedelta(minutes=1) if state == "COMPLETED" else None,
                             nodes=",".join(nodes), node_list=nodes, node_count=len(nodes), node_search=node_search_text(nodes))
    if products:
        JobSaturation.objects.create(job=job, status="ready", score=50.0, computed=now)
    from apps.ranks.services import layout_set

    layout_set(job, {"tp": 4, "pp": 1}, source="api", submitted_by="olive")
    return job


def _edf(world, name: str):
    from apps.edf.services import edf_create, edf_share

    document = edf_create(world["users"]["owner"], name=name, text='image = "nvcr.io#nvidia/pytorch:24.01-py3"\n')
    edf_share(world["users"]["owner"], document, ["a-llm01"])
    return document


def _namespace(world, name: str):
    from apps.namespaces.models import ManagedNamespace, NamespaceRequest
    from tests.namespaces.conftest import typical

    spec = {**typical(), "name": name.removeprefix("a-llm01-")}
    namespace = ManagedNamespace.objects.create(name=name, project=world["project"], environment="dev", spec=spec, state="ready")
    request = NamespaceRequest.objects.create(kind="create", project=world["project"], namespace=namespace, name=name, spec=spec,
                                              status="ready", requested_by=world["users"]["owner"])
    return namespace, request


def _vetting_run(world, job, hosts: list[str]):
    from apps.vetting.records import Result, Run
    from apps.vetting.services import run_store

    results = [Result(host=host, eval_name="nccl internode", eval_type="vetnode.evals.nccl.NCCLEval", kind="vetnode",
                      status="SUCCESS", outcome="pass", local_rank=0, metrics={"bandwidth": "20.00 GB/s"}) for host in hosts]
    return run_store(Run(source="json", started=timezone.now() - timedelta(minutes=5), results=results),
                     cluster=world["cluster"], job=job, submitter="olive")


def _recommendation(world, host: str):
    from apps.vetting.models import Recommendation

    return Recommendation.objects.create(rule=world["rule"], rule_version=1, subject_kind="node", subject=host, hosts=[host],
                                         action="drain", severity="warning", summary=f"check {host}")


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------
@dataclass
class Answer:
    status: int
    queries: int
    sql: list[str]


def _clients(world) -> dict:
    from django.test import Client

    clients = {}
    for identity in IDENTITIES:
        clients[identity] = Client(raise_request_exception=False)
        clients[identity].force_login(world["users"][identity])
    return clients


def _clear_caches() -> None:
    from django.core.cache import caches

    for cache in caches.all():
        cache.clear()


def _measure(patterns, world, clients) -> dict:
    answers = {}
    for pattern in patterns:
        path = path_for(pattern, world)
        if path is None:
            continue
        for identity, client in clients.items():
            _clear_caches()
            with CaptureQueriesContext(connection) as queries:
                response = client.get(path)
            answers[pattern.name, identity] = Answer(response.status_code, len(queries.captured_queries),
                                                     [query["sql"] for query in queries.captured_queries])
    return answers


@pytest.fixture(scope="module")
def measured(django_db_setup, django_db_blocker, tmp_path_factory):
    """{"small"|"large": {(route name, identity): Answer}}, measured in one world inside a transaction rolled
    back at the end (with a telemetry store of its own)."""
    from django.conf import settings

    from apps.telemetry.store import reset_telemetry_stores

    backends = settings.TELEMETRY_BACKENDS
    settings.TELEMETRY_BACKENDS = {"default": {"BACKEND": "apps.telemetry.backends.embedded.EmbeddedBackend",
                                               "OPTIONS": {"path": str(tmp_path_factory.mktemp("qc-telemetry"))}}}
    reset_telemetry_stores()
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            world = _build_small()
            clients = _clients(world)
            _measure(PATTERNS, world, clients)  # warm up: process-wide caches (content types, templates, schema)
            small = _measure(PATTERNS, world, clients)
            _grow(world)
            large = _measure(PATTERNS, world, clients)
            gets = {p.name for p in PATTERNS if path_for(p, world) and answers_get(path_for(p, world))}
            yield {"small": small, "large": large, "world": world, "gets": gets}
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)
            settings.TELEMETRY_BACKENDS = backends
            reset_telemetry_stores()
            # The target job's products and score state, written beside the data folder's others.
            for leftover in Path(settings.DATA_DIR).glob(f"*/alps/{JOB_ID}*"):
                shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    if os.environ.get("BELVEDERE_WRITE_QUERY_COUNTS") == "1":
        _write_counts(small, large, gets)


def _write_counts(small: dict, large: dict, gets: set[str]) -> None:
    counts, notes = {}, {}
    for (name, identity), answer in large.items():
        if name in gets:
            counts[name] = max(counts.get(name, 0), answer.queries)
            notes.setdefault(name, []).append(f"{identity} {answer.status}: {small[name, identity].queries} -> {answer.queries}")
    lines = ["# Upper bounds of the SQL queries of one GET, per route name (tests/security/test_query_counts.py):",
             "# the larger of the owner's and staff's answer in the grown world. Rewrite with",
             "# BELVEDERE_WRITE_QUERY_COUNTS=1 after a deliberate change, and review the diff.", ""]
    lines += [f'"{name}" = {count}  # {"; ".join(notes[name])}' for name, count in sorted(counts.items())]
    lines += ["", "# Patterns whose queries legitimately grow with the rows they show, and why.", "[scales]"]
    lines += [f'"{name}" = "{reason}"' for name, reason in sorted(SCALES.items())]
    COUNTS_FILE.write_text("\n".join(lines) + "\n")


def answers_get(path: str) -> bool:
    """Whether the view behind ``path`` has a GET handler (a function view is assumed to)."""
    callback = resolve(path.split("?", 1)[0]).func
    actions = getattr(callback, "actions", None)  # a DRF viewset's routes
    if actions is not None:
        return "get" in actions
    view_class = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    return view_class is None or (hasattr(view_class, "get") and "get" in view_class.http_method_names)


def _gets(measured, name: str) -> bool:
    return name in measured["gets"]


def test_every_pattern_has_a_path_and_a_bound(measured):
    world = measured["world"]
    unfilled = [p.route for p in PATTERNS if path_for(p, world) is None]
    assert not unfilled, f"add these path arguments to KWARGS: {unfilled}"
    missing = sorted(p.name for p in PATTERNS if _gets(measured, p.name) and p.name not in BOUNDS)
    assert not missing, f"no query bound in {COUNTS_FILE.name} for {missing} (see this module's docstring)"
    stale = sorted((set(BOUNDS) | set(SCALES)) - measured["gets"])
    assert not stale, f"{COUNTS_FILE.name} names patterns that no longer exist or answer GET: {stale}"


def test_the_world_grew(measured):
    """The large world really holds more of each kind than the small one (else growth would prove nothing)."""
    from apps.edf.models import EdfVersion
    from apps.jobs.models import Job
    from apps.namespaces.models import ManagedNamespace, RequestEvent
    from apps.vetting.models import Recommendation, VettingResult, VettingRun

    world = measured["world"]
    more = 1 + GROW  # _more() ran once for the small world, GROW times more for the large one
    assert Job.objects.count() == 1 + 2 * more
    assert world["job"].node_count == len(LARGE_NODES) > len(SMALL_NODES)
    assert VettingRun.objects.filter(job=world["job"]).count() == 1 + more
    assert VettingResult.objects.count() > 4 * more
    assert Recommendation.objects.count() == 1 + more
    assert EdfVersion.objects.filter(document=world["document"]).count() == 1 + more
    assert ManagedNamespace.objects.count() == 1 + more and RequestEvent.objects.count() == 2 * more
    assert len(measured["small"]) == len(measured["large"]) > 100


def _queries_text(answer: Answer) -> str:
    return "\n".join(f"  {sql[:300]}" for sql in answer.sql)


@pytest.mark.parametrize("pattern", [pytest.param(p, id=p.name) for p in PATTERNS])
def test_pattern(pattern: Pattern, measured):
    problems = []
    for identity in IDENTITIES:
        small, large = measured["small"].get((pattern.name, identity)), measured["large"].get((pattern.name, identity))
        if small is None or large is None:
            pytest.fail(f"{pattern.route}: not requested (see test_every_pattern_has_a_path_and_a_bound)")
        where = f"GET {pattern.route} as {identity}"
        if not _gets(measured, pattern.name):  # a write-only endpoint: GET is refused, nothing to count
            if large.status not in (401, 403, 405):
                problems.append(f"{where}: {large.status}, but its view has no GET handler")
            continue
        if small.status >= 500 or large.status >= 500:
            problems.append(f"{where}: {small.status}/{large.status} (server error)")
            continue
        if large.queries > small.queries and pattern.name not in SCALES:
            problems.append(f"{where}: {small.queries} queries in the small world, {large.queries} after adding {GROW} "
                            f"of each kind (an N+1?); the large world's queries:\n{_queries_text(large)}")
        bound = BOUNDS.get(pattern.name)
        if bound is not None and large.queries > bound:
            problems.append(f"{where}: {large.queries} queries, more than the {bound} recorded in {COUNTS_FILE.name}:\n"
                            f"{_queries_text(large)}")
    assert not problems, "\n".join(problems)
