"""The job comparison: GET /api/v1/jobs/compare/ and the page /jobs/compare/.

Hand-built jobs on a small dragonfly (6 groups of 4 nodes, 4 GPUs each) with stated model configs, logged throughput,
layouts and saturation scores, so every number the comparison answers is computed here by hand; then the demo's runs."""
from datetime import datetime, timezone

import pytest

from apps.appmetrics.services import metrics_ingest, model_config_set
from apps.jobs.models import Cluster, Job
from apps.ranks.models import JobLayout
from apps.saturation.models import JobSaturation
from apps.topology.generator import DragonflyParameters, generate
from apps.topology.services import topology_apply

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
# 6 groups x (1 chassis x 2 switch blades) switches, 2 blades x 2 nodes = 4 nodes per group: nid000001-04 in group 0, ...
SIX_GROUPS = DragonflyParameters(name="six", groups=6, chassis_per_cabinet=1, switch_blades_per_chassis=2, blades_per_chassis=2,
                                 nodes_per_blade=2, nics_per_node=2, gpus_per_node=4, global_links_per_group_pair=1)
MODEL = {"layers": 4, "hidden": 256, "heads": 8, "seq_len": 1024, "vocab": 32000, "global_batch": 64, "gpu_peak_tflops": 989.0}
OTHER_MODEL = {**MODEL, "layers": 8}


def nodes_of(group: int, count: int = 4) -> list[str]:
    return [f"nid{4 * group + n + 1:06d}" for n in range(count)]


def throughput(tokens_per_s: float, n: int = 60) -> list[dict]:
    return [{"ts": T0.timestamp() + 60 + 10 * i, "step": i + 1, "tokens_per_s": tokens_per_s} for i in range(n)]


def make_job(cluster, job_id: int, nodes: list[str], *, user="alice", account="a-llm01", model=MODEL, tokens_per_s=None,
             layout=None, saturation=None, name=None) -> Job:
    job = Job.objects.create(cluster=cluster, job_id=job_id, user_name=user, account=account, state="COMPLETED",
                             node_list=nodes, node_count=len(nodes), gpus=4 * len(nodes), start_time=T0,
                             end_time=T0.replace(hour=12), name=name or f"llama-{job_id}")
    if model is not None:
        model_config_set(job, model)
    if tokens_per_s is not None:
        metrics_ingest(job, throughput(tokens_per_s))
    if layout is not None:
        tp, pp, dp = layout
        JobLayout.objects.create(job=job, tp=tp, pp=pp, dp=dp, world_size=tp * pp * dp, source="api")
    if saturation is not None:
        score, limiter, stragglers = saturation
        JobSaturation.objects.create(job=job, status="ready", score=score, limiter=limiter,
                                     stragglers=[{"host": nodes[0], "gpu": g} for g in range(stragglers)])
    return job


@pytest.fixture
def world(db, store):
    """alps/1001 on 6 nodes in 6 groups, alps/1003 on 6 nodes in 2 groups (same model, same GPUs), alps/1002 on
    another model, mallory's alps/2001 in another project."""
    topology_apply(generate(SIX_GROUPS), source="test", prune=False)
    cluster = Cluster.objects.create(name="alps")
    spread = [nodes_of(group, 1)[0] for group in range(6)]
    compact = nodes_of(0) + nodes_of(1, 2)
    jobs = {
        1001: make_job(cluster, 1001, spread, tokens_per_s=24 * 1000.0, layout=(4, 2, 3), saturation=(48.0, "link", 2)),
        1003: make_job(cluster, 1003, compact, tokens_per_s=24 * 1180.0, layout=(4, 2, 3), saturation=(61.0, "compute", 0)),
        1002: make_job(cluster, 1002, nodes_of(3), model=OTHER_MODEL, tokens_per_s=16 * 700.0),
        2001: make_job(cluster, 2001, nodes_of(5), user="mallory", account="a-secret", tokens_per_s=9999.0, name="secret-project-x"),
    }
    return jobs


@pytest.fixture
def alice(api_client, make_user, world):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    return api_client


def rows_by_key(body: dict) -> dict:
    return {row["key"]: row for row in body["rows"]}


