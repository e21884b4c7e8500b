"""The OpenAPI schema documents every answer (issue 16 item 13): every success body has a real schema
(no bare ``object``), every operation documents its 4xx answers, and the documentation serializers in
``apps/<app>/api/openapi.py`` match what the endpoints really send.

The last part calls each endpoint through the real view on the demo system and validates the body
against the serializer's component as drf-spectacular renders it (OpenAPI 3.0, ``nullable`` included),
so a documented shape that drifts from the code fails here before schemathesis finds it."""
import functools
import importlib
import json
from pathlib import Path

import pytest
from django.urls import path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from jsonschema import Draft7Validator
from rest_framework.test import APIClient
from rest_framework.views import APIView

METHODS = ("get", "put", "post", "patch", "delete")
WRITE_METHODS = {"put", "post", "patch", "delete"}
ERRORS_ALL = {"400", "401", "403", "404", "429"}
ERRORS_WRITE = {"409", "413", "415"}

# (method, path, status) -> the documentation serializer of that success body.
DOCUMENTED = {
    ("get", "/api/v1/catalog/products/{name}/", "200"): "catalog.CatalogProductResponse",
    ("post", "/api/v1/catalog/products/{name}/run/", "202"): "catalog.CatalogRunQueuedResponse",
    ("get", "/api/v1/jobs/{cluster}/{job_id}/layout/", "200"): "ranks.LayoutResponse",
    ("put", "/api/v1/jobs/{cluster}/{job_id}/layout/", "200"): "ranks.LayoutResponse",
    ("post", "/api/v1/jobs/{cluster}/{job_id}/layout/log/", "200"): "ranks.LayoutResponse",
    ("get", "/api/v1/jobs/{cluster}/{job_id}/saturation/", "200"): "saturation.SaturationResponse",
    ("get", "/api/v1/jobs/{cluster}/{job_id}/saturation/heatmap/", "200"): "saturation.HeatmapResponse",
    ("post", "/api/v1/jobs/{cluster}/{job_id}/token/", "201"): "jobs.JobTokenResponse",
    ("post", "/api/v1/jobs/events/", "200"): "jobs.JobEventResponse",
    ("get", "/api/v1/namespaces/{name}/", "200"): "namespaces.NamespaceResponse",
    ("post", "/api/v1/namespaces/{name}/teardown/", "202"): "namespaces.NamespaceResponse",
    ("post", "/api/v1/namespaces/{name}/teardown/backup-done/", "200"): "namespaces.NamespaceResponse",
    ("get", "/api/v1/namespaces/inventory/", "200"): "namespaces.InventoryResponse",
    ("post", "/api/v1/namespaces/requests/", "200"): "namespaces.NamespaceDryRunResponse",
    ("post", "/api/v1/namespaces/requests/", "201"): "namespaces.NamespaceRequestResponse",
    ("get", "/api/v1/namespaces/requests/{id}/", "200"): "namespaces.NamespaceRequestResponse",
    ("post", "/api/v1/namespaces/requests/{id}/approve/", "200"): "namespaces.NamespaceRequestResponse",
    ("post", "/api/v1/namespaces/requests/{id}/reject/", "200"): "namespaces.NamespaceRequestResponse",
    ("post", "/api/v1/telemetry/import/", "200"): "telemetry.IngestResponse",
    ("post", "/api/v1/telemetry/samples/", "200"): "telemetry.IngestResponse",
    ("get", "/api/v1/telemetry/series/", "200"): "telemetry.SeriesResponse",
    ("post", "/api/v1/topology/discovery/", "200"): "topology.DiscoveryResponse",
    ("post", "/api/v1/topology/placement/", "200"): "topology.PlacementResponse",
    ("post", "/api/v1/vetting/import/", "201"): "vetting.VettingRunStoredResponse",
    ("get", "/api/v1/vetting/nodes/{host}/", "200"): "vetting.VettingNodeResponse",
    ("post", "/api/v1/vetting/nodes/{host}/actions/", "200"): "vetting.VettingNodeActionResponse",
    ("post", "/api/v1/vetting/protocols/validate/", "200"): "vetting.ProtocolValidateResponse",
    ("post", "/api/v1/vetting/runs/", "201"): "vetting.VettingRunStoredResponse",
}

