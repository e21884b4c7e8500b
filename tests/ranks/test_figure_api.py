"""GET /api/v1/jobs/<cluster>/<job_id>/ranks/figure/: the rank map as Plotly JSON, coloured by a
coordinate or by what the saturation app knows per GPU (through apps.core.gpu_colourings, so the
ranks app never imports saturation), with the legend counting ranks (issue 17)."""
import pytest
from django.test import RequestFactory

from apps.core.gpu_colourings import (
    GpuColouring,
    available_gpu_colourings,
    gpu_colouring,
    gpu_colourings,
    register_gpu_colouring,
    unregister_gpu_colouring,
)

NODES = [f"nid{n:06d}" for n in range(1, 9)]  # group 0 of alps, 4 GPUs each; tp 4 x pp 2 -> dp 4, 32 ranks
URL = "/api/v1/jobs/alps/1/ranks/figure/"


@pytest.fixture
def job(alps_job):
    return alps_job(NODES)


@pytest.fixture
def with_layout(alice):
    assert alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2}, format="json").status_code == 200
    return alice


def node_traces(figure) -> dict[str, list[str]]:
    """Legend name -> hosts drawn in it (the switches left out)."""
    return {trace["name"]: [point[0] for point in trace["customdata"]] for trace in figure["data"]
            if not trace["name"].startswith("switches")}


def test_coloured_by_stage_the_legend_counts_ranks(with_layout):
    response = with_layout.get(URL)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["colour"], body["selected_ranks"], body["errors"], body["grid_selected"]) == ("pp", None, {}, [])
    traces = node_traces(body["figure"])
    # Stage 0 runs on the first 4 nodes (16 ranks), stage 1 on the last 4: ranks counted, not nodes.
    assert traces["pp 0 (16 ranks)"] == NODES[:4] and traces["pp 1 (16 ranks)"] == NODES[4:]
    outside = [name for name in traces if name.startswith("not in this job")]
    assert outside == ["not in this job (104 nodes)"]  # the rest of dragonfly group 0 (112 nodes)
    assert body["figure"]["layout"]["uirevision"] == "rank-map"  # Plotly.react keeps the user's zoom
    assert "pipeline stage" in body["note"]


def test_selection_counts_the_selected_ranks(with_layout):
    body = with_layout.get(URL, {"sel_dp": "1", "colour": "dp"}).json()
    expected_hosts = sorted({row["host"] for row in with_layout.get("/api/v1/jobs/alps/1/ranks/?dp=1").json()})
    traces = node_traces(body["figure"])
    assert sorted(traces["selected ranks (8)"]) == expected_hosts == [NODES[1], NODES[5]]
    assert "other ranks (24)" in traces
    assert body["selected_ranks"] == 8 and body["grid_selected"] == [[0, 1], [1, 1]]
    body = with_layout.get(URL, {"sel_dp": "1", "sel_pp": "1", "sel_tp": "0,2"}).json()
    assert body["selected_ranks"] == 2 and "selected ranks (2)" in node_traces(body["figure"])
    assert body["grid_selected"] == [[1, 1]]


@pytest.mark.parametrize("query, field, text", [
    ({"colour": "nope"}, "colour", "'nope' is not a colouring of this job's rank map; choose one of pp, dp, tp"),
    ({"colour": "cp"}, "colour", "choose one of pp, dp, tp"),  # cp = 1: not offered
    ({"colour": "saturation"}, "colour", "Saturation S is not available for this job yet; choose one of pp, dp, tp"),
    ({"colour": "Bad colour!"}, "colour", "colouring key"),
    ({"sel_pp": "1," * 10_001}, "sel_pp", "20000"),
])
def test_bad_colour_or_overlong_text_is_a_400_naming_the_parameter(with_layout, query, field, text):
    from apps.saturation.colourings import register

    register()  # registered, but the job is not scored
    response = with_layout.get(URL, query)
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [error["field"] for error in errors] == [field] and text in errors[0]["message"], errors


def test_access_like_the_other_ranks_endpoints(with_layout, api_client, make_user, job):
    assert with_layout.get(URL).status_code == 200
    api_client.force_authenticate(None)
    assert api_client.get(URL).status_code in (401, 403)
    api_client.force_authenticate(make_user("bob"))
    assert api_client.get(URL).status_code == 404  # another user's job does not exist for bob
    api_client.force_authenticate(make_user("mia", accounts=["a-llm01"]))
    assert api_client.get(URL).status_code == 200  # a member of the job's account may look