def test_two_jobs_side_by_side_with_the_differences_marked(alice):
    response = alice.get("/api/v1/jobs/compare/?jobs=alps/1001,alps/1003")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [job["ref"] for job in body["jobs"]] == ["alps/1001", "alps/1003"]
    first, second = body["jobs"]
    assert first["link"] == "/jobs/alps/1001/" and first["user"] == "alice" and first["gpus"] == 24
    assert first["placement"]["groups"] == 6 and second["placement"]["groups"] == 2
    assert second["placement"]["nodes_per_group"] == {"0": 4, "1": 2}
    assert first["tokens_per_s_per_gpu"] == pytest.approx(1000.0)
    assert second["tokens_per_s_per_gpu"] == pytest.approx(1180.0)
    assert first["layout"]["tp"] == 4 and first["layout"]["dp"] == 3
    assert (first["saturation"]["limiter"], first["saturation"]["stragglers"]) == ("link", 2)
    rows = rows_by_key(body)
    differing = {key for key, row in rows.items() if row["differs"]}
    # Same model, same GPUs and layout; placement, throughput, MFU, score, limiter, stragglers and names differ.
    assert {"model.layers", "model.hidden", "gpus", "nodes", "layout.tp", "layout.pp", "layout.dp"}.isdisjoint(differing)
    assert {"placement.groups", "tokens_per_s_per_gpu", "mfu", "saturation.score", "saturation.limiter",
            "saturation.stragglers", "name"} <= differing
    assert rows["placement.groups"]["values"] == [6, 2]
    assert rows["saturation.stragglers"]["values"] == [2, 0]
    assert "model.moe_experts" not in rows  # no job has experts: the row is left out
    assert body["same_model"] is True
    assert body["verdict"] == ("alps/1003 trains 18 % more tokens/s per GPU than alps/1001 at the same model: "
                               "its nodes span 2 dragonfly groups, not 6.")


def test_measured_numbers_within_one_percent_count_as_the_same(alice, world):
    cluster = world[1001].cluster
    make_job(cluster, 1004, nodes_of(2, 3) + nodes_of(4, 3), tokens_per_s=24 * 1005.0, layout=(4, 2, 3), saturation=(48.0, "link", 2))
    rows = rows_by_key(alice.get("/api/v1/jobs/compare/?jobs=alps/1001,alps/1004").json())
    assert rows["tokens_per_s_per_gpu"]["values"] == [pytest.approx(1000.0), pytest.approx(1005.0)]
    assert rows["tokens_per_s_per_gpu"]["differs"] is False  # 0.5 %: jitter, not a difference
    assert rows["placement.groups"]["values"] == [6, 2] and rows["placement.groups"]["differs"] is True


def test_scaling_across_runs_of_one_model_computed_by_hand(alice, world):
    cluster = world[1001].cluster
    # 24 GPUs at 1,000 tokens/s/GPU (1001, global batch 64) is the baseline; 48 GPUs at 900 with the same batch is
    # strong scaling (speed-up 43,200 / 24,000 = 1.8 of an ideal 2, efficiency 0.9); 96 GPUs at 750 with a batch of
    # 256 is weak scaling (efficiency 0.75, speed-up 72,000 / 24,000 = 3.0 of an ideal 4). 1002 trains another model.
    make_job(cluster, 1010, nodes_of(2) + nodes_of(3) + nodes_of(4, 4), tokens_per_s=48 * 900.0)
    make_job(cluster, 1011, [f"nid{n:06d}" for n in range(1, 25)], model={**MODEL, "global_batch": 256}, tokens_per_s=96 * 750.0)
    body = alice.get("/api/v1/jobs/compare/?jobs=alps/1011,alps/1002,alps/1001,alps/1010").json()
    scaling = body["scaling"]
    assert [run["job"] for run in scaling["runs"]] == ["alps/1001", "alps/1010", "alps/1011"]
    assert [run["gpus"] for run in scaling["runs"]] == [24, 48, 96]
    assert [run["kind"] for run in scaling["runs"]] == ["baseline", "strong", "weak"]
    assert [run["efficiency"] for run in scaling["runs"]] == pytest.approx([1.0, 0.9, 0.75])
    assert [run["speedup"] for run in scaling["runs"]] == pytest.approx([1.0, 1.8, 3.0])
    assert [run["ideal_speedup"] for run in scaling["runs"]] == pytest.approx([1.0, 2.0, 4.0])
    assert [run["tokens_per_s_per_gpu"] for run in scaling["runs"]] == pytest.approx([1000.0, 900.0, 750.0])
    assert scaling["left_out"] == ["alps/1002"] and "alps/1002" in scaling["note"]
    assert scaling["model"]["layers"] == 4
    # Across two models tokens/s are not comparable: the verdict compares MFU instead.
    assert body["same_model"] is False and "(MFU)" in body["verdict"] and "on a different model" in body["verdict"]


