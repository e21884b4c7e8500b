"""Per-communicator verdicts (issue 35, item 8): the communicators table said only where each kind's
groups run (nodes, switches, dragonfly groups spanned). Each kind now gets how it is likely to perform
there, with its reason and a level: a TP group that leaves NVLink, ring attention (CP) or an MoE
all-to-all (EP) over the network, a DP all-reduce crossing global links (critical when a link pair it
crosses is measured saturated), pipeline point-to-point that is usually fine. Hand-made layouts on a
small generated dragonfly; CP and EP groups come from Megatron's rank order (apps.ranks.layout)."""
from apps.ranks.layout import ParallelSizes, RankLayout, block_placement
from apps.ranks.ranktable import CommunicatorSpan, build_rank_table, communicator_spans
from apps.ranks.verdicts import Crossing, communicator_verdict, communicator_verdicts, crossing
from apps.topology.generator import DragonflyParameters, generate
from apps.topology.placement import TopologyIndex

# 3 dragonfly groups of 8 nodes with 2 GPUs/NICs each: nid000001-08 in group 0, 09-16 in group 1, 17-24 in
# group 2; two global cables between every pair of groups.
INDEX = TopologyIndex(generate(DragonflyParameters(groups=3, chassis_per_cabinet=2, switch_blades_per_chassis=2,
                                                   blades_per_chassis=2, nodes_per_blade=2, nics_per_node=2,
                                                   global_links_per_group_pair=2)))
HOSTS = [f"nid{n:06d}" for n in range(1, 25)]
KINDS = ("tp", "cp", "ep", "dp", "pp", "mp")


def verdicts(placement, loads=None, **sizes):
    sizes.setdefault("pp", 1)
    sizes.setdefault("tp", 1)
    layout = RankLayout(ParallelSizes(**sizes), len(placement))
    table = build_rank_table(layout.all_coords(), placement, INDEX)
    groups = {kind: layout.groups_array(kind) for kind in KINDS}
    spans = communicator_spans(table, groups)
    return communicator_verdicts(table, spans, groups, loads), table, groups


def test_tp_on_one_node_is_fast_and_tp_across_nodes_is_slow_with_the_gpus_per_node_to_keep():
    [found, *_] = verdicts(block_placement(16, HOSTS[:8], 2), tp=2)
    assert (found["tp"].level, found["tp"].words[:13]) == ("ok", "fast: NVLink ")
    [found, *_] = verdicts(block_placement(16, HOSTS[:8], 2), tp=4)
    assert found["tp"].level == "warning"
    assert found["tp"].words == ("slow: TP all-reduces leave NVLink for the Slingshot NICs every layer (4 of 4 TP groups "
                                 "span up to 2 nodes) — keep TP ≤ 2 GPUs per node.")


def test_a_tp_group_leaving_its_dragonfly_group_is_critical():
    # tp 2 over lane 0 of a node in group 0 and one in group 1.
    [found, *_] = verdicts([("nid000001", 0), ("nid000009", 0)], tp=2)
    assert found["tp"].level == "critical"
    assert "leave NVLink" in found["tp"].words and "(the TP group spans 2 nodes, in 2 dragonfly groups)" in found["tp"].words
    # Fits a node (tp 2 = 2 GPUs) but Slurm placed it over two: the advice is the placement, not the size.
    assert "place each TP group on one node" in found["tp"].words


def test_cp_and_ep_rows_follow_megatron_order_and_judge_their_heavy_traffic():
    # tp 1, cp 2 on 2-GPU nodes: Megatron's tp-cp-ep-dp-pp puts ranks 0, 1 in one CP group: one node.
    found, _, groups = verdicts(block_placement(16, HOSTS[:8], 2), cp=2)
    assert groups["cp"][0].tolist() == [0, 1]
    assert found["cp"].level == "ok" and "ring attention passes its K/V blocks over NVLink" in found["cp"].words
    # cp 4 spans two nodes of one dragonfly group: ring attention over the network every layer.
    found, _, groups = verdicts(block_placement(16, HOSTS[:8], 2), cp=4)
    assert groups["cp"][0].tolist() == [0, 1, 2, 3]
    assert found["cp"].level == "warning"
    assert found["cp"].words.startswith("slow: ring attention passes K/V blocks over the network every layer (4 of 4 CP "
                                        "groups span up to 2 nodes)")
    # ep 4 (expert view: tp 1, ep 4): all-to-all over two nodes of one group is heavy.
    found, _, groups = verdicts(block_placement(16, HOSTS[:8], 2), ep=4)
    assert groups["ep"][0].tolist() == [0, 1, 2, 3]
    assert found["ep"].level == "warning" and found["ep"].words.startswith("heavy: the all-to-all of every MoE layer")