def test_without_a_layout_it_is_a_404(alice):
    response = alice.get(URL)
    assert response.status_code == 404 and "no layout yet" in response.json()["detail"]


# ---------------------------------------------------------------------------------------------
# Colouring by what the saturation app knows
# ---------------------------------------------------------------------------------------------
LOW_HOST, LOW_GPU = NODES[2], 2


def score_of(host: str, gpu: int) -> float:
    return 12.5 if (host, gpu) == (LOW_HOST, LOW_GPU) else 60 + NODES.index(host) + gpu


@pytest.fixture
def scored(job):
    """A ready saturation row as the scoring writes it: nid000003 GPU 2 lags (S 12.5, a straggler);
    nid000005 is memory-bound, nid000006 mixed; nid000008 sent no samples."""
    from apps.saturation.colourings import register
    from apps.saturation.models import JobSaturation

    register()
    per_gpu = []
    for host in NODES[:-1]:
        for gpu in range(4):
            limiter = "dram" if host == NODES[4] or (host == NODES[5] and gpu == 0) else "tensor"
            entry = {"host": host, "gpu": gpu, "score": score_of(host, gpu), "limiter": limiter}
            if (host, gpu) == (LOW_HOST, LOW_GPU):
                entry["straggler"] = "S"
            per_gpu.append(entry)
    return JobSaturation.objects.create(job=job, status="ready", score=60.0, limiter="tensor", per_gpu=per_gpu)


def test_coloured_by_saturation_each_node_shows_its_lowest_gpu(with_layout, scored):
    body = with_layout.get(URL, {"colour": "saturation"}).json()
    assert body["colour"] == "saturation"
    [trace] = [t for t in body["figure"]["data"] if t["name"].startswith("Saturation S")]
    assert trace["name"] == "Saturation S (28 ranks) · lowest GPU per node"
    hosts = [point[0] for point in trace["customdata"]]
    assert sorted(hosts) == NODES[:-1]
    lowest = {host: min(score_of(host, gpu) for gpu in range(4)) for host in NODES[:-1]}
    assert dict(zip(hosts, trace["marker"]["color"])) == lowest
    assert lowest[LOW_HOST] == 12.5
    assert (trace["marker"]["cmin"], trace["marker"]["cmax"]) == (0, 100)  # a fixed scale, not the job's own range
    notes = trace["customdata"][hosts.index(LOW_HOST)][5]
    assert "GPU 2: rank 10 (tp 2, dp 2, pp 0) · Saturation S 12.5" in notes
    assert "no Saturation S (4 ranks)" in node_traces(body["figure"])  # nid000008 has no score
    assert "lowest Saturation S" in body["note"] and "0 to 100" in body["note"]


def test_saturation_of_the_selection_only(with_layout, scored):
    body = with_layout.get(URL, {"colour": "saturation", "sel_tp": "0"}).json()
    [trace] = [t for t in body["figure"]["data"] if t["name"].startswith("Saturation S")]
    values = dict(zip([point[0] for point in trace["customdata"]], trace["marker"]["color"]))
    assert values[LOW_HOST] == score_of(LOW_HOST, 0)  # GPU 2 is not selected: it does not count
    assert trace["name"].startswith("Saturation S (7 ranks)") and body["selected_ranks"] == 8


def test_coloured_by_straggler_and_limiter(with_layout, scored):
    traces = node_traces(with_layout.get(URL, {"colour": "straggler"}).json()["figure"])
    assert traces["straggler (4 ranks)"] == [LOW_HOST]  # a node is a straggler when any of its GPUs is
    assert len(traces["keeps pace (24 ranks)"]) == 6
    body = with_layout.get(URL, {"colour": "limiter"}).json()
    traces = node_traces(body["figure"])
    assert traces["memory bandwidth (HBM) (4 ranks)"] == [NODES[4]]
    assert traces["mixed (4 ranks)"] == [NODES[5]]
    assert len(traces["tensor cores (20 ranks)"]) == 5