def test_no_scaling_view_without_two_runs_of_one_model(alice):
    scaling = alice.get("/api/v1/jobs/compare/?jobs=alps/1001,alps/1002").json()["scaling"]
    assert scaling["runs"] == [] and "same model shape" in scaling["note"]
    one = alice.get("/api/v1/jobs/compare/?jobs=alps/1003").json()
    assert one["scaling"]["runs"] == [] and one["verdict"] == "Only alps/1003: add another job to compare it with."
    assert all(row["differs"] is False for row in one["rows"])


def test_another_users_job_is_404_and_named_like_an_unknown_one(alice):
    response = alice.get("/api/v1/jobs/compare/?jobs=alps/1001,alps/2001,alps/9999")
    assert response.status_code == 404
    body = response.json()
    assert body["detail"] == "These jobs are unknown or not visible to you: alps/2001, alps/9999."
    assert [(item["field"], item["message"]) for item in body["errors"]] == [
        ("jobs", "alps/2001: no such job visible to you"), ("jobs", "alps/9999: no such job visible to you")]
    text = response.content.decode()
    assert "mallory" not in text and "secret" not in text and "alps/1001" not in text  # nothing of any job leaks
    alone = alice.get("/api/v1/jobs/compare/?jobs=alps/2001").json()
    assert alone["detail"] == "This job is unknown or not visible to you: alps/2001."


def test_a_job_token_compares_only_its_own_job(client, world):
    from apps.jobs.services import job_token_issue

    Job.objects.filter(pk=world[1001].pk).update(state="RUNNING", end_time=None)  # a token lasts while its job runs
    token = job_token_issue(Job.objects.get(pk=world[1001].pk), created_by="alice")
    auth = {"HTTP_AUTHORIZATION": f"JobToken {token}"}
    assert client.get("/api/v1/jobs/compare/?jobs=alps/1001", **auth).status_code == 200
    assert client.get("/api/v1/jobs/compare/?jobs=alps/1001,alps/1003", **auth).status_code == 404


def test_staff_see_every_job(api_client, make_user, world):
    api_client.force_authenticate(make_user("root", is_staff=True))
    body = api_client.get("/api/v1/jobs/compare/?jobs=alps/2001,alps/1001").json()
    assert [job["user"] for job in body["jobs"]] == ["mallory", "alice"]


@pytest.mark.parametrize("query", ["", "?jobs=", "?jobs=alps", "?jobs=alps/1001,alps/x", "?jobs=alps/1001,/3",
                                   "?jobs=" + ",".join(f"alps/{n}" for n in range(1, 14)), "?jobs=alps/0"])
def test_bad_references_are_400_naming_the_parameter(alice, query):
    response = alice.get(f"/api/v1/jobs/compare/{query}")
    assert response.status_code == 400, response.content
    assert {item["field"] for item in response.json()["errors"]} == {"jobs"}


def test_asking_twice_for_one_job_compares_it_once(alice):
    body = alice.get("/api/v1/jobs/compare/?jobs=alps/1001,alps/1001,alps/1003").json()
    assert [job["ref"] for job in body["jobs"]] == ["alps/1001", "alps/1003"]


def test_anonymous_callers_are_refused(client, world):
    assert client.get("/api/v1/jobs/compare/?jobs=alps/1001").status_code in (401, 403)


def test_the_page_says_the_verdict_first_and_names_what_it_left_out(client, make_user, world):
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    page = client.get("/jobs/compare/?jobs=alps/1001,alps/1003,alps/2001")
    assert page.status_code == 200
    html = page.content.decode()
    assert "alps/1003 trains 18 % more tokens/s per GPU than alps/1001" in html
    assert html.index('id="verdict-line"') < html.index('id="compare-form"') < html.index('id="compare-table"')
    assert "Left out: alps/2001 is unknown or not visible to you." in html
    assert "mallory" not in html and "secret-project-x" not in html
    assert page.context["answer"]["jobs"][1]["ref"] == "alps/1003"


