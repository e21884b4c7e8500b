"""Megatron-LM rank layout (apps.ranks.layout): worked examples from the reference notes
(topology-megatron.md §2), properties over random configurations checked against a brute-force
decoding written here, every LayoutError, and Slurm block placement. No database needed."""
import itertools
import random
import time
from math import prod

import numpy as np
import pytest

from apps.ranks.layout import (
    GROUP_KINDS,
    KIND_SIZE_TOKENS,
    LayoutError,
    ParallelSizes,
    RankGenerator,
    RankLayout,
    block_placement,
)


@pytest.fixture(scope="module")
def worked():
    """§2.6: W=512, TP=4, PP=8, DP=16, default order."""
    return RankLayout(ParallelSizes(tp=4, pp=8), 512)


# ---- §2.6 worked example ---------------------------------------------------------------------------


def test_worked_example_sizes_and_formula(worked):
    assert (worked.tp, worked.cp, worked.dp, worked.pp, worked.etp, worked.ep, worked.edp) == (4, 1, 16, 8, 4, 1, 16)
    assert worked.sizes.dp == 16 and worked.sizes.etp == 4
    for rank in range(512):
        c = worked.coords(rank)
        assert rank == c["tp"] + 4 * c["dp"] + 64 * c["pp"]
    assert worked.coords(453) == {"tp": 1, "cp": 0, "dp": 1, "pp": 7, "etp": 1, "ep": 0, "edp": 1}


def test_worked_example_groups(worked):
    assert worked.group_of("pp", 4) == [4, 68, 132, 196, 260, 324, 388, 452]
    assert worked.group_of("dp", 448) == list(range(448, 512, 4))
    assert worked.group_of("dp", worked.rank_of(tp=0, dp=5, pp=7)) == [448 + 4 * d for d in range(16)]
    assert worked.group_of("tp", 5) == [4, 5, 6, 7]
    assert worked.group_of("embedding", 4) == [4, 452]
    assert worked.group_of("embedding", 452) == [4, 452]
    assert worked.group_of("embedding", 68) == []  # a middle stage holds no embedding
    assert worked.group_of("position-embedding", 452) == []  # only the first stage has one
    assert worked.group_of("position-embedding", 4) == [4]
    # model-parallel group of replica 1 = tp x pp: nodes 1, 17, ..., 113 (4 GPUs each)
    assert worked.group_of("mp", 4) == [4 * node + gpu for node in range(1, 128, 16) for gpu in range(4)]
    # no cp, no ep: those groups are single ranks, dp-cp = dp, expert views = dense ones
    assert worked.group_of("cp", 9) == [9] and worked.group_of("ep", 9) == [9]
    assert worked.groups("dp-cp") == worked.groups("dp")
    assert worked.groups("edp") == worked.groups("dp") and worked.groups("etp") == worked.groups("tp")


def test_worked_example_block_placement(worked):
    hosts = [f"nid{index:06d}" for index in range(128)]
    placement = block_placement(512, hosts, 4)
    # 0-based pp_rank 7 of replica 1 = ranks 452-455 on node index 113, GPUs 0-3
    assert [placement[worked.rank_of(tp=tp, dp=1, pp=7)] for tp in range(4)] == [("nid000113", gpu) for gpu in range(4)]
    # DP group of stage 7 sits on nodes 112-127
    assert sorted({placement[rank][0] for rank in worked.group_of("dp", 448)}) == hosts[112:128]


def test_tp_pp_dp_mapping():
    layout = RankLayout(ParallelSizes(tp=4, pp=8, order="tp-cp-ep-pp-dp"), 512)
    for rank in range(512):
        c = layout.coords(rank)
        assert rank == c["tp"] + 4 * c["pp"] + 32 * c["dp"]
    assert [layout.rank_of(tp=tp, dp=1, pp=7) for tp in range(4)] == [60, 61, 62, 63]
    assert layout.group_of("tp", 61) == [60, 61, 62, 63]
    assert layout.group_of("pp", 32) == list(range(32, 64, 4))  # replica 1 on nodes 8..15
    assert layout.group_of("dp", 0) == list(range(0, 512, 32))  # DP peers 8 nodes apart
    assert layout.group_of("embedding", 33) == [33, 61]


