"""The layout and ranks endpoints under random, mostly malformed input: never a 5xx. The job runs on
hosts partly outside the topology, so accepted layouts also exercise ranks without NIC placement.
Derandomised: the same examples on every run."""
import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.jobs.models import Cluster, Job, node_search_text

NODES = [f"nid{n:06d}" for n in range(1, 5)] + ["nid999001"]  # the last one is not in the topology

anything = st.one_of(st.integers(-5, 70), st.sampled_from([None, 10**30, 2**63, 1024, 4096, 100_000, 0]),
                     st.text(max_size=4), st.booleans(), st.floats(allow_nan=False, allow_infinity=False))
entry = st.one_of(st.none(), st.integers(), st.fixed_dictionaries(
    {"rank": anything, "host": st.sampled_from([*NODES, "x" * 70, "", 5]), "local_rank": anything}))
SIZES = ("tp", "pp", "cp", "ep", "etp", "dp", "vpp", "num_layers", "first_stage_layers", "last_stage_layers")
careless = st.fixed_dictionaries({}, optional={name: anything for name in SIZES} | {
    "order": st.one_of(st.sampled_from(["tp-cp-ep-dp-pp", "pp-dp", "TP-DP-PP", "tp-tp", "", "x" * 50]), st.text(max_size=15)),
    "ranks": st.one_of(st.none(), st.lists(entry, max_size=8), st.text(max_size=3))})
small = st.sampled_from([1, 2, 4, 5])
exact_map = st.integers(1, 20).flatmap(lambda world: st.permutations(range(20)).map(
    lambda slots: [{"rank": r, "host": NODES[slots[r] // 4], "local_rank": slots[r] % 4} for r in range(world)]))
plausible = st.fixed_dictionaries({"tp": small, "pp": small}, optional={
    "cp": small, "ep": small, "etp": small, "dp": small,
    "order": st.permutations(["tp", "cp", "ep", "dp", "pp"]).map("-".join), "ranks": st.one_of(st.none(), exact_map)})


@pytest.mark.django_db
def test_layout_and_ranks_never_answer_5xx(api_client, make_user):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    cluster = Cluster.objects.create(name="alps")
    Job.objects.create(cluster=cluster, job_id=1, user_name="alice", state="RUNNING", node_list=NODES, node_count=5, tasks=20,
                       gpus=20, node_search=node_search_text(NODES))
    api_client.force_authenticate(make_user("alice"))
    api_client.raise_request_exception = False
    answers: dict[int, int] = {}

    @settings(max_examples=200, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(plausible, careless), st.text(max_size=12), st.sampled_from(["tp", "dp", "pp", "cp", "ep"]))
    def check(body, selection, dimension):
        response = api_client.put("/api/v1/jobs/alps/1/layout/", body, format="json")
        answers[response.status_code] = answers.get(response.status_code, 0) + 1
        assert response.status_code < 500, (body, response.content[:300])
        response = api_client.get("/api/v1/jobs/alps/1/ranks/", {dimension: selection})
        assert response.status_code < 500, (selection, response.content[:300])
        assert api_client.get("/api/v1/jobs/alps/1/layout/").status_code == 200

    check()
    assert answers.get(200, 0) >= 10 and answers.get(400, 0) >= 50, answers  # both paths were exercised
