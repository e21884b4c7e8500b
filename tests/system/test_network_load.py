"""Network load per group pair on the system page and the topology page's "network load" colouring: the verdict
in words (hand-built loads, no database) and the demo's busy global link between the Megatron run's groups."""
import pytest

from apps.system.network import filesystem_summary, network_summary
from apps.topology.link_load import LINK_BYTES_PER_S, LinkLoad, PairLoad


def test_the_verdict_names_the_busiest_pair_and_the_jobs_spanning_it():
    load = LinkLoad(pairs={(3, 7): PairLoad(3, 7, links=4, a_to_b=0.83 * 4 * LINK_BYTES_PER_S, b_to_a=1e9, ports=8),
                           (1, 2): PairLoad(1, 2, links=4, a_to_b=2e9, b_to_a=4e9, ports=8)},
                    switches={(3, 0): 0.9}, ports_measured=16)
    jobs = {"1200772": {3, 7}, "1200780": {7, 3, 9}, "another project's job": {3}}
    summary = network_summary(load, [1, 2, 3, 7], jobs, minutes=10)
    assert summary["verdict"] == "Busiest: group 3 ↔ 7 at 83 % of its links, shared by jobs 1200772 and 1200780"
    z = summary["matrix"]["z"]
    assert z[2][3] == z[3][2] == 83.0 and z[0][1] == pytest.approx(100 * 4e9 / (4 * LINK_BYTES_PER_S), abs=0.05)
    assert z[0][2] is None  # not measured: blank, not zero
    assert [row["percent"] for row in summary["busiest"]] == [83.0, 4.0]
    lonely = network_summary(LinkLoad(pairs={(1, 2): PairLoad(1, 2, links=2, a_to_b=5e9)}), [1, 2], {}, minutes=10)
    assert lonely["verdict"].endswith("at 10 % of its links, no running job spans both groups")
    nothing = network_summary(None, [1, 2], jobs, minutes=10)
    assert nothing["verdict"] is None and "network load is unknown" in nothing["note"]


def test_filesystem_load_sums_the_running_jobs():
    rates = [{"label": "job 1", "read_bytes_per_s": 1e9, "write_bytes_per_s": 3e9, "metadata_ops_per_s": 10},
             {"label": "job 2", "read_bytes_per_s": 0.5e9, "write_bytes_per_s": 0.0, "metadata_ops_per_s": 5}]
    summary = filesystem_summary(rates, 2, 3)
    assert (summary["write_gb_per_s"], summary["read_gb_per_s"], summary["metadata_ops_per_s"]) == (3.0, 1.5, 15)
    assert summary["verdict"].endswith("most: job 1") and "2 of 3 running jobs" in summary["note"]
    assert filesystem_summary([], 0, 3)["verdict"] is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.engine_independent  # what the demo planted; the load's reading is the plain tests above
def test_demo_busy_global_link_is_shared_by_the_megatron_run(client, make_user):
    from tests.demo_snapshot import load_demo

    from apps.core.demo import feed_demo
    from apps.system.selectors import system_network
    from apps.topology.selectors import topology_current

    load_demo()
    feed_demo(speed=1)  # a restored snapshot (up to 15 min old) brought up to now: the load is the last 10 minutes'
    staff = make_user("net-staff", is_staff=True)
    answer = system_network(staff)
    network = answer["network"]
    busy = answer["_load"].busiest()
    assert busy is not None and busy.fraction == pytest.approx(0.83, abs=0.01)
    assert network["verdict"].startswith(f"Busiest: group {busy.a} ↔ {busy.b} at 83 % of its links, shared by")
    assert "1200772" in network["verdict"]
    others = sorted(pair.fraction for pair in answer["_load"].pairs.values())[:-1]
    assert others and max(others) < 0.2  # the busy pair stands out from every other
    assert len(answer["_load"].pairs) == len(topology_current().groups) * (len(topology_current().groups) - 1) // 2
    client.force_login(staff)
    page = client.get("/topology/?color=network")
    assert page.status_code == 200 and b'id="link-verdict"' in page.content and b"83 %" in page.content
    system = client.get("/system/")
    assert system.status_code == 200 and b"network-matrix" in system.content
    # the groups of the busy pair say it in their row of the load table, and the API gives the same
    assert f"<td>{busy.a}</td>".encode() in system.content and f"83.0 % <span class=\"muted small\">(↔ {busy.b})".encode() in system.content
    groups = {row["group"]: row["network"] for row in client.get("/api/v1/system/overview/").json()["groups"]}
    assert groups[busy.a] == {"busiest_pair_percent": 83.0, "with_group": busy.b}
    assert all(value is None or value["busiest_pair_percent"] < 20 for group, value in groups.items() if group not in (busy.a, busy.b))
