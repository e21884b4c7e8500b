"""The rank table and its views, on hand-checkable cases (no database)."""
import pytest

from apps.ranks.layout import ParallelSizes, RankLayout, block_placement
from apps.ranks.ranktable import (
    boundary_verdict,
    build_rank_table,
    communicator_spans,
    node_labels,
    pipeline_boundaries,
    stage_replica_grid,
)
from apps.topology.generator import DragonflyParameters, generate
from apps.topology.placement import TopologyIndex

# 2 groups of 8 nodes with 2 NICs: nid000001-08 in group 0, nid000009-16 in group 1.
INDEX = TopologyIndex(generate(DragonflyParameters(groups=2, chassis_per_cabinet=2, switch_blades_per_chassis=2,
                                                   blades_per_chassis=2, nodes_per_blade=2, nics_per_node=2,
                                                   global_links_per_group_pair=1)))
HOSTS = [f"nid{n:06d}" for n in range(1, 17)]


def table_for(tp, pp, hosts=HOSTS):
    layout = RankLayout(ParallelSizes(tp=tp, pp=pp), len(hosts) * 2)
    return layout, build_rank_table(layout.all_coords(), block_placement(layout.world_size, hosts, 2), INDEX)


def test_pipeline_boundaries_and_verdict():
    layout, table = table_for(tp=2, pp=2)  # W=32, dp=8: stage 1 of replica d is node d + 8 (group 1)
    boundaries = pipeline_boundaries(table, layout.groups_array("pp"))
    assert len(boundaries) == 16 and boundaries.count("inter-group") == 16
    assert boundary_verdict(boundaries).startswith("16 of 16 pipeline boundaries are inter-group; e.g. stage 0→1 of replica 0")
    layout, table = table_for(tp=2, pp=1)
    assert boundary_verdict(pipeline_boundaries(table, layout.groups_array("pp"))) == "There is one pipeline stage: no pipeline boundaries."


def test_communicator_spans():
    layout, table = table_for(tp=2, pp=2)
    spans = {span.kind: span for span in communicator_spans(table, {k: layout.groups_array(k) for k in ("tp", "dp", "pp")})}
    # Each tp group is one node (two NICs on two switches): NVLink only, so no switch counts.
    assert (spans["tp"].size, spans["tp"].inside_node, spans["tp"].max_switches, spans["tp"].spanning_groups) == (2, 16, 0, 0)
    assert (spans["pp"].max_dragonfly_groups, spans["pp"].spanning_groups) == (2, 16)
    assert spans["dp"].max_dragonfly_groups == 1


def test_labels_selection_and_grid():
    layout, table = table_for(tp=2, pp=2)
    labels, muted = node_labels(table, "pp", None)
    assert labels["nid000001"] == "pp 0" and labels["nid000016"] == "pp 1" and muted == ("pp mixed",)
    labels, _ = node_labels(table, "tp", None)
    assert set(labels.values()) == {"tp mixed"}  # both lanes on every node
    selected = table.select(dp=[1], pp=[1])
    assert sorted(selected.tolist()) == [18, 19]
    labels, muted = node_labels(table, "pp", selected)
    assert [host for host, label in labels.items() if label == "selected ranks"] == ["nid000010"]
    grid = stage_replica_grid(table, layout.rank_of, layout.pp, 3, set(selected.tolist()))
    assert [[cell["host"] for cell in row["cells"]] for row in grid] == [["nid000001", "nid000002", "nid000003"],
                                                                          ["nid000009", "nid000010", "nid000011"]]
    # Stage 1 of replica 1 is rank 18 (tp 0): the only selected cell.
    assert [[cell["selected"] for cell in row["cells"]] for row in grid] == [[False, False, False], [False, True, False]]
    assert grid[1]["cells"][1]["rank"] == 18


def test_rank_maps_that_do_not_fit_the_topology_keep_their_hosts():
    """Hosts outside the topology and NICs it lacks: ranks keep host and GPU, lose NIC, switch and group."""
    layout = RankLayout(ParallelSizes(tp=2, pp=2), 8)
    placement = [("nid999999", 0), ("nid999999", 1), ("nid000001", 0), ("nid000001", 5),
                 ("nid000009", 0), ("nid000009", 1), ("nid000002", 0), ("nid000002", 1)]
    table = build_rank_table(layout.all_coords(), placement, INDEX)
    assert table.hosts == [host for host, _ in placement] and table.local_rank.tolist() == [lane for _, lane in placement]
    assert table.placed.tolist() == [False, False, True, False, True, True, True, True]
    assert table.gaps.ranks == 3 and table.gaps.hosts_outside == ("nid999999",)
    assert table.gaps.nics_missing == ("nid000001:hsn5",) and table.gaps.hosts == ("nid999999", "nid000001")
    assert table.gaps.message(8) == (
        "3 of 8 ranks have no NIC placement: 1 host(s) are not in the topology (nid999999); 1 NIC(s) the ranks use are "
        "missing from it (nid000001:hsn5). They keep their host and GPU, but have no NIC, switch or group, and are left "
        "out of the switch and group counts.")
    rows = table.rows(range(8))
    assert [(r["nic"], r["switch"], r["group"]) for r in rows[:4]] == [(None, None, None)] * 2 + [("hsn0", rows[2]["switch"], 0), (None, None, None)]
    assert rows[4]["group"] == 1
    # pp groups: [0, 4], [1, 5], [2, 6], [3, 7]; only 2 → 6 (group 0 → 0) has both ends placed.
    boundaries = pipeline_boundaries(table, layout.groups_array("pp"))
    assert (len(boundaries), boundaries.classified, boundaries.unplaced) == (4, 1, 3)
    assert boundary_verdict(boundaries).endswith("3 of 4 boundaries involve ranks without NIC placement and are not classified.")
    spans = {span.kind: span for span in communicator_spans(table, {k: layout.groups_array(k) for k in ("tp", "dp", "pp")})}
    # Every tp pair runs on one node (hosts outside the topology included): NVLink only, no switch counts.
    assert spans["tp"].groups_with_unplaced_ranks == 2 and spans["tp"].max_switches == 0
    assert (spans["tp"].inside_node, spans["tp"].max_nodes) == (4, 1)
    # Only the placed members count: pp [2, 6] stays in group 0; dp [4, 6] and [5, 7] join groups 1 and 0; [1, 3] has none.
    assert (spans["pp"].max_dragonfly_groups, spans["pp"].spanning_groups, spans["pp"].groups_with_unplaced_ranks) == (1, 0, 3)
    assert (spans["dp"].max_dragonfly_groups, spans["dp"].spanning_groups, spans["dp"].groups_with_unplaced_ranks) == (2, 2, 2)
    grid = stage_replica_grid(table, layout.rank_of, layout.pp, 2, set())
    assert grid[0]["cells"][0]["group"] is None and grid[0]["cells"][0]["switch"] is None
    # Nothing placed at all: said so, no classification.
    nowhere = build_rank_table(layout.all_coords(), [("nid999999", lane % 2) for lane in range(8)], INDEX)
    assert boundary_verdict(pipeline_boundaries(nowhere, layout.groups_array("pp"))).startswith(
        "None of the 4 pipeline boundaries can be placed on the network")
    assert communicator_spans(nowhere, {"tp": layout.groups_array("tp")})[0].max_switches == 0
