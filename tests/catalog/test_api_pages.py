"""The catalogue's API and pages on loaded products with check history, and the explorer's Dash app served through
Django: its page, its layout, and a callback answered as the signed-in user may see it."""
import json
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from django.core.management import call_command
from django.utils import timezone as django_timezone

from apps.catalog.models import DataProduct
from apps.catalog.services import load_catalog, run_checks
from apps.catalog.views import resolve_query


@pytest.fixture
def catalog(db, store, make_user):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    now = django_timezone.now().replace(second=0, microsecond=0)
    times = pd.date_range(end=now, periods=30, freq="60s", tz="UTC")
    hosts = [f"nid{n:06d}" for n in range(1, 2689) if n not in range(100, 116)]  # sixteen nodes send nothing
    frame = pd.DataFrame({"ts": list(times) * len(hosts), "host": [h for h in hosts for _ in times], "cluster": "alps"})
    for gpu in range(4):
        for field, value in ((155, 300.0), (150, 40.0)):
            store.write(frame.assign(gpu=gpu, uuid="", field=field, value=value))
    load_catalog()
    for product in DataProduct.objects.all():
        run_checks(product, now=now)
    return {"now": now, "staff": make_user("sam", is_staff=True), "user": make_user("mia", accounts=["a-llm01"])}


def test_the_product_list_searches_and_filters(catalog, api_client):
    api_client.force_authenticate(catalog["user"])
    names = lambda **params: [p["name"] for p in api_client.get("/api/v1/catalog/products/", params).json()]  # noqa: E731
    assert len(names()) == 9
    assert names(q="power temperature") == ["dcgm-device"]
    assert names(q="slurm") == ["slurm-jobs"]
    assert names(domain="topology") == ["topology"]
    assert set(names(owner="Network")) == {"slingshot-nic-counters"}
    assert names(state="unknown") == ["slingshot-nic-counters"]
    assert "gpu-error-counters" in names(state="stale")  # no sample at all: stale
    bad = api_client.get("/api/v1/catalog/products/", {"state": "rotten"})
    assert bad.status_code == 400 and bad.json()["errors"] == [
        {"field": "state", "line": None, "message": "state is one of fresh, aging, stale, unknown"}]


def test_a_product_with_its_current_quality(catalog, api_client):
    api_client.force_authenticate(catalog["user"])
    body = api_client.get("/api/v1/catalog/products/dcgm-device/").json()
    quality = body["quality"]
    assert quality["state"] == "fresh" and quality["open_incidents"] == 1
    coverage = quality["latest"]["coverage"]
    assert coverage["status"] == "fail"
    assert coverage["measured"]["missing"] == [{"member": f"nid{n:06d}", "gpus": [0, 1, 2, 3], "whole": True} for n in range(100, 116)]
    assert body["definition"]["schema"][3] == {"name": "power", "type": "double", "unit": "W", "field": 155,
                                               "description": "Board power averaged by the driver"}
    assert body["versions"][0]["changes"] == ["created"]
    history = api_client.get("/api/v1/catalog/products/dcgm-device/checks/", {"kind": "coverage"}).json()
    assert [run["status"] for run in history] == ["fail"]
    assert api_client.get("/api/v1/catalog/products/dcgm-device/checks/", {"limit": "0"}).status_code == 400
    for limit in ("²", "٣", "1e3", "6760759693754570375168"):  # issue 16 item 6: "²".isdigit() then int() was a 500
        response = api_client.get("/api/v1/catalog/products/dcgm-device/checks/", {"limit": limit})
        assert response.status_code == 400 and [e["field"] for e in response.json()["errors"]] == ["limit"], (limit, response.content)
    assert api_client.get("/api/v1/catalog/products/dcgm-device/checks/", {"kind": "speed"}).status_code == 400
    assert api_client.get("/api/v1/catalog/products/no-such/").status_code == 404


def test_only_staff_run_checks_on_demand_and_strangers_see_nothing(catalog, api_client):
    api_client.force_authenticate(catalog["user"])
    assert api_client.post("/api/v1/catalog/products/dcgm-device/run/").status_code == 403
    api_client.force_authenticate(None)
    assert api_client.get("/api/v1/catalog/products/").status_code == 401


def test_sample_queries_get_real_times():
    now = datetime(2026, 11, 23, 12, 0, 7, tzinfo=timezone.utc)
    assert resolve_query("/x/?start={now-1h}&end={now}&a={now-3d}", now) == \
        "/x/?start=2026-11-23T11:00:07Z&end=2026-11-23T12:00:07Z&a=2026-11-20T12:00:07Z"