# Lists: the documentation serializer of one item.
DOCUMENTED_ITEMS = {
    ("get", "/api/v1/catalog/products/", "200"): "catalog.CatalogProductSummary",
    ("get", "/api/v1/catalog/products/{name}/checks/", "200"): "catalog.CatalogCheckRun",
    ("get", "/api/v1/namespaces/", "200"): "namespaces.NamespaceSummary",
    ("get", "/api/v1/namespaces/requests/", "200"): "namespaces.NamespaceRequestResponse",
}



# ---------------------------------------------------------------------------------------------
# Helpers


@functools.cache
def api_schema() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)


def operations(schema: dict):
    for route, item in schema["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield method, route, operation


def is_bare_object(schema: dict) -> bool:
    return schema.get("type") == "object" and not any(key in schema for key in ("properties", "$ref", "additionalProperties"))


def documentation_serializer(dotted: str) -> type:
    app, name = dotted.split(".")
    return getattr(importlib.import_module(f"apps.{app}.api.openapi"), name)


def component_name(serializer: type) -> str:
    name = serializer.__name__
    return name[: -len("Serializer")] if name.endswith("Serializer") and name != "Serializer" else name


def _probe_view(serializer: type) -> type:
    class Probe(APIView):
        @extend_schema(responses={200: serializer})
        def get(self, request):
            raise NotImplementedError

    return Probe


@functools.cache
def rendered(dotted: str) -> dict:
    """The serializer's component as drf-spectacular renders it, with every component it refers to."""
    serializer = documentation_serializer(dotted)
    schema = SchemaGenerator(patterns=[path("api/v1/probe/", _probe_view(serializer).as_view())]).get_schema(request=None, public=True)
    reference = schema["paths"]["/api/v1/probe/"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert reference == {"$ref": f"#/components/schemas/{component_name(serializer)}"}, reference
    return {**reference, "components": schema["components"]}


def json_schema(node):
    """OpenAPI 3.0 → JSON Schema as schemathesis reads it: ``nullable: true`` allows null whatever the rest says
    (also next to ``allOf: [$ref]``, which is how drf-spectacular writes a nullable nested serializer)."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def assert_documented(dotted: str, body) -> None:
    """``body`` matches the documentation serializer (all problems listed at once)."""
    schema = json_schema(rendered(dotted))
    problems = sorted(Draft7Validator(schema).iter_errors(body), key=lambda error: list(error.absolute_path))
    assert not problems, f"the body does not match {dotted}:\n" + "\n".join(
        f"  at {'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message[:300]}"
        + "".join(f"\n      {'/'.join(map(str, cause.absolute_path))}: {cause.message[:200]}" for cause in (error.context or [])[:4])
        for error in problems[:20])


# ---------------------------------------------------------------------------------------------
# The whole schema


def test_no_success_body_is_a_bare_object_and_every_success_but_204_has_a_body():
    found = []
    for method, route, operation in operations(api_schema()):
        for code, response in operation["responses"].items():
            if not code.startswith("2"):
                continue
            content = response.get("content")
            if not content:
                if code != "204":
                    found.append(f"{method.upper()} {route} {code}: no body documented")
                continue
            for media_type, body in content.items():
                if is_bare_object(body.get("schema", {})):
                    found.append(f"{method.upper()} {route} {code} {media_type}: a bare object")
    assert not found, "success answers without a real schema:\n" + "\n".join(found)


def test_wired_operations_use_their_documentation_serializer():
    schema = api_schema()
    wrong = []
    for (method, route, code), dotted in sorted(DOCUMENTED.items()):
        body = schema["paths"][route][method]["responses"][code]["content"]["application/json"]["schema"]
        expected = {"$ref": f"#/components/schemas/{component_name(documentation_serializer(dotted))}"}
        if body != expected:
            wrong.append(f"{method.upper()} {route} {code}: {body} instead of {expected}")
    for (method, route, code), dotted in sorted(DOCUMENTED_ITEMS.items()):  # lists: their items
        items = schema["paths"][route][method]["responses"][code]["content"]["application/json"]["schema"].get("items", {})
        expected = {"$ref": f"#/components/schemas/{component_name(documentation_serializer(dotted))}"}
        if items != expected:
            wrong.append(f"{method.upper()} {route} {code} items: {items} instead of {expected}")
    assert not wrong, "\n".join(wrong)


def test_every_operation_documents_its_4xx_answers():
    missing = []
    for method, route, operation in operations(api_schema()):
        wanted = ERRORS_ALL | (ERRORS_WRITE if method in WRITE_METHODS else set())
        absent = sorted(wanted - set(operation["responses"]))
        if absent:
            missing.append(f"{method.upper()} {route}: {', '.join(absent)}")
        for code in wanted & set(operation["responses"]):
            body = operation["responses"][code].get("content", {}).get("application/json", {}).get("schema")
            if body != {"$ref": "#/components/schemas/Error"}:
                missing.append(f"{method.upper()} {route} {code}: not the Error body ({body})")
    assert not missing, "operations without their 4xx answers:\n" + "\n".join(missing)


def _generation_problems(patterns) -> tuple[dict, set]:
    """The schema of ``patterns`` and the warnings and errors drf-spectacular reported while generating it."""
    saved = dict(GENERATOR_STATS._warn_cache), dict(GENERATOR_STATS._error_cache)
    GENERATOR_STATS._warn_cache.clear()
    GENERATOR_STATS._error_cache.clear()
    try:
        with GENERATOR_STATS.silence():
            schema = SchemaGenerator(patterns=patterns).get_schema(request=None, public=True)
        return schema, set(GENERATOR_STATS._warn_cache) | set(GENERATOR_STATS._error_cache)
    finally:
        GENERATOR_STATS._warn_cache.update(saved[0])
        GENERATOR_STATS._error_cache.update(saved[1])


def test_the_documentation_serializers_render_without_warnings_next_to_the_whole_api():
    """Wiring them in must keep ``spectacular --fail-on-warn`` clean: they add no warning (enum or component name
    clash, unresolvable field) to those the API's own schema gives."""
    from portal.urls import urlpatterns

    probes = [path(f"api/v1/probe/{index}/", _probe_view(documentation_serializer(dotted)).as_view())
              for index, dotted in enumerate(sorted({*DOCUMENTED.values(), *DOCUMENTED_ITEMS.values()}))]
    _, alone = _generation_problems(list(urlpatterns))
    schema, together = _generation_problems([*urlpatterns, *probes])
    assert not together - alone, "new warnings:\n" + "\n".join(sorted(together - alone))
    for dotted in {*DOCUMENTED.values(), *DOCUMENTED_ITEMS.values()}:
        component = schema["components"]["schemas"][component_name(documentation_serializer(dotted))]
        assert component.get("description"), f"{dotted} has no docstring"
        assert not is_bare_object(component), dotted


# ---------------------------------------------------------------------------------------------
# Real answers on the demo system

DATA = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo(django_db_setup, django_db_blocker):
    """The demo system for this module (restored from the run's copy where it can be); the database is given back
    as it was at the module's end."""
    from tests.demo_snapshot import demo_for_module

    with django_db_blocker.unblock(), demo_for_module():
        yield


@pytest.fixture
def researcher(demo, db, django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.get(username="demo"))
    return client


@pytest.fixture
def staff(demo, db, django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.get(username="staff"))
    return client


def _json(response, status: int):
    assert response.status_code == status, (response.status_code, getattr(response, "data", response.content[:500]))
    return json.loads(response.content)


@pytest.fixture
def scored_job(demo, db):
    """The researcher's job with a layout and a saturation result."""
    from apps.saturation.models import JobSaturation

    # The demo user's running Megatron job (their finished jobs are scored too, and have no layout).
    record = JobSaturation.objects.select_related("job__cluster").get(status="ready", job__user_name="demo", job__state="RUNNING",
                                                                      job__name__startswith="megatron")
    return record.job


def test_catalog_product_detail(researcher):
    from apps.catalog.models import DataProduct

    for product in DataProduct.objects.all():
        assert_documented("catalog.CatalogProductResponse", _json(researcher.get(f"/api/v1/catalog/products/{product.name}/"), 200))


def test_catalog_lists_item_by_item(researcher):
    from apps.catalog.models import DataProduct

    products = _json(researcher.get("/api/v1/catalog/products/"), 200)
    assert products
    for item in products:
        assert_documented("catalog.CatalogProductSummary", item)
    for product in DataProduct.objects.all():
        for item in _json(researcher.get(f"/api/v1/catalog/products/{product.name}/checks/?limit=5"), 200):
            assert_documented("catalog.CatalogCheckRun", item)


def test_catalog_run_checks(staff):
    from apps.catalog.models import DataProduct

    name = DataProduct.objects.first().name
    assert_documented("catalog.CatalogRunQueuedResponse", _json(staff.post(f"/api/v1/catalog/products/{name}/run/"), 202))


def test_layout_read_with_and_without_a_layout(researcher, scored_job):
    from apps.jobs.models import Job

    url = f"/api/v1/jobs/{scored_job.cluster.name}/{scored_job.job_id}/layout/"
    with_layout = _json(researcher.get(url), 200)
    assert with_layout["layout"] is not None and with_layout["communicators"]
    assert_documented("ranks.LayoutResponse", with_layout)
    other = Job.objects.filter(user_name="demo", layout__isnull=True).select_related("cluster").first()
    without = _json(researcher.get(f"/api/v1/jobs/{other.cluster.name}/{other.job_id}/layout/"), 200)
    assert without == {"layout": None}
    assert_documented("ranks.LayoutResponse", without)


def test_layout_put_and_log_upload(researcher, scored_job):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from apps.jobs.models import Job, node_search_text

    url = f"/api/v1/jobs/{scored_job.cluster.name}/{scored_job.job_id}/layout/"
    body = _json(researcher.put(url, {"tp": 1, "pp": 1, "etp": None, "vpp": None}, format="json"), 200)
    assert body["layout"]["source"] == "sizes"
    assert_documented("ranks.LayoutResponse", body)
    # The sample log ran on nid006437-38; here it runs on two nodes of the demo system, in a job of the researcher.
    hosts = list(scored_job.node_list[:2])
    log = (DATA / "ranks" / "data" / "megatron_2n_tp2_pp2_dp2.log").read_text()
    log = log.replace("nid006437", hosts[0]).replace("nid006438", hosts[1])
    job = Job.objects.create(cluster=scored_job.cluster, job_id=99000002, user_name="demo", account=scored_job.account, state="RUNNING",
                             node_list=hosts, node_count=2, tasks=8, node_search=node_search_text(hosts))
    body = _json(researcher.post(f"/api/v1/jobs/{job.cluster.name}/{job.job_id}/layout/log/",
                                 {"log": SimpleUploadedFile("slurm.out", log.encode())}, format="multipart"), 200)
    assert (body["layout"]["source"], body["layout"]["exact_map"]) == ("log", True), body["layout"]
    assert_documented("ranks.LayoutResponse", body)


def test_saturation_and_heatmap(researcher, scored_job):
    base = f"/api/v1/jobs/{scored_job.cluster.name}/{scored_job.job_id}/saturation/"
    assert_documented("saturation.SaturationResponse", _json(researcher.get(base), 200))
    for metric in ("S", "power"):
        assert_documented("saturation.HeatmapResponse", _json(researcher.get(f"{base}heatmap/?metric={metric}&bins=40&sort=score"), 200))


def test_job_token_and_job_events(researcher, staff, scored_job):
    token = _json(researcher.post(f"/api/v1/jobs/{scored_job.cluster.name}/{scored_job.job_id}/token/"), 201)
    assert_documented("jobs.JobTokenResponse", token)
    started = _json(staff.post("/api/v1/jobs/events/", {"cluster": "alps", "job_id": 99000001, "event": "start", "user": "demo",
                                                        "nodes": "nid[000001-000002]", "token": True}, format="json"), 200)
    assert "job_token" in started
    assert_documented("jobs.JobEventResponse", started)
    ended = _json(staff.post("/api/v1/jobs/events/", {"cluster": "alps", "job_id": 99000001, "event": "end", "state": "COMPLETED"},
                             format="json"), 200)
    assert "job_token" not in ended
    assert_documented("jobs.JobEventResponse", ended)


def test_namespace_detail_and_inventory(researcher):
    from apps.namespaces.models import ManagedNamespace

    for namespace in ManagedNamespace.objects.filter(project__slurm_account__in=["a-astro10", "a-bio06"]):
        assert_documented("namespaces.NamespaceResponse", _json(researcher.get(f"/api/v1/namespaces/{namespace.name}/"), 200))
    assert_documented("namespaces.InventoryResponse", _json(researcher.get("/api/v1/namespaces/inventory/"), 200))


def test_namespace_lists_item_by_item(researcher):
    namespaces, requests = (_json(researcher.get(url), 200) for url in ("/api/v1/namespaces/", "/api/v1/namespaces/requests/"))
    assert namespaces and requests
    for item in namespaces:
        assert_documented("namespaces.NamespaceSummary", item)
    for item in requests:
        assert_documented("namespaces.NamespaceRequestResponse", item)


def test_namespace_teardown_and_backup_done(researcher):
    from apps.namespaces.models import ManagedNamespace

    namespace = ManagedNamespace.objects.filter(state="ready", project__slurm_account="a-astro10").first()
    torn = _json(researcher.post(f"/api/v1/namespaces/{namespace.name}/teardown/", {"reason": "done with it", "backup": True},
                                 format="json"), 202)
    assert_documented("namespaces.NamespaceResponse", torn)
    assert torn["state"] == "tearing_down" and torn["teardown_step"] is None, torn  # the worker takes the steps
    # where the teardown task stops when a backup was asked for
    ManagedNamespace.objects.filter(pk=namespace.pk).update(teardown_step="freeze")
    assert_documented("namespaces.NamespaceResponse", _json(researcher.post(f"/api/v1/namespaces/{namespace.name}/teardown/backup-done/"), 200))


def test_namespace_requests_dry_run_create_read_and_decide(researcher, staff):
    from apps.namespaces.models import NamespaceRequest

    for found in NamespaceRequest.objects.filter(project__slurm_account__in=["a-astro10", "a-bio06"]):
        assert_documented("namespaces.NamespaceRequestResponse", _json(researcher.get(f"/api/v1/namespaces/requests/{found.pk}/"), 200))
    template = dict(NamespaceRequest.objects.filter(project__slurm_account="a-astro10", status="ready").first().spec)
    spec = {**template, "name": "schema", "hostnames": [], "blueprints": []}
    valid = _json(researcher.post("/api/v1/namespaces/requests/?dry_run=1", spec, format="json"), 200)
    assert_documented("namespaces.NamespaceDryRunResponse", valid)
    invalid = _json(researcher.post("/api/v1/namespaces/requests/?dry_run=1", {**spec, "environment": "nowhere"}, format="json"), 200)
    assert invalid["valid"] is False
    assert_documented("namespaces.NamespaceDryRunResponse", invalid)
    if not valid["valid"]:
        pytest.fail(f"the spec derived from the demo's request is not valid: {valid['problems']}")
    created = _json(researcher.post("/api/v1/namespaces/requests/", spec, format="json"), 201)
    assert_documented("namespaces.NamespaceRequestResponse", created)
    waiting = NamespaceRequest.objects.filter(status="waiting_approval")
    rejected = _json(staff.post(f"/api/v1/namespaces/requests/{waiting.first().pk}/reject/", {"reason": "not now"}, format="json"), 200)
    assert_documented("namespaces.NamespaceRequestResponse", rejected)


def test_telemetry_samples_import_and_series(researcher, staff, scored_job):
    host = scored_job.node_list[0]
    when = (scored_job.start_time or scored_job.submit_time).strftime("%Y-%m-%dT%H:%M:%SZ")
    samples = [{"ts": when, "host": host, "gpu": 0, "field": 155, "value": 312.5, "cluster": scored_job.cluster.name},
               {"ts": when, "host": host, "gpu": 0, "field": "no-such-field", "value": 1}]
    posted = _json(staff.post("/api/v1/telemetry/samples/", samples, format="json"), 200)
    assert (posted["accepted"], posted["rejected"]) == (1, 1)
    assert_documented("telemetry.IngestResponse", posted)
    text = f"#Entity   POWER\nID\nGPU 0     250.5\nGPU 1     garbage\n"
    imported = _json(staff.generic("POST", f"/api/v1/telemetry/import/?format=dcgmi-dmon&host={host}&cluster={scored_job.cluster.name}"
                                           f"&start={when}", text, content_type="text/plain"), 200)
    assert_documented("telemetry.IngestResponse", imported)
    job = f"{scored_job.cluster.name}/{scored_job.job_id}"
    assert_documented("telemetry.SeriesResponse", _json(researcher.get(f"/api/v1/telemetry/series/?job={job}&field=155&gpu=0"), 200))
    assert_documented("telemetry.SeriesResponse", _json(researcher.get(f"/api/v1/telemetry/series/?job={job}&step=60&stats=mean,p90"), 200))


def test_topology_placement_and_discovery(researcher, staff, scored_job):
    from apps.topology.models import Node

    body = _json(researcher.post("/api/v1/topology/placement/", {"nodes": list(scored_job.node_list)}, format="json"), 200)
    assert_documented("topology.PlacementResponse", body)
    one = _json(researcher.post("/api/v1/topology/placement/", {"nodes": list(scored_job.node_list)[:1]}, format="json"), 200)
    assert one["pairs"]["mean_hops"] is None
    assert_documented("topology.PlacementResponse", one)
    node = Node.objects.prefetch_related("nics").first()
    record = {"hostname": node.hostname, "xname": node.xname, "nics": [{"name": nic.name, "mac": nic.mac} for nic in node.nics.all()]}
    assert_documented("topology.DiscoveryResponse", _json(staff.post("/api/v1/topology/discovery/", record, format="json"), 200))
    assert_documented("topology.DiscoveryResponse",
                      _json(staff.post("/api/v1/topology/discovery/", {"records": [record]}, format="json"), 200))


def test_vetting_import_runs_nodes_and_protocols(researcher, staff):
    from apps.vetting.models import NodeHealth

    text = (DATA / "vetting" / "data" / "vetnode-0.1.5-plain.txt").read_bytes()
    assert_documented("vetting.VettingRunStoredResponse",
                      _json(staff.post("/api/v1/vetting/import/?format=vetnode", data=text, content_type="text/plain"), 201))
    run = {"cluster": "alps", "results": [{"hostname": "nid000001", "eval_name": "gpu-burn", "status": "SUCCESS"},
                                          {"hostname": "nid000002", "eval_name": "gpu-burn", "status": "FAILED"}]}
    response = staff.post("/api/v1/vetting/runs/", run, format="json")
    assert_documented("vetting.VettingRunStoredResponse", _json(response, 201))
    health = NodeHealth.objects.filter(state="suspect").first()
    assert_documented("vetting.VettingNodeResponse", _json(researcher.get(f"/api/v1/vetting/nodes/{health.host}/"), 200))
    acted = _json(staff.post(f"/api/v1/vetting/nodes/{health.host}/actions/", {"action": "acknowledge", "reason": "looking"},
                             format="json"), 200)
    assert_documented("vetting.VettingNodeActionResponse", acted)
    protocol = (DATA / "vetting" / "data" / "README.md").read_text()
    for text in ("name: nightly\nevals:\n  - name: gpu\n    type: vetnode.evaluations.gpu_eval.GPUEval\n", protocol, "evals: [1, {name: 5}]"):
        assert_documented("vetting.ProtocolValidateResponse",
                          _json(staff.post("/api/v1/vetting/protocols/validate/", data=text.encode(), content_type="text/plain"), 200))
