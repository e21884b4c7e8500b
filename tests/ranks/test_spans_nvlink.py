"""Communicator spans tell NVLink (every rank of a group on one node) from the network (issue 17: tp
groups "spanned 4 switches" because a node's 4 NICs hang on 4 switches, although tp traffic stays on
NVLink inside the node and never reaches a switch)."""
import pytest

from apps.ranks.layout import ParallelSizes, RankLayout, block_placement
from apps.ranks.ranktable import build_rank_table, communicator_spans
from apps.topology.generator import DragonflyParameters, generate
from apps.topology.placement import TopologyIndex

# 2 dragonfly groups of 8 nodes with 2 GPUs/NICs each: nid000001-08 in group 0, nid000009-16 in group 1;
# NIC h of nodes 1-4 on switch h of their group, of nodes 5-8 on switch 2 + h (likewise 9-12, 13-16).
INDEX = TopologyIndex(generate(DragonflyParameters(groups=2, chassis_per_cabinet=2, switch_blades_per_chassis=2,
                                                   blades_per_chassis=2, nodes_per_blade=2, nics_per_node=2,
                                                   global_links_per_group_pair=1)))
HOSTS = [f"nid{n:06d}" for n in range(1, 17)]


def spans_for(tp, pp, placement, kinds=("tp", "pp", "dp")):
    layout = RankLayout(ParallelSizes(tp=tp, pp=pp), len(placement))
    table = build_rank_table(layout.all_coords(), placement, INDEX)
    return {span.kind: span for span in communicator_spans(table, {kind: layout.groups_array(kind) for kind in kinds})}


def test_tp_inside_a_node_is_nvlink_only_although_its_nics_hang_on_two_switches():
    spans = spans_for(2, 2, block_placement(32, HOSTS, 2))
    tp = spans["tp"]
    assert (tp.groups, tp.inside_node, tp.network_groups, tp.max_nodes) == (16, 16, 0, 1)
    assert (tp.max_switches, tp.max_dragonfly_groups, tp.spanning_groups) == (0, 0, 0)
    assert tp.words == "All 16 groups stay inside one node: NVLink only."
    # Stage 0 on nodes 1-8 (group 0), stage 1 on nodes 9-16 (group 1): every pipeline leaves its group.
    pp = spans["pp"]
    assert (pp.inside_node, pp.max_nodes, pp.max_switches, pp.max_dragonfly_groups, pp.spanning_groups) == (0, 2, 2, 2, 16)
    assert pp.words == "All 16 cross the network: up to 2 nodes on 2 switches in 2 dragonfly groups; 16 leave a dragonfly group."
    # A dp group: one lane of one stage over 8 nodes, whose NICs of that lane hang on 2 switches of one group.
    dp = spans["dp"]
    assert (dp.inside_node, dp.max_nodes, dp.max_switches, dp.max_dragonfly_groups, dp.spanning_groups) == (0, 8, 2, 1, 0)
    assert dp.words.endswith("up to 8 nodes on 2 switches in 1 dragonfly group; none leaves a dragonfly group.")


def test_tp_wider_than_a_node_crosses_the_network():
    spans = spans_for(4, 1, block_placement(16, HOSTS[:8], 2), kinds=("tp",))
    tp = spans["tp"]
    assert (tp.groups, tp.inside_node, tp.max_nodes, tp.max_switches, tp.max_dragonfly_groups) == (4, 0, 2, 2, 1)
    assert tp.words == "All 4 cross the network: up to 2 nodes on 2 switches in 1 dragonfly group; none leaves a dragonfly group."


def test_some_groups_inside_a_node_and_one_across():
    # Ranks 0, 1 on nid000001; ranks 2, 3 on lane 0 of nid000002 (switch 0.0) and of nid000005 (switch 0.2).
    spans = spans_for(2, 1, [("nid000001", 0), ("nid000001", 1), ("nid000002", 0), ("nid000005", 0)], kinds=("tp",))
    tp = spans["tp"]
    assert (tp.inside_node, tp.network_groups, tp.max_nodes, tp.max_switches, tp.max_dragonfly_groups) == (1, 1, 2, 2, 1)
    assert tp.words == ("1 of 2 stays inside one node (NVLink only); the other 1 crosses the network: up to 2 nodes on "
                        "2 switches in 1 dragonfly group; it stays in one dragonfly group.")


def test_one_group_across_dragonfly_groups():
    tp = spans_for(2, 1, [("nid000001", 0), ("nid000009", 0)], kinds=("tp",))["tp"]
    assert (tp.inside_node, tp.max_dragonfly_groups, tp.spanning_groups) == (0, 2, 1)
    assert tp.words == ("The group crosses the network: up to 2 nodes on 2 switches in 2 dragonfly groups; "
                        "it leaves its dragonfly group.")


def test_hosts_outside_the_topology_still_count_as_nodes():
    # Both ranks on one host the topology does not know: still one node, NVLink only.
    tp = spans_for(2, 1, [("nid999999", 0), ("nid999999", 1)], kinds=("tp",))["tp"]
    assert (tp.inside_node, tp.groups_with_unplaced_ranks, tp.max_switches) == (1, 1, 0)
    tp = spans_for(2, 1, [("nid999999", 0), ("nid999998", 0)], kinds=("tp",))["tp"]
    assert (tp.inside_node, tp.max_nodes, tp.max_switches) == (0, 2, 0)  # two nodes, neither placed on a switch


NODES = [f"nid{n:06d}" for n in range(1, 9)]


@pytest.fixture
def job(alps_job):
    return alps_job(NODES)


def test_layout_api_and_page_say_nvlink_for_tp(alice, job, client, django_user_model):
    body = alice.put("/api/v1/jobs/alps/1/layout/", {"tp": 4, "pp": 2}, format="json").json()
    spans = {span["kind"]: span for span in body["communicators"]}
    # alps: 4 GPUs per node, NIC h on switch blade h: a tp group of 4 is one node with NICs on 4 switches.
    assert (spans["tp"]["groups"], spans["tp"]["inside_node"], spans["tp"]["max_switches"]) == (8, 8, 0)
    assert (spans["pp"]["inside_node"], spans["pp"]["max_nodes"]) == (0, 2)
    client.force_login(django_user_model.objects.get(username="alice"))
    page = client.get("/jobs/alps/1/").content.decode()
    row = page[page.index('<tr data-kind="tp"'):]
    row = row[:row.index("</tr>")]
    assert "All 8 groups stay inside one node: NVLink only." in row
    assert row.count('<td class="num">–</td>') == 4  # no network columns for it
    assert "Inside one node (NVLink)" in page


def test_table_rows_use_thousands_separators_and_leave_network_columns_empty_for_nvlink():
    from apps.ranks.panel import span_row
    from apps.ranks.ranktable import CommunicatorSpan

    row = span_row(CommunicatorSpan("tp", 2688, 4, 0, 0, 0, inside_node=2688))
    assert (row["groups"], row["inside_node"], row["network_groups"], row["network"]) == ("2,688", "2,688", "0", False)
    row = span_row(CommunicatorSpan("dp", 8, 1344, 96, 12, 8, inside_node=0, max_nodes=1344))
    assert (row["size"], row["max_nodes"], row["network"]) == ("1,344", "1,344", True)
    assert row["words"].startswith("All 8 cross the network: up to 1,344 nodes on 96 switches in 12 dragonfly groups")