@pytest.mark.parametrize("query, words", [
    ("", "Name the jobs to compare below"),
    ("?jobs=alps/1001", "One job alone has nothing to be compared with"),
    ("?jobs=alps/nope", "jobs: value 1: Give the job as &lt;cluster&gt;/&lt;job_id&gt;"),
    ("?jobs=alps/9999", "Left out: alps/9999 is unknown or not visible to you."),
])
def test_the_page_explains_empty_one_job_and_bad_states(client, make_user, world, query, words):
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    page = client.get(f"/jobs/compare/{query}")
    assert page.status_code == 200
    assert words in page.content.decode()


def test_two_demo_jobs_compare(api_client, make_user, transactional_db):
    """The demo's runs of one model at 32 to 512 GPUs: side by side, and the scaling view across them."""
    from tests.demo_snapshot import load_demo
    from apps.appmetrics.models import JobModelConfig

    load_demo()
    configs = list(JobModelConfig.objects.select_related("job__cluster").order_by("job__gpus"))
    assert len(configs) >= 2, "the demo plants runs of one model with their model configs"
    refs = [f"{config.job.cluster.name}/{config.job.job_id}" for config in configs]
    api_client.force_authenticate(make_user("compare-staff", is_staff=True))
    body = api_client.get(f"/api/v1/jobs/compare/?jobs={','.join(refs[:12])}").json()
    assert [job["ref"] for job in body["jobs"]] == refs[:12]
    assert rows_by_key(body)["gpus"]["differs"] is True
    runs = body["scaling"]["runs"]
    # The demo's Apertus-8B-shaped runs at 32 .. 512 GPUs, one global batch (strong scaling), per-GPU throughput
    # planted at 100, 97, 93, 87 and 80 % of the 32-GPU run's; a job training another model is left out.
    assert [run["gpus"] for run in runs] == [32, 64, 128, 256, 512]
    assert [run["kind"] for run in runs] == ["baseline", "strong", "strong", "strong", "strong"]
    assert [run["efficiency"] for run in runs] == pytest.approx([1.0, 0.97, 0.93, 0.87, 0.80], abs=0.02)
    for run in runs[1:]:
        assert run["efficiency"] == pytest.approx(run["tokens_per_s_per_gpu"] / runs[0]["tokens_per_s_per_gpu"])
        assert run["speedup"] == pytest.approx(run["efficiency"] * run["gpus"] / 32)
    assert "trains" in body["verdict"] or "MFU" in body["verdict"]


def test_the_job_page_link_offers_the_other_runs_of_the_model_the_user_may_see(make_user, world):
    from apps.appmetrics.compare import compare_link

    alice = make_user("alice", accounts=["a-llm01"])
    link = compare_link(world[1001], alice)
    # 1003 trains the same shape; 1002 another model; mallory's 2001 the same shape but not alice's to see.
    assert link["others"] == ["alps/1003"]
    assert link["url"] == "/jobs/compare/?jobs=alps/1001,alps/1003"
    assert link["words"] == "Compare with 1 other run of this model"
    assert compare_link(world[1002], alice) is None
    staff = make_user("root", is_staff=True)
    assert sorted(compare_link(world[1001], staff)["others"]) == ["alps/1003", "alps/2001"]


def test_without_javascript_the_form_adds_a_job_by_reloading(client, make_user, world):
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    page = client.get("/jobs/compare/?jobs=alps/1001&add=alps/1003")
    assert [entry["ref"] for entry in page.context["answer"]["jobs"]] == ["alps/1001", "alps/1003"]
    assert 'value="alps/1001,alps/1003"' in page.content.decode()


def test_the_verdict_of_runs_at_different_scales_names_the_scale_before_the_placement():
    """32 against 512 GPUs of one model: the 512-GPU run spans more groups too, but the first reason its per-GPU
    throughput is lower is the scale (the live demo said "its nodes span 1 dragonfly group, not 2")."""
    from apps.appmetrics.compare import verdict

    model = {"layers": 32, "hidden": 4096, "heads": 32, "seq_len": 4096, "vocab": 131072}
    small = {"ref": "alps/1", "gpus": 32, "model": model, "tokens_per_s_per_gpu": 7593.0, "placement": {"groups": 1}}
    large = {"ref": "alps/2", "gpus": 512, "model": model, "tokens_per_s_per_gpu": 6079.0, "placement": {"groups": 2}}
    words = verdict([large, small])
    assert words.startswith("alps/1 trains 25 % more tokens/s per GPU than alps/2 at the same model")
    assert "runs on 32 GPUs, not 512" in words and "dragonfly" not in words
