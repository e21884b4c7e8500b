"""The job in context (apps/system/context.py): hand-built worlds, no database."""
from datetime import datetime, timedelta, timezone

from apps.system.context import HIGH_LINK, Other, crowding_finding, job_context

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def world():
    """Three groups of four nodes, two switches per group, each node's NIC on one switch."""
    placement = {}
    for group in (3, 4, 5):
        for i in range(4):
            placement[f"g{group}n{i}"] = (group, ((group, i // 2),))
    return placement, {3: 4, 4: 4, 5: 4}


def at(minutes):
    return T0 + timedelta(minutes=minutes)


def test_keeps_only_jobs_on_the_job_groups_that_overlapped_its_window_with_when():
    placement, sizes = world()
    others = [
        Other(1, ("g4n2", "g4n3"), at(70), None, gpus=8, score=40, link=0.9),  # group 4, from 13:10, running
        Other(2, ("g5n0",), at(0), None, gpus=4, score=80, link=0.1),  # group 5: not ours
        Other(3, ("g3n3",), at(-120), at(-10), gpus=4, score=50, link=0.2),  # ended before the job started
        Other(4, ("g3n2", "g5n1"), at(-30), at(30), gpus=8, score=20, link=0.3),  # group 3 until 12:30
    ]
    found = job_context(hosts=["g3n0", "g3n1", "g4n0"], window=(at(0), None), placement=placement, others=others,
                        group_nodes=sizes)
    assert [n.other.key for n in found.neighbours] == [1, 4]  # busiest link first
    one, four = found.neighbours
    assert one.groups == (4,) and one.nodes_in_groups == 2 and one.since == at(70) and one.until is None
    assert four.groups == (3,) and four.nodes_in_groups == 1 and four.since == at(0) and four.until == at(30)
    assert four.switches == 0 and one.switches == 0  # their nodes sit on the groups' other switches
    loads = {g.group: g for g in found.groups}
    assert loads[4].neighbours == 1 and loads[4].neighbour_nodes == 2 and loads[4].share == 0.5 and loads[4].top_link == 0.9
    assert loads[3].mean_score == 20


def test_switches_shared_are_those_both_jobs_nics_use():
    placement, sizes = world()
    # the job is on switch (3, 0) only; one neighbour on (3, 0), another on (3, 1)
    others = [Other(1, ("g3n1",), at(0), None, link=0.2), Other(2, ("g3n2", "g3n3"), at(0), None, link=0.1)]
    found = job_context(hosts=["g3n0"], window=(at(0), at(60)), placement=placement, others=others, group_nodes=sizes)
    switches = {n.other.key: n.switches for n in found.neighbours}
    assert switches == {1: 1, 2: 0}
    assert found.job_switches == 1 and found.shared_switches == 1


def test_pipeline_boundaries_that_leave_a_group_name_the_jobs_on_either_side():
    placement, sizes = world()
    # two pipelines of four stages: stage 1 -> 2 crosses group 3 -> 4 in both, 2 -> 3 stays in group 4
    pipelines = [["g3n0", "g3n0", "g4n0", "g4n0"], ["g3n1", "g3n1", "g4n1", "g4n1"]]
    heavy = Other(7, ("g4n2", "g4n3"), at(70), None, link=HIGH_LINK + 0.25, score=35)
    calm = Other(8, ("g5n0",), at(0), None, link=0.95)  # busy, but elsewhere
    found = job_context(hosts=["g3n0", "g3n1", "g4n0", "g4n1"], window=(at(0), None), placement=placement,
                        others=[heavy, calm], group_nodes=sizes, pipelines=pipelines)
    [boundary] = found.boundaries
    assert boundary.stage == 1 and boundary.pairs == ((3, 4),) and (boundary.pipelines, boundary.of) == (2, 2)
    assert [n.other.key for n in boundary.neighbours] == [7]
    assert boundary.words == "1→2 crosses group 3 → 4"
    title, action = crowding_finding(found, lambda moment: f"{moment:%H:%M}")
    assert "1→2 crosses group 3 → 4" in title and "has run there since 13:10" in title and "85 %" in title
    assert "13:10" in action


def test_no_warning_without_a_heavy_communicator_and_unknown_hosts_are_said():
    placement, sizes = world()
    others = [Other(1, ("g3n1",), at(0), None, link=HIGH_LINK - 0.01), Other(2, ("g3n2",), at(0), None)]  # 2: not scored
    found = job_context(hosts=["g3n0", "nowhere"], window=(at(0), None), placement=placement, others=others, group_nodes=sizes)
    assert len(found.neighbours) == 2 and found.crowding == []
    assert crowding_finding(found, str) is None
    assert found.unplaced == ("nowhere",)
    assert found.boundaries == []


def test_a_heavy_neighbour_without_a_layout_is_named_by_its_groups():
    placement, sizes = world()
    found = job_context(hosts=["g4n0"], window=(at(0), None), placement=placement,
                        others=[Other(1, ("g4n1", "g4n2", "g4n3"), at(15), None, link=0.91, score=30)], group_nodes=sizes)
    title, _ = crowding_finding(found, lambda moment: f"{moment:%H:%M}")
    assert "shares dragonfly group 4" in title and "91 %" in title and "3 nodes" in title and "12:15" in title