def test_the_pages(catalog, client):
    client.force_login(catalog["user"])
    index = client.get("/catalog/", {"q": "power"}).content.decode()
    assert 'data-product="dcgm-device"' in index and 'data-product="slurm-jobs"' not in index
    page = client.get("/catalog/dcgm-device/").content.decode()
    assert 'id="product-state">Fresh<' in page
    assert '<a href="/topology/nodes/nid000100/">nid000100</a> <span class="small muted">all GPUs</span>' in page
    assert "Targets: fresh within 3 min, stale after 10 min; coverage 99.5 % of topology_gpus" in page
    # Not staff and no job: the telemetry query reads one's own jobs, and there is none to run it on.
    assert "you have none with this data yet" in page and 'id="run-sample"' not in page
    client.force_login(catalog["staff"])
    page = client.get("/catalog/dcgm-device/").content.decode()
    assert "&amp;start=20" in page and "{now" not in page and 'id="run-sample"' in page  # the sample query with real times
    client.force_login(catalog["user"])
    assert 'href="/catalog/explorer/?product=dcgm-device"' in page
    assert client.get("/catalog/no-such/").status_code == 404
    explorer = client.get("/catalog/explorer/", {"product": "dcgm-device", "evil": "<script>"}).content.decode()
    assert 'src="/catalog/explorer/app/?product=dcgm-device"' in explorer


def _callback_body(inputs: dict, search: str) -> dict:
    outputs = "..plot.figure...note.children.."
    return {"output": outputs, "outputs": [{"id": "plot", "property": "figure"}, {"id": "note", "property": "children"}],
            "inputs": [{"id": key, "property": "value", "value": value} for key, value in inputs.items()],
            "changedPropIds": ["product.value"], "state": [{"id": "url", "property": "search", "value": search}]}


def _callback(client, inputs: dict, search: str):
    """Post one Dash callback the way the browser's renderer does."""
    response = client.post("/catalog/explorer/app/_dash-update-component", json.dumps(_callback_body(inputs, search)),
                           content_type="application/json")
    assert response.status_code == 200, response.content[:500]
    return response.json()["response"]


INPUTS = {"product": "dcgm-device", "fields": [155], "window": 3600, "group_by": "host", "stat": "mean", "hosts": "", "job": None}


def test_the_explorer_app_is_served_by_django_with_a_strict_policy(catalog, client):
    assert client.get("/catalog/explorer/app/").status_code == 302  # signed in only
    client.force_login(catalog["staff"])
    index = client.get("/catalog/explorer/app/", {"product": "dcgm-device"})
    assert index.status_code == 200 and b'id="react-entry-point"' in index.content
    policy = index["Content-Security-Policy"]
    assert "script-src 'self' 'sha256-" in policy and "unsafe-inline' " not in policy.split("script-src")[1].split(";")[0]
    layout = client.get("/catalog/explorer/app/_dash-layout").json()
    assert "react-entry-point" not in json.dumps(layout) and '"id": "plot"' in json.dumps(layout)
    answer = _callback(client, INPUTS, "?product=dcgm-device")
    assert "median, 10-90 % band and min-max across 2,672 hosts" in answer["note"]["children"]
    assert "60 buckets of 60 s from " in answer["note"]["children"]
    figure = answer["plot"]["figure"]
    assert [trace.get("name") for trace in figure["data"] if trace.get("name")] == [
        "power (W) max", "power (W) 10-90 % of 2,672 hosts", "power (W) median", "power (W) min (silent = 0)"]
    few = _callback(client, {**INPUTS, "hosts": "nid[000001-000003]"}, "?product=dcgm-device")
    assert "one line per host (3)" in few["note"]["children"]
    bad = _callback(client, {**INPUTS, "hosts": "nid[000001-"}, "?product=dcgm-device")
    assert bad["note"]["children"].startswith("Nodes: ")


def test_the_explorer_shows_a_researcher_only_their_jobs(catalog, client):
    from apps.jobs.models import Cluster, Job

    client.force_login(catalog["user"])
    answer = _callback(client, {**INPUTS, "hosts": "nid000001"}, "?product=dcgm-device")
    assert answer["note"]["children"].startswith("Choose one of your jobs")
    assert answer["plot"]["figure"]["data"] == []
    now = catalog["now"]
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=77, user_name="other", account="b-moe02", state="RUNNING", name="theirs",
                       submit_time=now - timedelta(hours=1), start_time=now - timedelta(minutes=20), node_list=["nid000005"])
    Job.objects.create(cluster=cluster, job_id=78, user_name="mia", account="a-llm01", state="RUNNING", name="mine",
                       submit_time=now - timedelta(hours=1), start_time=now - timedelta(minutes=20), node_list=["nid000001", "nid000002"])
    assert _callback(client, {**INPUTS, "job": "alps/77"}, "")["note"]["children"].startswith("Choose one of your jobs")
    mine = _callback(client, {**INPUTS, "job": "alps/78"}, "")
    assert "one line per host (2)" in mine["note"]["children"]
    assert {trace["name"].split()[0] for trace in mine["plot"]["figure"]["data"]} == {"nid000001", "nid000002"}