def test_the_page_offers_the_colourings_once_scored(with_layout, client, django_user_model, job):
    from apps.saturation.colourings import register
    from apps.saturation.models import JobSaturation

    register()
    client.force_login(django_user_model.objects.get(username="alice"))
    page = client.get("/jobs/alps/1/").content.decode()
    assert 'value="saturation"' not in page and 'value="pp" selected' in page
    JobSaturation.objects.create(job=job, status="ready", per_gpu=[])
    page = client.get("/jobs/alps/1/?rank_colour=straggler").content.decode()
    assert '<option value="saturation">Saturation S</option>' in page and 'value="straggler" selected' in page
    assert 'data-figure-url="/api/v1/jobs/alps/1/ranks/figure/?colour=straggler"' in page


# ---------------------------------------------------------------------------------------------
# The registry itself
# ---------------------------------------------------------------------------------------------
def test_registry_orders_validates_and_skips_what_is_not_available():
    calls = []

    def broken(job):
        raise RuntimeError("the other app has a bug")

    try:
        register_gpu_colouring("test-b", "B", lambda job: {("h", 0): "x"}, order=2)
        register_gpu_colouring("test-a", "A", lambda job: None, order=1)  # nothing for this job
        register_gpu_colouring("test-c", "C", lambda job: {}, available=broken, order=3)
        register_gpu_colouring("test-d", "D", lambda job: calls.append(job), available=lambda job: True, order=4)
        keys = [colouring.key for colouring in gpu_colourings() if colouring.key.startswith("test-")]
        assert keys == ["test-a", "test-b", "test-c", "test-d"]
        available = [colouring.key for colouring in available_gpu_colourings("job") if colouring.key.startswith("test-")]
        assert available == ["test-b", "test-d"] and calls == []  # the cheap check answers; fn is not called
        assert gpu_colouring("test-b").title == "B"
    finally:
        for key in ("test-a", "test-b", "test-c", "test-d"):
            unregister_gpu_colouring(key)
    assert gpu_colouring("test-b") is None
    with pytest.raises(ValueError, match="aggregate 'median'"):
        GpuColouring("x", "X", lambda job: None, aggregate="median")
    with pytest.raises(ValueError, match="kind 'colour'"):
        GpuColouring("x", "X", lambda job: None, kind="colour")
    with pytest.raises(ValueError, match="from low to high"):
        GpuColouring("x", "X", lambda job: None, kind="number", value_range=(100, 0))


def test_the_ranks_app_does_not_import_the_saturation_app():
    import ast
    from pathlib import Path

    for path in (Path(__file__).resolve().parents[2] / "apps" / "ranks").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(name.startswith("apps.saturation") for name in names), path


def test_panel_context_builds_no_figure(with_layout, job):
    """The page's shell names the endpoint; the figure is not built for the page."""
    from django.contrib.auth import get_user_model

    from apps.ranks.panel import context

    request = RequestFactory().get("/jobs/alps/1/", {"rank_colour": "dp", "sel_pp": "1"})
    request.user = get_user_model().objects.get(username="alice")
    shell = context(job, request)
    assert shell["rank_figure_url"] == f"{URL}?colour=dp&sel_pp=1"
    assert not any("figure" in key and key != "rank_figure_url" for key in shell)


def test_answers_carry_an_etag_that_follows_every_input(with_layout, scored):
    first = with_layout.get(URL, {"colour": "saturation"})
    etag = first["ETag"]
    assert first.status_code == 200 and "private" in first["Cache-Control"] and "no-cache" in first["Cache-Control"]
    again = with_layout.get(URL, {"colour": "saturation"}, HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b""
    assert with_layout.get(URL, {"colour": "saturation", "sel_dp": "1"})["ETag"] != etag  # another selection
    # A new score changes the colours: a new answer, not the cached one.
    scored.per_gpu = [{**gpu, "score": 99.0} for gpu in scored.per_gpu]
    scored.save()
    rescored = with_layout.get(URL, {"colour": "saturation"}, HTTP_IF_NONE_MATCH=etag)
    assert rescored.status_code == 200 and rescored["ETag"] != etag
    [trace] = [t for t in rescored.json()["figure"]["data"] if t["name"].startswith("Saturation S")]
    assert set(trace["marker"]["color"]) == {99.0}
    # A new layout too.
    etag = with_layout.get(URL)["ETag"]
    assert with_layout.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 1}, format="json").status_code == 200
    changed = with_layout.get(URL, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200 and "pp 0 (32 ranks)" in node_traces(changed.json()["figure"])