# ---- §2.2 MoE parallel folding ---------------------------------------------------------------------


def test_moe_example():
    layout = RankLayout(ParallelSizes(tp=2, pp=4, ep=8, etp=1), 512)
    assert (layout.dp, layout.edp, layout.etp) == (64, 16, 1)
    assert layout.group_of("ep", 0) == list(range(8))
    assert layout.group_of("edp", 0) == list(range(0, 128, 8))
    assert len(layout.group_of("edp", 0)) == 16
    assert layout.group_of("etp", 5) == [5]
    assert layout.group_of("etp-ep", 9) == list(range(8, 16))
    # pp groups are identical in the dense and expert views, so a rank's stage is the same
    dense_pp = layout.dense.groups({"pp"}).tolist()
    expert_pp = layout.expert.groups({"pp"}).tolist()
    assert dense_pp == expert_pp == layout.groups("pp")
    # while its DP replica index differs between the views
    c = layout.coords(10)
    assert (c["tp"], c["dp"], c["pp"]) == (0, 5, 0) and (c["etp"], c["ep"], c["edp"]) == (0, 2, 1)
    assert layout.rank_of(etp=0, ep=2, edp=1, pp=0) == 10 == layout.rank_of(**c)
    # expert formula: rank = etp + ETP*(ep + EP*(edp + EDP*pp))
    for rank in range(512):
        c = layout.coords(rank)
        assert rank == c["etp"] + 1 * (c["ep"] + 8 * (c["edp"] + 16 * c["pp"]))


def test_ep_and_cp_together_live_in_two_generators():
    # Megatron folds: cp only in the dense generator, ep only in the expert one, so a job may have both.
    layout = RankLayout(ParallelSizes(tp=1, pp=1, cp=2, ep=2), 8)
    assert (layout.dp, layout.edp) == (4, 4)
    assert layout.group_of("cp", 0) == [0, 1] and layout.group_of("ep", 0) == [0, 1]
    assert layout.group_of("dp", 0) == [0, 2, 4, 6] and layout.group_of("edp", 0) == [0, 2, 4, 6]
    assert layout.group_of("dp-cp", 0) == list(range(8))


# ---- context parallel ------------------------------------------------------------------------------


