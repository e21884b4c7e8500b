"""Straggler detection: robust statistics, persistence, peers, localisation, and the demo's planted problems."""
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from apps.saturation.products import score_job
from apps.saturation.stragglers import find_stragglers, peer_groups, persistent, robust_z
from apps.telemetry.synthetic_jobs import Planted, default_planted, job_chunks

START = datetime(2026, 11, 21, 8, 0, tzinfo=timezone.utc)
HOSTS = [f"nid{n:06d}" for n in range(1, 33)]  # 32 nodes, 128 GPUs: TP4 x PP2 x DP16
SIGNALS = ("S", "busy", "sm_clock", "power", "temperature")


def layout(hosts, tp=4, pp=2):
    """Megatron's default order (tp fastest, then dp, then pp) with block placement: rank r on node r // 4."""
    rank = np.arange(len(hosts) * 4)
    dp = len(rank) // (tp * pp)
    return pd.DataFrame({"host": np.repeat(hosts, 4), "gpu": np.tile(np.arange(4), len(hosts)), "rank": rank,
                         "tp": rank % tp, "dp": (rank // tp) % dp, "pp": rank // (tp * dp)})


def detect(planted, duration=3 * 3600, hosts=HOSTS, gpus=None, seed=3):
    chunks = job_chunks("megatron", hosts, START, duration, seed=seed, planted=planted, elapsed_before_s=3600, hosts_per_chunk=8)
    scored = score_job(chunks, start=START, end=pd.Timestamp(START) + pd.Timedelta(seconds=duration), step_s=10, hosts_order=hosts)
    cube = scored.cube
    gpus = layout(hosts) if gpus is None else gpus
    return find_stragglers({m: cube.values[m] for m in SIGNALS}, gpus, interval_s=cube.bin_seconds, times=cube.bin_starts,
                           steady=cube.steady_columns(), context={m: cube.values[m] for m in ("power_capped", "thermal")})


@pytest.fixture(scope="module")
def planted_findings():
    return detect(default_planted(HOSTS))


def test_the_planted_problems_are_found_and_nothing_else(planted_findings):
    planted = default_planted(HOSTS)
    by_level = {(s.level, s.host, s.gpu): s for s in planted_findings}
    assert set(by_level) == {("gpu", *planted.throttled), ("gpu", *planted.hot), ("node", planted.slow_nic, None)}

    throttled = by_level[("gpu", *planted.throttled)]
    rank = int(layout(HOSTS).query("host == @planted.throttled[0] and gpu == @planted.throttled[1]")["rank"].iloc[0])
    assert throttled.signal == "sm_clock" and throttled.rank == rank
    assert throttled.deviation == pytest.approx(-0.28, abs=0.02) and throttled.z < -3.5
    assert throttled.reason.startswith(f"rank {rank}, {planted.throttled[0]} GPU 2: SM clock 28% below its peers for 2 h")
    assert throttled.reason.endswith("power-limited") and throttled.cause == "power-limited"
    assert {"saturation", "power"} <= set(throttled.also)
    assert "same pipeline stage and tensor lane in the other 15 data-parallel replicas" in throttled.peers

    hot = by_level[("gpu", *planted.hot)]
    assert hot.signal == "temperature" and hot.deviation == pytest.approx(17, abs=2)
    assert "temperature 17 °C above its peers" in hot.reason and "thermal slowdown" in hot.cause

    node = by_level[("node", planted.slow_nic, None)]
    assert node.ranks == [HOSTS.index(planted.slow_nic) * 4 + g for g in range(4)]
    assert f"{planted.slow_nic}, all 4 GPUs (ranks" in node.reason and "no throttling" in node.cause
    assert node.duration_s > 2 * 3600  # the whole steady state: warm-up and evaluation aside


def test_a_clean_job_yields_no_straggler():
    assert detect(Planted()) == []
    assert detect(Planted(), gpus=layout(HOSTS)[["host", "gpu"]]) == []  # nor without a layout


def test_without_a_layout_the_same_gpus_are_found_against_all_peers():
    found = detect(default_planted(HOSTS), gpus=layout(HOSTS)[["host", "gpu"]])
    planted = default_planted(HOSTS)
    assert {(s.level, s.host, s.gpu) for s in found} == {("gpu", *planted.throttled), ("gpu", *planted.hot),
                                                          ("node", planted.slow_nic, None)}
    assert all(s.peers == "all 128 GPUs of the job" and s.rank is None for s in found)
    assert found[0].reason.startswith(f"{planted.slow_nic}, all 4 GPUs: ")


# ---------------------------------------------------------------------------------------------
# Statistics on constructed data


def test_robust_z_matches_the_modified_z_score_and_falls_back_when_mad_is_zero():
    x = np.array([[10.0], [11.0], [9.0], [10.5], [9.5], [4.0]])
    z, median = robust_z(x, np.zeros(6, dtype=int), relative=False, scale_floor=0.0)
    mad = np.median(np.abs(x[:, 0] - 9.75))
    assert median[0, 0] == 9.75 and z[5, 0] == pytest.approx(0.6745 * (4.0 - 9.75) / mad)
    same = np.array([[5.0], [5.0], [5.0], [5.0], [4.0]])  # MAD 0: mean absolute deviation instead
    z, _ = robust_z(same, np.zeros(5, dtype=int), relative=False, scale_floor=0.0)
    assert z[4, 0] == pytest.approx(-1.0 / (1.253314 * 0.2))
    z, _ = robust_z(same, np.zeros(5, dtype=int), relative=True, scale_floor=0.5)  # floor: half the median
    assert z[4, 0] == pytest.approx(-1.0 / 2.5)


def test_persistence_drops_blips_and_keeps_lasting_problems():
    flags = np.zeros((3, 20), dtype=bool)
    flags[0, [3, 11]] = True  # two blips
    flags[1, [4, 6, 8]] = True  # 3 of 5 (4..8)
    flags[2, 10:20] = True  # lasting
    kept = persistent(flags)
    assert not kept[0].any()
    assert kept[1].tolist() == flags[1].tolist()
    assert kept[2].tolist() == flags[2].tolist()


def test_peer_groups_need_four_peers_or_use_the_whole_job():
    gpus = layout(HOSTS)
    groups, words = peer_groups(gpus)
    assert len(np.unique(groups)) == 8 and "15 data-parallel" in words
    tiny = layout(HOSTS[:4], tp=4, pp=2)  # DP 2: too few peers per stage and lane
    groups, words = peer_groups(tiny)
    assert len(np.unique(groups)) == 1 and words == "all 16 GPUs of the job"


def clean(gpus=32, intervals=60, level=0.7, noise=0.004, seed=0):
    rng = np.random.default_rng(seed)
    return level * (1 + rng.normal(0, noise, (gpus, intervals)))


def plain_gpus(count, per_host=4):
    return pd.DataFrame({"host": [f"n{i // per_host:03d}" for i in range(count)], "gpu": np.arange(count) % per_host})


def test_a_whole_slower_pipeline_stage_is_compared_within_the_stage():
    """The last stage carries the loss: all its GPUs are 10 % lower. Against their own stage nobody
    lags; against the whole job the stage would look like 32 stragglers."""
    hosts = [f"nid{n:06d}" for n in range(1, 65)]
    gpus = layout(hosts, tp=4, pp=8)  # 256 GPUs, DP 8
    values = clean(256, 60)
    values[gpus["pp"].to_numpy() == 7] *= 0.9
    assert find_stragglers({"S": values}, gpus, interval_s=60) == []
    lumped = find_stragglers({"S": values}, gpus[["host", "gpu"]], interval_s=60)
    assert {s.host for s in lumped} == set(gpus[gpus.pp == 7]["host"])


def test_localisation_node_switch_and_group():
    gpus = plain_gpus(32).assign(nic=lambda f: "hsn" + f["gpu"].astype(str),
                                 switch=lambda f: [{"n000": "3.1", "n001": "3.1", "n002": "3.2", "n003": "3.3"}.get(h, "4.0") for h in f["host"]],
                                 group=lambda f: [3 if h < "n004" else 4 for h in f["host"]])
    values = clean(32, 60)
    values[0:8] *= 0.85  # both nodes behind switch 3.1: all their GPUs
    values[9] *= 0.85  # one GPU of n002 (switch 3.2)
    found = find_stragglers({"S": values}, gpus, interval_s=60)
    levels = [(s.level, s.host, s.gpu, s.switch) for s in found]
    assert ("switch", None, None, "3.1") == levels[0]
    assert found[0].hosts == ["n000", "n001"] and "2 of the job's 2 nodes behind it lag" in found[0].reason
    assert {("node", "n000", None), ("node", "n001", None), ("gpu", "n002", 1)} == {(s.level, s.host, s.gpu) for s in found[1:]}
    node = next(s for s in found if s.host == "n000")
    assert node.nic == "hsn0-3" and node.switch == "3.1" and "hsn0-3 on switch 3.1" in node.reason
    gpu = next(s for s in found if s.level == "gpu")
    assert (gpu.nic, gpu.switch, gpu.group) == ("hsn1", "3.2", 3)
    # group 3: 3 of its 4 nodes lag, but two are behind switch 3.1 already: no group call on top
    assert not any(s.level == "group" for s in found)
    values[12:16] *= 0.85  # now n003 (switch 3.3) lags too: two unexplained nodes in group 3
    found = find_stragglers({"S": values}, gpus, interval_s=60)
    group = next(s for s in found if s.level == "group")
    assert group.group == 3 and group.hosts == ["n000", "n001", "n002", "n003"] and "4 of the job's 4 nodes" in group.reason


def test_short_or_tiny_jobs_are_not_judged():
    values = clean(32, 60)
    values[5] *= 0.5
    assert find_stragglers({"S": values[:3]}, plain_gpus(3), interval_s=60) == []  # fewer than 4 GPUs
    assert find_stragglers({"S": values}, plain_gpus(32), interval_s=4) == []  # 60 x 4 s = 4 min < 5 min
    assert [s.gpu for s in find_stragglers({"S": values}, plain_gpus(32), interval_s=60)] == [1]


# ---------------------------------------------------------------------------------------------
# Properties


@settings(max_examples=40, deadline=None)
@given(gpus=st.integers(8, 48), intervals=st.integers(10, 80), seed=st.integers(0, 10_000),
       level=st.floats(0.05, 2000), scale=st.floats(0.01, 100),
       drift=st.lists(st.floats(0.2, 3.0), min_size=2, max_size=6))
def test_scaling_all_gpus_alike_flags_nobody(gpus, intervals, seed, level, scale, drift):
    """Clean data, then the same data with every GPU scaled alike over time (a phase change, a
    checkpoint, a different clock for everyone): no straggler either way."""
    values = clean(gpus, intervals, level=level, seed=seed)
    factor = np.interp(np.arange(intervals), np.linspace(0, intervals - 1, len(drift)), drift)
    table = plain_gpus(gpus)
    assert find_stragglers({"S": values, "power": values, "sm_clock": values}, table, interval_s=60) == []
    scaled = values * scale * factor[None, :]
    assert find_stragglers({"S": scaled, "power": scaled, "sm_clock": scaled}, table, interval_s=60) == []


@settings(max_examples=30, deadline=None)
@given(gpus=st.integers(8, 48), seed=st.integers(0, 10_000), slow=st.floats(0.5, 0.85), scale=st.floats(0.01, 100),
       which=st.integers(0, 47))
def test_a_slow_gpu_is_found_however_all_gpus_are_scaled(gpus, seed, slow, scale, which):
    values = clean(gpus, 40, seed=seed)
    row = which % gpus
    values[row] *= slow
    table = plain_gpus(gpus, per_host=1)
    found = find_stragglers({"S": values}, table, interval_s=60)
    again = find_stragglers({"S": values * scale}, table, interval_s=60)
    assert [(s.host, s.deviation) for s in found] == [(f"n{row:03d}", pytest.approx(slow - 1, abs=0.02))]
    assert [(s.host, s.deviation) for s in again] == [(s.host, pytest.approx(s.deviation, abs=1e-3)) for s in found]


def test_idle_gpus_are_neither_peers_nor_suspects():
    """Three of every four GPUs idle (the demo's idle-GPU job): the working ones run hotter than the
    idle ones but are no stragglers; among the working ones, a slow one still is."""
    working = np.arange(32) % 4 == 0
    busy = np.where(working[:, None], clean(32, 60, level=0.95), 0.0)
    temperature = np.where(working[:, None], clean(32, 60, level=59.0, seed=1), clean(32, 60, level=35.0, seed=2))
    S = np.where(working[:, None], clean(32, 60, level=0.5, seed=3), 0.0)
    table = plain_gpus(32)
    assert find_stragglers({"busy": busy, "temperature": temperature, "S": S}, table, interval_s=60) == []
    S[8] *= 0.7  # n002 GPU 0
    found = find_stragglers({"busy": busy, "temperature": temperature, "S": S}, table, interval_s=60)
    assert [(s.host, s.gpu, s.signal) for s in found] == [("n002", 0, "saturation")]
    assert found[0].peers == "all 32 GPUs of the job"


def test_a_minority_behind_one_switch_is_a_switch_finding_half_the_job_is_no_straggler():
    gpus = plain_gpus(32).assign(switch=lambda f: ["1.1" if h < "n003" else "1.2" for h in f["host"]])
    values = clean(32, 60)
    values[:12] *= 0.85  # the three nodes behind switch 1.1, of eight
    found = find_stragglers({"S": values}, gpus, interval_s=60)
    assert found[0].level == "switch" and found[0].hosts == ["n000", "n001", "n002"]
    values[12:16] *= 0.85  # and n003: half the job now runs slower, which makes it the job's pace, not a straggler
    assert find_stragglers({"S": values}, gpus, interval_s=60) == []