@pytest.fixture
def scored_jobs(catalog):
    """Saturation scores of mia's job, her project's job and a stranger's, scored at different times."""
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation

    now, cluster = catalog["now"], Cluster.objects.get_or_create(name="alps")[0]
    jobs = {}
    for job_id, user, account, age in ((101, "mia", "x-none", 50), (102, "lee", "a-llm01", 40), (103, "olga", "b-moe02", 30)):
        job = Job.objects.create(cluster=cluster, job_id=job_id, user_name=user, account=account, state="COMPLETED",
                                 submit_time=now - timedelta(hours=3), start_time=now - timedelta(hours=2))
        JobSaturation.objects.create(job=job, status="ready", score=50.0, computed=now - timedelta(minutes=age))
        jobs[job_id] = job
    run_checks(DataProduct.objects.get(name="saturation-scores"), now=now)
    return jobs


def _members(body) -> set[str]:
    return {member for member, _ in body["quality"]["latest"]["freshness"]["measured"]["stalest"]}


def test_saturation_scores_name_only_the_jobs_the_caller_may_see(catalog, scored_jobs, api_client, client):
    """Issue 16 item 8: the freshness check's ``stalest`` listed every scored job to any signed-in user."""
    api_client.force_authenticate(catalog["staff"])
    staff = api_client.get("/api/v1/catalog/products/saturation-scores/").json()
    assert _members(staff) == {"alps/101", "alps/102", "alps/103"}
    api_client.force_authenticate(catalog["user"])
    body = api_client.get("/api/v1/catalog/products/saturation-scores/").json()
    freshness = body["quality"]["latest"]["freshness"]["measured"]
    assert _members(body) == {"alps/101", "alps/102"}  # her own job, her project's job; not olga's
    assert freshness["members"] == 3 and freshness["stalest_hidden"] == 1  # the count stays complete
    history = api_client.get("/api/v1/catalog/products/saturation-scores/checks/", {"kind": "freshness"}).json()
    assert {member for run in history for member, _ in run["measured"].get("stalest", [])} == {"alps/101", "alps/102"}
    assert "alps/103" not in json.dumps(body) + json.dumps(history)
    client.force_login(catalog["user"])
    page = client.get("/catalog/saturation-scores/").content.decode()
    assert "alps/103" not in page


BAD_CALLBACK_VALUES = [
    ({"window": "abc"}, "Window"),
    ({"window": 1e12}, "Window"),
    ({"window": -5}, "Window"),
    ({"window": [1]}, "Window"),
    ({"fields": ["x"]}, "Fields"),
    ({"fields": [10**30]}, "Fields"),
    ({"fields": "155"}, "Fields"),
    ({"group_by": "evil"}, "Lines per"),
    ({"stat": {"a": 1}}, "Statistic"),
    ({"hosts": ["nid000001"]}, "Nodes"),
    ({"job": "alps/²"}, "Job"),
    ({"job": "alps/99999999999999999999999"}, "Job"),
    ({"product": 5}, "Product"),
]

EXPLORER_PATHS_OUTSIDE = [
    "_dash-component-suites/../../../etc/passwd",
    "_dash-component-suites/dash/..%2f..%2fsettings.py",
    "_dash-component-suites/dash/%2e%2e/%2e%2e/dash.py",
    "_dash-component-suites/dash/../dash.py",
    "_dash-component-suites/nope/x.js",
    "_dash-component-suites/dash/deps/nothing-here.js",
    "assets/../explorer.py",
]


def test_explorer_callbacks_answer_bad_values_with_a_message_and_bad_paths_with_404(catalog, client):
    """Issue 16 item 6: window "abc", 1e12 or fields ["x"] raised inside the callback, and asset paths with '..'
    answered 500. Each bad value gets an empty figure and a note naming the control; each path a 404."""
    client.force_login(catalog["staff"])
    client.raise_request_exception = False  # a 500 is an answer to record here, not an exception in the test
    wrong = []
    for changed, words in BAD_CALLBACK_VALUES:
        response = client.post("/catalog/explorer/app/_dash-update-component",
                               json.dumps(_callback_body({**INPUTS, **changed}, "?product=dcgm-device")), content_type="application/json")
        if response.status_code != 200:
            wrong.append((changed, response.status_code))
            continue
        answer = response.json()["response"]
        if not answer["note"]["children"].startswith(words) or answer["plot"]["figure"]["data"] != []:
            wrong.append((changed, answer["note"]["children"]))
    for path in EXPLORER_PATHS_OUTSIDE:
        status = client.get(f"/catalog/explorer/app/{path}").status_code
        if status != 404:
            wrong.append((path, status))
    assert wrong == [], "\n".join(map(repr, wrong))
    assert _callback(client, INPUTS, "?product=dcgm-device")["plot"]["figure"]["data"]  # good values still plot
    # The address pre-fills the controls: a value that is not valid there is left out, not a crash ("²".isdigit()).
    from apps.catalog.explorer import defaults

    product = DataProduct.objects.get(name="dcgm-device")
    plain = defaults(product, {})
    asked = defaults(product, {"window": "²", "fields": "²,155,x", "group_by": "evil", "stat": "max"})
    assert (asked["window"], asked["fields"], asked["group_by"], asked["stat"]) == (plain["window"], plain["fields"], plain["group_by"], "max")
    assert defaults(product, {"window": "3600", "fields": "150"})["window"] == 3600