def test_cp_example():
    layout = RankLayout(ParallelSizes(tp=2, cp=2, pp=2), 64)
    assert layout.dp == 8
    assert layout.group_of("cp", 0) == [0, 2]
    assert layout.group_of("dp", 0) == list(range(0, 32, 4))
    assert layout.group_of("dp-cp", 0) == list(range(0, 32, 2))
    assert layout.group_of("tp-cp", 0) == [0, 1, 2, 3]
    assert layout.group_of("tp-dp-cp", 33) == list(range(32, 64))
    assert layout.group_of("tp-dp", 2) == [r for r in range(32) if (r // 2) % 2 == 1]
    assert layout.group_of("pp", 3) == [3, 35]
    assert layout.coords(7) == {"tp": 1, "cp": 1, "dp": 1, "pp": 0, "etp": 1, "ep": 0, "edp": 3}
    # expert view has cp = 1: edp = 64 / (2 * 1 * 2) = 16
    assert layout.edp == 16 and layout.group_of("edp", 0) == list(range(0, 32, 2))


# ---- virtual pipeline and layer splits -------------------------------------------------------------


def test_vpp_docstring_example():
    layout = RankLayout(ParallelSizes(tp=1, pp=4, vpp=2, num_layers=16), 4)
    # GPU0 holds layers 1-2 and 9-10 (1-based) = [0, 2) and [8, 10) (0-based)
    assert layout.layers_of(0) == [(0, 2), (8, 10)]
    assert layout.layers_of(3) == [(6, 8), (14, 16)]
    assert [layout.virtual_stage(r, c) for c in range(2) for r in range(4)] == list(range(8))
    assert layout.virtual_stage(1, 1) == 5
    # virtual stages in order tile the model exactly once
    ranges = sorted(
        (layout.virtual_stage(r, c), rng) for r in range(4) for c, rng in enumerate(layout.layers_of(r))
    )
    assert [rng for _, rng in ranges] == [(2 * s, 2 * s + 2) for s in range(8)]


def test_uniform_split_without_vpp():
    layout = RankLayout(ParallelSizes(tp=1, pp=4, num_layers=32), 4)
    assert [layout.layers_of(r) for r in range(4)] == [[(0, 8)], [(8, 16)], [(16, 24)], [(24, 32)]]
    assert layout.virtual_stage(3, 0) == 3


def test_uneven_first_and_last_stage():
    sizes = ParallelSizes(tp=1, pp=4, num_layers=30, first_stage_layers=6, last_stage_layers=4)
    layout = RankLayout(sizes, 4)
    assert sizes.stage_layers() == [6, 10, 10, 4]
    assert [layout.layers_of(r) for r in range(4)] == [[(0, 6)], [(6, 16)], [(16, 26)], [(26, 30)]]
    # only the first stage given: the others (last included) share the rest
    only_first = RankLayout(ParallelSizes(tp=1, pp=3, num_layers=14, first_stage_layers=2), 3)
    assert [only_first.layers_of(r) for r in range(3)] == [[(0, 2)], [(2, 8)], [(8, 14)]]
    only_last = RankLayout(ParallelSizes(tp=1, pp=3, num_layers=14, last_stage_layers=4), 3)
    assert [only_last.layers_of(r) for r in range(3)] == [[(0, 5)], [(5, 10)], [(10, 14)]]
    two = RankLayout(ParallelSizes(tp=1, pp=2, num_layers=10, first_stage_layers=3, last_stage_layers=7), 2)
    assert [two.layers_of(r) for r in range(2)] == [[(0, 3)], [(3, 10)]]


def test_uneven_with_vpp():
    # stages 4, 8, 8, 4 layers; 2 chunks each: round 0 = [0,2) [2,6) [6,10) [10,12), round 1 + 12
    layout = RankLayout(ParallelSizes(tp=1, pp=4, vpp=2, num_layers=24, first_stage_layers=4, last_stage_layers=4), 4)
    assert [layout.layers_of(r) for r in range(4)] == [
        [(0, 2), (12, 14)], [(2, 6), (14, 18)], [(6, 10), (18, 22)], [(10, 12), (22, 24)],
    ]


# ---- properties over random configurations ---------------------------------------------------------

APPEND = ("tp", "pp", "dp", "ep", "cp")


def brute_force_coords(rank, order, sizes):
    """Mixed-radix decoding, leftmost order token fastest; missing tokens appended (size 1)."""
    tokens = [t for t in order.split("-")] + [t for t in APPEND if t not in order.split("-")]
    out = {}
    for token in tokens:
        out[token] = rank % sizes[token]
        rank //= sizes[token]
    assert rank == 0
    return out


def random_configurations(count, seed=20240412):
    rng = random.Random(seed)
    found, rejected = [], 0
    while len(found) < count:
        tp, cp, pp, dp = rng.choice([1, 2, 4]), rng.choice([1, 2, 3]), rng.choice([1, 2, 3, 4]), rng.choice([1, 2, 3, 4])
        ep, etp = rng.choice([1, 2, 4]), rng.choice([None, 1, 2])
        world = tp * cp * pp * dp
        tokens = ["tp", "cp", "ep", "dp", "pp"]
        rng.shuffle(tokens)
        sizes_for_order = {"tp": max(tp, etp or 1), "cp": cp, "ep": ep, "dp": 2, "pp": pp}
        # drop some tokens whose size is 1 (dp: never, it is derived); Megatron appends them
        tokens = [t for t in tokens if sizes_for_order[t] > 1 or rng.random() < 0.5]
        if not tokens:
            tokens = ["dp"]
        order = "-".join(tokens)
        sizes = ParallelSizes(tp=tp, cp=cp, pp=pp, ep=ep, etp=etp, order=order)
        if world % ((etp or tp) * ep * pp):
            with pytest.raises(LayoutError, match="does not divide the world size"):
                sizes.for_world(world)
            rejected += 1
            continue
        try:
            layout = RankLayout(sizes, world)
        except LayoutError as error:
            # the only other rejections, Megatron's two (pp > 1, pp not last): dense and expert pp groups
            # differ, or dp != edp (tests/ranks/test_megatron_reference.py checks them against Megatron)
            assert "identical pp groups" in str(error) or "same data-parallel size" in str(error), str(error)
            rejected += 1
            continue
        found.append(layout)
    return found, rejected


CONFIGURATIONS, REJECTED = random_configurations(120)


def test_random_configurations_cover_interesting_cases():
    assert REJECTED > 0
    assert any(layout.ep > 1 and layout.cp > 1 for layout in CONFIGURATIONS)
    assert any(layout.etp != layout.tp for layout in CONFIGURATIONS)
    assert any(not layout.sizes.order.endswith("pp") for layout in CONFIGURATIONS)
    assert len({layout.sizes.order for layout in CONFIGURATIONS}) > 30


@pytest.mark.parametrize("layout", CONFIGURATIONS, ids=repr)
def test_coordinates_match_brute_force_and_invert(layout):
    W = layout.world_size
    dense_sizes = {"tp": layout.tp, "cp": layout.cp, "ep": 1, "dp": layout.dp, "pp": layout.pp}
    expert_sizes = {"tp": layout.etp, "cp": 1, "ep": layout.ep, "dp": layout.edp, "pp": layout.pp}
    arrays = layout.all_coords()
    for rank in range(W):
        c = layout.coords(rank)
        d = brute_force_coords(rank, layout.sizes.order, dense_sizes)
        e = brute_force_coords(rank, layout.sizes.order, expert_sizes)
        assert c == {"tp": d["tp"], "cp": d["cp"], "dp": d["dp"], "pp": d["pp"], "etp": e["tp"], "ep": e["ep"], "edp": e["dp"]}
        assert d["pp"] == e["pp"]
        assert layout.rank_of(**c) == rank
        assert layout.rank_of(tp=c["tp"], cp=c["cp"], dp=c["dp"], pp=c["pp"]) == rank
        assert layout.rank_of(etp=c["etp"], ep=c["ep"], edp=c["edp"], pp=c["pp"]) == rank
        assert {key: int(array[rank]) for key, array in arrays.items()} == c
    assert all(len(array) == W for array in arrays.values())


@pytest.mark.parametrize("layout", CONFIGURATIONS, ids=repr)
def test_groups_partition_the_ranks_as_megatron_defines_them(layout):
    W = layout.world_size
    sizes = layout.sizes_by_name
    view_coords = {"dense": ("tp", "cp", "dp", "pp"), "expert": ("etp", "ep", "edp", "pp")}
    coords = [layout.coords(rank) for rank in range(W)]
    for kind, tokens in KIND_SIZE_TOKENS.items():
        groups = layout.groups(kind)
        size = prod(sizes[token] for token in tokens)
        assert all(len(group) == size for group in groups), kind
        assert len(groups) == W // size, kind
        assert sorted(itertools.chain.from_iterable(groups)) == list(range(W)), kind  # each rank exactly once
        assert all(group == sorted(group) for group in groups), kind
        assert [group[0] for group in groups] == sorted(group[0] for group in groups), kind
        # definition: a group = all ranks that differ only in the kind's coordinates
        view = "expert" if any(token in ("etp", "ep", "edp") for token in tokens) else "dense"
        fixed = [name for name in view_coords[view] if name not in tokens]
        expected = {}
        for rank, c in enumerate(coords):
            expected.setdefault(tuple(c[name] for name in fixed), []).append(rank)
        assert sorted(expected.values()) == groups, kind
        for rank in (0, W // 2, W - 1):
            assert rank in layout.group_of(kind, rank)
            assert layout.group_of(kind, rank) in groups


@pytest.mark.parametrize("layout", CONFIGURATIONS, ids=repr)
def test_embedding_groups_are_pipeline_ends(layout):
    pipelines = layout.groups("pp")
    embedding, position = layout.groups("embedding"), layout.groups("position-embedding")
    assert len(embedding) == len(position) == len(pipelines)
    for pipeline, emb, pos in zip(pipelines, embedding, position):
        assert [layout.coords(r)["pp"] for r in pipeline] == list(range(layout.pp))
        assert emb == ([pipeline[0], pipeline[-1]] if layout.pp > 1 else [pipeline[0]])
        assert pos == [pipeline[0]]
        for rank in pipeline[1:-1]:
            assert layout.group_of("embedding", rank) == []


def test_every_kind_is_covered():
    assert set(GROUP_KINDS) == set(KIND_SIZE_TOKENS) | {"embedding", "position-embedding"}
    assert {"tp", "pp", "dp", "cp", "dp-cp", "tp-cp", "tp-dp", "tp-dp-cp", "mp", "ep", "etp", "edp"} <= set(GROUP_KINDS)


def test_alps_scale_timing():
    """All coordinates and all groups of 10,752 ranks (Alps GH200, TP=4, PP=8). Timing printed only."""
    started = time.perf_counter()
    layout = RankLayout(ParallelSizes(tp=4, pp=8), 10752)
    coords = layout.all_coords()
    arrays = {kind: layout.groups_array(kind) for kind in GROUP_KINDS}
    as_arrays = time.perf_counter() - started
    groups = layout.all_groups()
    elapsed = time.perf_counter() - started
    print(f"\nW=10752 TP=4 PP=8: all coordinates + all {len(groups)} group kinds: {elapsed * 1e3:.1f} ms "
          f"(numpy arrays alone {as_arrays * 1e3:.1f} ms, then lists)")
    assert all(groups[kind] == arrays[kind].tolist() for kind in GROUP_KINDS)
    assert layout.dp == 336 and len(coords["pp"]) == 10752
    assert np.array_equal(coords["pp"], np.arange(10752) // (4 * 336))
    assert len(groups["dp"]) == 4 * 8 and len(groups["tp"]) == 2688
    assert groups["pp"][0] == [1344 * p for p in range(8)]


# ---- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: ParallelSizes(tp=4, pp=8).for_world(500), r"^tp=4 x pp=8 x cp=1 = 32 does not divide the world size 500$"),
        (lambda: RankLayout(ParallelSizes(tp=4, pp=8), 500), r"tp=4 x pp=8 x cp=1 = 32 does not divide the world size 500"),
        (lambda: ParallelSizes.resolve(500, tp=4, pp=8), r"tp=4 x pp=8 x cp=1 = 32 does not divide"),
        (lambda: ParallelSizes(tp=2, pp=4, ep=3, etp=1).for_world(512),
         r"etp=1 x ep=3 x pp=4 = 12 does not divide the world size 512"),
        (lambda: ParallelSizes(tp=4, pp=8, dp=8).for_world(512), r"x dp=8 = 256 but the world size is 512; leave dp out.*16"),
        (lambda: RankGenerator({"tp": 1, "cp": 2, "ep": 2, "dp": 1, "pp": 1}),
         r"ep and cp cannot both be > 1 in one generator \(Megatron builds experts in a second generator: "
         r"set ep for experts, cp for attention\)"),
        (lambda: ParallelSizes(tp=1, pp=1, order="tp-xx-dp-pp"),
         r"^unknown token 'xx' in order 'tp-xx-dp-pp'; known: tp, cp, ep, dp, pp$"),
        (lambda: ParallelSizes(tp=1, pp=1, order="tp--dp"), r"unknown token '' in order 'tp--dp'"),
        (lambda: ParallelSizes(tp=1, pp=1, order="tp-tp-dp"), r"^order 'tp-tp-dp' repeats 'tp'"),
        (lambda: ParallelSizes(tp=2, pp=2, cp=2, order="tp-dp-pp"), r"cp=2 but order 'tp-dp-pp' has no 'cp'"),
        (lambda: ParallelSizes(tp=2, pp=2, ep=2, order="tp-cp-dp-pp"), r"ep=2 but order 'tp-cp-dp-pp' has no 'ep'"),
        (lambda: ParallelSizes(tp=1, pp=2, etp=2, order="dp-pp"), r"etp=2 but order 'dp-pp' has no 'tp'"),
        (lambda: ParallelSizes(tp=2, pp=2, order="tp-pp").for_world(8), r"dp=2 \(derived from the world size 8\).*no 'dp'"),
        (lambda: RankGenerator({"tp": 2}, order="dp-pp"), r"tp=2 but order 'dp-pp' has no 'tp'"),
        (lambda: ParallelSizes(tp=2, pp=2, ep=4, etp=1, order="tp-cp-ep-pp-dp").for_world(32),
         r"pipeline stages are 2 ranks apart for attention \(tokens before pp: tp x cp\) but 4 for experts "
         r"\(etp x ep\); Megatron requires identical pp groups"),
        (lambda: ParallelSizes(tp=2, pp=2, ep=1, etp=1, order="pp-tp-cp-ep-dp").for_world(8),
         r"with order 'pp-tp-cp-ep-dp' \(pp not last\) and pp=2, Megatron requires the same data-parallel size for "
         r"attention and experts, but dp=2 and edp=4"),
        (lambda: ParallelSizes(tp=1, pp=8, vpp=5, num_layers=96), r"^num_layers 96 is not divisible by pp 8 x vpp 5 = 40$"),
        (lambda: ParallelSizes(tp=1, pp=8, num_layers=30), r"^num_layers 30 is not divisible by pp 8$"),
        (lambda: ParallelSizes(tp=1, pp=1, vpp=2, num_layers=4), r"vpp 2 needs pp > 1"),
        (lambda: ParallelSizes(tp=1, pp=4, num_layers=31, first_stage_layers=5, last_stage_layers=5),
         r"the 21 layers left after the first/last stages are not divisible by the 2 remaining pipeline stages"),
        (lambda: ParallelSizes(tp=1, pp=4, num_layers=16, first_stage_layers=10, last_stage_layers=10),
         r"first_stage_layers 10 \+ last_stage_layers 10 = 20 exceeds num_layers 16"),
        (lambda: ParallelSizes(tp=1, pp=2, num_layers=16, first_stage_layers=4, last_stage_layers=4),
         r"with pp 2 there are no middle stages, so first_stage_layers 4 \+ last_stage_layers 4 must equal num_layers 16"),
        (lambda: ParallelSizes(tp=1, pp=1, num_layers=16, first_stage_layers=4), r"need pp > 1"),
        (lambda: ParallelSizes(tp=1, pp=4, first_stage_layers=4), r"first_stage_layers/last_stage_layers need num_layers"),
        (lambda: ParallelSizes(tp=1, pp=4, vpp=2, num_layers=27, first_stage_layers=3, last_stage_layers=4),
         r"first_stage_layers 3 is not divisible by vpp 2"),
        (lambda: ParallelSizes(tp=1, pp=4, vpp=2, num_layers=22, first_stage_layers=4, last_stage_layers=4),
         r"middle-stage layers 7 is not divisible by vpp 2"),
        (lambda: ParallelSizes(tp=0, pp=1), r"tp must be a positive integer, got 0"),
        (lambda: ParallelSizes(tp=True, pp=1), r"tp must be a positive integer, got True"),
        (lambda: ParallelSizes(tp=1, pp=1, vpp=0), r"vpp must be a positive integer, got 0"),
        (lambda: ParallelSizes(tp=1, pp=2, num_layers=4, first_stage_layers=-1), r"first_stage_layers must be an integer >= 0"),
        (lambda: ParallelSizes(tp=1, pp=1).for_world(0), r"world size must be a positive integer, got 0"),
    ],
)
def test_layout_errors(build, message):
    with pytest.raises(LayoutError, match=message):
        build()


def test_layout_errors_on_queries(worked):
    with pytest.raises(LayoutError, match=r"rank 512 is outside 0..511"):
        worked.coords(512)
    with pytest.raises(LayoutError, match=r"rank -1 is outside"):
        worked.group_of("tp", -1)
    with pytest.raises(LayoutError, match=r"tp=4 is outside 0..3"):
        worked.rank_of(tp=4, dp=0, pp=0)
    with pytest.raises(LayoutError, match=r"pp=8 is outside 0..7"):
        worked.rank_of(tp=0, pp=8)
    with pytest.raises(LayoutError, match=r"etp=4 is outside 0..3"):
        worked.rank_of(etp=4)
    with pytest.raises(LayoutError, match=r"tp/cp/dp/pp name rank 4 but etp/ep/edp/pp name rank 0"):
        worked.rank_of(tp=0, dp=1, etp=0, edp=0)
    with pytest.raises(LayoutError, match=r"unknown group kind 'xx'; known: tp, pp, dp"):
        worked.groups("xx")
    with pytest.raises(LayoutError, match=r"num_layers is not set; layer ranges need it"):
        worked.layers_of(0)
    with pytest.raises(LayoutError, match=r"pp_rank 8 is outside 0..7"):
        worked.virtual_stage(8, 0)
    with pytest.raises(LayoutError, match=r"chunk 1 is outside 0..0"):
        worked.virtual_stage(0, 1)
    with pytest.raises(LayoutError, match=r"unknown size name"):
        RankGenerator({"tpp": 2})


def test_order_is_normalised_and_missing_tokens_appended():
    sizes = ParallelSizes(tp=2, pp=2, order=" TP-DP-PP ")
    assert sizes.order == "tp-dp-pp"
    layout = RankLayout(sizes, 8)
    assert layout.dense.order == ("tp", "dp", "pp", "ep", "cp")
    # Megatron appends in the order of its size table: tp, pp, dp, ep, cp
    assert RankGenerator({"tp": 2, "pp": 2}, "pp-tp").order == ("pp", "tp", "dp", "ep", "cp")
    assert layout.coords(5) == {"tp": 1, "cp": 0, "dp": 0, "pp": 1, "etp": 1, "ep": 0, "edp": 0}
    assert sizes == ParallelSizes(tp=2, pp=2, order="tp-dp-pp")
    assert ParallelSizes.resolve(8, tp=2, pp=2) == ParallelSizes(tp=2, pp=2, dp=2, etp=2)
    assert ParallelSizes(tp=2, pp=4, ep=8, etp=1).expert_dp(512) == 16


# ---- Slurm block placement -------------------------------------------------------------------------


def test_block_placement():
    hosts = ["nid000010", "nid000011", "nid000007"]
    assert block_placement(10, hosts, 4) == [
        ("nid000010", 0), ("nid000010", 1), ("nid000010", 2), ("nid000010", 3),
        ("nid000011", 0), ("nid000011", 1), ("nid000011", 2), ("nid000011", 3),
        ("nid000007", 0), ("nid000007", 1),
    ]
    assert block_placement(12, hosts, 4)[-1] == ("nid000007", 3)
    assert block_placement(0, hosts, 4) == []
    with pytest.raises(LayoutError, match=r"world size 13 needs 4 nodes at 4 tasks per node but only 3 host\(s\) were given \(12 slots\)"):
        block_placement(13, hosts, 4)
    with pytest.raises(LayoutError, match=r"tasks_per_node must be a positive integer, got 0"):
        block_placement(4, hosts, 0)
