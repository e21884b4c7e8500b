"""Ranks: layout and placement of 10,752 ranks (the whole reference machine as one job)."""
from pathlib import Path

import numpy as np

from bench.common import Figure, median_seconds


def run(workdir: Path) -> list[Figure]:
    from apps.ranks.layout import ParallelSizes, RankLayout, block_placement
    from apps.ranks.ranktable import build_rank_table, communicator_spans, pipeline_boundaries
    from apps.topology.generator import ALPS_GH200, generate
    from apps.topology.placement import TopologyIndex

    topology = generate(ALPS_GH200)
    index = TopologyIndex(topology)
    hosts = [node.hostname for node in topology.nodes]
    world = len(hosts) * 4

    def layout_and_placement():
        layout = RankLayout(ParallelSizes(tp=4, pp=8), world)
        table = build_rank_table(layout.all_coords(), block_placement(world, hosts, 4), index)
        communicator_spans(table, {kind: layout.groups_array(kind) for kind in ("tp", "pp", "dp")})
        pipeline_boundaries(table, layout.groups_array("pp"))

    seconds = median_seconds(layout_and_placement, repeats=7)
    rows = np.array([index.row_of[h] for h in hosts], dtype=np.int64)

    def bare():
        # The same arithmetic with no layout model: rank → (tp, dp, pp) and rank → switch.
        ranks = np.arange(world)
        _ = (ranks % 4, (ranks // 4) % (world // 32), ranks // (world // 8))
        _ = index.nic_switch[np.repeat(rows, 4), np.tile(np.arange(4), len(rows))]

    floor = median_seconds(bare, repeats=7)
    return [Figure(f"layout + placement of {world:,} ranks", seconds, floor,
                   "bare numpy rank arithmetic and switch lookup for the same ranks",
                   "TP=4 PP=8 DP=336 on all 2,688 nodes: coordinates, rank table, tp/pp/dp spans, pipeline boundaries; target <= 50 ms")]