def test_ep_across_dragonfly_groups_is_critical_and_names_the_global_links():
    # 2 nodes per group in groups 0, 1 and 2: ep 12 spans all three.
    placement = block_placement(12, ["nid000001", "nid000002", "nid000009", "nid000010", "nid000017", "nid000018"], 2)
    found, table, groups = verdicts(placement, ep=12)
    assert crossing(table, groups["ep"]) == Crossing({(0, 1): 1, (0, 2): 1, (1, 2): 1}, cables=6)
    assert found["ep"].level == "critical"
    assert found["ep"].words.startswith("slow: the all-to-all of every MoE layer crosses 6 global links between 3 group "
                                        "pairs (the EP group spans 3 dragonfly groups)")


def test_dp_inside_a_group_is_fine_across_groups_exposed_and_critical_where_a_crossed_link_is_saturated():
    found, *_ = verdicts(block_placement(16, HOSTS[:8], 2), tp=2)  # 8 nodes of group 0
    assert found["dp"].level == "ok" and found["dp"].words.startswith("fine: the gradient all-reduce runs once per step")
    placement = block_placement(32, HOSTS[:16], 2)  # groups 0 and 1
    found, table, groups = verdicts(placement, tp=2)
    assert crossing(table, groups["dp"]) == Crossing({(0, 1): 2}, cables=2)
    assert found["dp"].level == "warning"
    assert found["dp"].words.startswith("exposed: the gradient all-reduce crosses the 2 global links between dragonfly "
                                        "groups 0 ↔ 1 (2 of 2 DP groups span up to 2 dragonfly groups)")
    # A busy but not saturated pair, or a saturated pair the job does not cross, changes nothing.
    found, *_ = verdicts(placement, loads={(0, 1): 0.5, (1, 2): 0.99}, tp=2)
    assert found["dp"].level == "warning"
    found, *_ = verdicts(placement, loads={(0, 1): 0.92}, tp=2)
    assert found["dp"].level == "critical"
    assert ("and the global links between dragonfly groups 0 ↔ 1 are saturated, at 92 % of their capacity"
            in found["dp"].words)


def test_pipeline_across_groups_is_usually_fine_and_a_warning_only_on_a_saturated_link():
    placement = block_placement(32, HOSTS[:16], 2)  # stage 0 in group 0, stage 1 in group 1
    found, *_ = verdicts(placement, tp=2, pp=2)
    assert found["pp"].level == "ok"
    assert found["pp"].words.startswith("usually fine: point-to-point activations between neighbouring stages, little traffic")
    found, *_ = verdicts(placement, loads={(0, 1): 0.85}, tp=2, pp=2)
    assert found["pp"].level == "warning" and "85 %" in found["pp"].words


def test_unused_kinds_say_so_and_every_verdict_is_one_sentence_with_a_level():
    found, *_ = verdicts(block_placement(16, HOSTS[:8], 2), tp=2)
    assert found["cp"].words == "not used: CP 1, no context parallelism (no ring attention)."
    assert found["ep"].words == "not used: EP 1, no expert parallelism (no all-to-all)."
    for verdict in found.values():
        assert verdict.level in ("ok", "warning", "critical")
        assert verdict.words.endswith(".") and verdict.words.count(". ") == 0


def test_a_verdict_without_topology_numbers_still_reads():
    # A DP span that leaves a group but whose pairs are unknown (no crossing given): no load, a warning.
    span = CommunicatorSpan("dp", 4, 8, 4, 2, 4, inside_node=0, max_nodes=8)
    verdict = communicator_verdict(span, per_node=4, crossed=Crossing())
    assert verdict.level == "warning" and verdict.words.startswith("exposed: the gradient all-reduce crosses the global links")
