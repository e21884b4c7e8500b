"""GPU-hours lost and headroom (apps/saturation/waste.py, issue 35): only what is measurably lost counts — idle
GPUs, busy GPUs' time without work, the wait for stragglers, GPUs on failed nodes — over the steady state; the
distance to a reference is headroom; a job warming up has no loss and no verdict. Every case is computed by hand."""
import pytest

from apps.saturation.waste import (LOSS_WORDS, gpu_hours_lost, is_wasteful, rank_key, reference_score, steady_seconds,
                                   straggler_drag, warming_up)


def _healthy(n, busy=1.0, score=64.0, host="nid{:04d}"):
    return [{"host": host.format(i // 4), "gpu": i % 4, "busy": busy, "score": score} for i in range(n)]


def test_a_healthy_big_job_loses_nothing_whatever_its_score():
    # 512 GPUs fully busy at S 64 for 2 h: under the old rule 512 × 2 × 0.36 = 368.6 GPU-h "lost"; none is.
    waste = gpu_hours_lost(2.0, 512, score=64.0, per_gpu=_healthy(512))
    assert waste.gpu_hours == 1024.0
    assert waste.lost == 0.0 and waste.idle_gpu_hours == 0.0 and waste.unknown_gpus == 0
    assert waste.share == 0.0
    assert not is_wasteful(score=64.0, gpus=512, lost_share=waste.share)


def test_its_distance_to_the_reference_is_headroom_not_loss():
    # reference 70, busy 1.0, S 64: each GPU-hour has 0.06 of headroom; 512 GPUs × 2 h × 0.06 = 61.44.
    waste = gpu_hours_lost(2.0, 512, per_gpu=_healthy(512), reference=70.0)
    assert waste.lost == 0.0
    assert waste.headroom == pytest.approx(61.44)
    # above the reference: no headroom, never negative
    assert gpu_hours_lost(1.0, 4, per_gpu=_healthy(4, score=80.0), reference=70.0).headroom == 0.0
    # no reference: headroom unknown
    assert gpu_hours_lost(1.0, 4, per_gpu=_healthy(4)).headroom is None


def test_idle_gpus_lose_their_hours_and_rank_above_a_healthy_big_job():
    # data prep: 64 GPUs, 48 idle (busy 0.01), 16 busy 0.9 at S 20, one hour.
    rows = _healthy(16, busy=0.9, score=20.0) + _healthy(48, busy=0.01, score=0.5, host="idle{:04d}")
    prep = gpu_hours_lost(1.0, 64, per_gpu=rows)
    assert prep.idle_gpu_hours == pytest.approx(48.0)
    assert prep.stalled_gpu_hours == pytest.approx(16 * 0.1)  # the busy ones did nothing 10 % of the time
    assert prep.lost == pytest.approx(49.6)
    assert prep.lost > gpu_hours_lost(1.0, 512, per_gpu=_healthy(512)).lost
    assert is_wasteful(score=20.0, gpus=64, lost_share=prep.share)


def test_stalls_are_the_busy_gpus_time_without_work():
    # 8 GPUs busy 0.95 (a 3-minute checkpoint per hour) for 3 h: 8 × 3 × 0.05 = 1.2 GPU-h.
    waste = gpu_hours_lost(3.0, 8, per_gpu=_healthy(8, busy=0.95))
    assert waste.lost == pytest.approx(1.2) and waste.stalled_gpu_hours == pytest.approx(1.2)


def test_the_other_gpus_wait_for_a_straggler():
    # 16 GPUs busy; one GPU 20 % slower than its peers for 30 of the 60 steady minutes: the 15 others wait
    # 0.2 × 30 min = 6 min per hour, i.e. 0.1 of the time: 15 × 2 h × 0.1 = 3.0 GPU-h over 2 h.
    finding = {"level": "gpu", "host": "nid0000", "gpu": 2, "signal": "sm_clock", "deviation": -0.2, "duration_s": 1800.0,
               "start": "2026-01-01T00:10:00+00:00", "end": "2026-01-01T00:40:00+00:00"}
    assert straggler_drag([finding], 3600.0) == pytest.approx(0.1)
    waste = gpu_hours_lost(2.0, 16, per_gpu=_healthy(16), stragglers=[finding], steady_s=3600.0)
    assert waste.straggler_gpu_hours == pytest.approx(3.0) and waste.lost == pytest.approx(3.0)
    # a node finding over the same minutes at 30 %, and the GPU finding inside it: counted once, at the larger share
    node = {**finding, "level": "node", "gpu": None, "deviation": -0.3, "signal": "saturation"}
    assert straggler_drag([finding, node], 3600.0) == pytest.approx(0.15)
    # its four GPUs lag, the 12 others wait: 12 × 2 × 0.15 = 3.6
    assert gpu_hours_lost(2.0, 16, per_gpu=_healthy(16), stragglers=[finding, node], steady_s=3600.0).straggler_gpu_hours \
        == pytest.approx(3.6)
    # a hot GPU (temperature) or a NIC outlier slows nobody; a switch finding sums the node findings: not twice
    others = [{**finding, "signal": "temperature"}, {**finding, "level": "nic"}, {**node, "level": "switch"}]
    assert straggler_drag(others, 3600.0) == 0.0


def test_a_clock_deficit_slows_only_the_compute_bound_part_of_a_step():
    # the demo's Megatron job: one GPU at 72 % clock for 2 of its 3 steady hours, the job at 60 % of its compute
    # ceiling: its peers wait 0.28 × 0.6 = 16.8 % of those 2 h, 11.2 % of the steady state (its own throughput fell 14 %)
    clock = {"level": "gpu", "host": "nid0000", "gpu": 2, "signal": "sm_clock", "deviation": -0.28, "duration_s": 7200.0,
             "start": "2026-01-01T01:00:00+00:00", "end": "2026-01-01T03:00:00+00:00"}
    assert straggler_drag([clock], 10800.0, compute=60.0) == pytest.approx(0.112)
    assert straggler_drag([clock], 10800.0) == pytest.approx(0.28 * 2 / 3)  # compute unknown: the whole deficit
    # a lag in busy time or saturation is time already: compute does not weigh it
    busy = {**clock, "signal": "busy", "deviation": -0.1}
    assert straggler_drag([busy], 10800.0, compute=60.0) == pytest.approx(0.1 * 2 / 3)
    waste = gpu_hours_lost(3.0, 8, per_gpu=_healthy(8), stragglers=[clock], steady_s=10800.0, compute=60.0)
    assert waste.straggler_gpu_hours == pytest.approx(7 * 3.0 * 0.112)


def test_a_job_ranked_high_says_where_its_loss_comes_from():
    # 16 GPUs busy 0.9 for 2 h with the 20 % straggler above: 3.0 waiting, 16 × 2 × 0.1 = 3.2 stalled
    finding = {"level": "gpu", "host": "nid0000", "gpu": 2, "signal": "sm_clock", "deviation": -0.2, "duration_s": 1800.0,
               "start": "2026-01-01T00:10:00+00:00", "end": "2026-01-01T00:40:00+00:00"}
    waste = gpu_hours_lost(2.0, 16, per_gpu=_healthy(16, busy=0.9), stragglers=[{**finding, "signal": "saturation"}],
                           steady_s=3600.0)
    assert waste.parts_words() == "3.2 stalled (busy GPUs without work), 3.0 waiting for stragglers"
    # the same wait for a GPU the hardware holds down is not the job's: its words leave it out, hardware_gpu_hours has it
    waste = gpu_hours_lost(2.0, 16, per_gpu=_healthy(16, busy=0.9), stragglers=[finding], steady_s=3600.0)
    assert waste.parts_words() == "3.2 stalled (busy GPUs without work)"
    assert waste.hardware_gpu_hours == pytest.approx(3.0)
    assert gpu_hours_lost(1.0, 4, per_gpu=_healthy(4)).parts_words() == ""


def test_gpus_on_failed_nodes_lose_their_hours():
    rows = _healthy(8)  # nid0000 and nid0001, four GPUs each
    waste = gpu_hours_lost(1.5, 8, per_gpu=rows, failed_hosts=["nid0001"])
    assert waste.failed_node_gpu_hours == pytest.approx(6.0) and waste.lost == pytest.approx(6.0)


def test_gpus_without_a_busy_share_lose_nothing_known_and_are_counted():
    rows = [{"busy": None, "score": None}, {"busy": 0.5, "score": 30.0}]
    waste = gpu_hours_lost(1.0, 4, per_gpu=rows)  # two GPUs never reported
    assert waste.lost == pytest.approx(0.5) and waste.unknown_gpus == 3 and waste.share is None
    # without rows only the idle GPUs are known
    waste = gpu_hours_lost(10.0, 8, score=45.0, idle_gpus=2)
    assert waste.lost == pytest.approx(20.0) and waste.unknown_gpus == 6


def test_warm_up_is_excluded():
    # 3.5 minutes into a Megatron run (steady score 67 later): the scoring has not seen the steady state start.
    assert warming_up(steady_found=False, observed_s=210.0)
    assert not warming_up(steady_found=True, observed_s=210.0)
    # a job whose GPUs never get busy is idle after the longest warm-up, not warming up for ever
    assert not warming_up(steady_found=False, observed_s=1800.0, max_warmup_s=1800.0)
    assert not warming_up(steady_found=None, observed_s=10.0)  # scored before the flag was kept
    # a job that ended before its GPUs got busy (a short or idle run) is judged on the data there is
    assert not warming_up(steady_found=False, observed_s=900.0, ended=True)
    rows = _healthy(8, busy=0.3, score=13.0)
    waste = gpu_hours_lost(0.06, 8, score=13.0, per_gpu=rows, warming_up=True)
    assert waste.warming_up and waste.lost == 0.0 and waste.headroom is None
    assert not is_wasteful(score=13.0, gpus=8, lost_share=0.0, warming_up=True)
    assert is_wasteful(score=13.0, gpus=8, lost_share=0.0)  # the same score in the steady state is a verdict


def test_the_reference_is_a_typical_good_job_of_the_model():
    assert reference_score([60.0, 70.0]) is None  # too few jobs
    # 90th percentile of 40, 50, 60, 70, 80: position 3.6 → 70 + 0.6 × 10 = 76
    assert reference_score([80.0, 40.0, None, 60.0, 50.0, 70.0]) == pytest.approx(76.0)


def test_steady_seconds_and_the_words():
    from datetime import datetime, timedelta, timezone
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert steady_seconds(start, start + timedelta(minutes=30)) == 1800.0
    assert steady_seconds(None, start) is None
    assert "idle GPUs" in LOSS_WORDS and "warm-up" in LOSS_WORDS


def test_wasteful_means_much_lost_or_a_low_steady_score():
    assert is_wasteful(score=12.0, gpus=4, idle_gpus=0)
    assert is_wasteful(score=80.0, gpus=8, idle_gpus=2)
    assert is_wasteful(score=80.0, gpus=8, lost_share=0.3)
    assert not is_wasteful(score=80.0, gpus=8, lost_share=0.1)
    assert not is_wasteful(score=80.0, gpus=8, idle_gpus=1)
    assert not is_wasteful(score=None, gpus=8, idle_gpus=0)
    assert not is_wasteful(score=5.0, gpus=0, idle_gpus=0)  # no GPUs: nothing to waste


def test_the_scoring_says_whether_the_steady_state_started():
    import numpy as np

    from apps.saturation.scoring import steady_reached, steady_state
    warm = np.full((4, 20), 0.45)  # a Megatron warm-up: GPUs 45 % busy, never past a median of 0.5
    assert not steady_reached(warm, steady_state(warm))
    ramp = warm.copy()
    ramp[:, 12:] = 0.99  # training started at the 13th sample
    window = steady_state(ramp)
    assert window.start == 12 and steady_reached(ramp, window)


def test_the_wait_for_a_gpu_the_hardware_holds_down_is_lost_to_hardware_and_charged_to_its_node():
    # 8 GPUs, one at 75 % clock for the whole steady hour (compute unknown: the whole deficit), 4 busy 0.9 on nid0000
    # and 4 fully busy on nid0001: 7 others wait 0.25 h each = 1.75 GPU-h lost to hardware, charged to nid0001;
    # the job's own loss is its stalls: 4 × 0.1 = 0.4.
    rows = _healthy(4, busy=0.9) + [{**row, "host": "nid0001"} for row in _healthy(4)]
    clock = {"level": "gpu", "host": "nid0001", "gpu": 1, "signal": "sm_clock", "deviation": -0.25, "duration_s": 3600.0,
             "start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T01:00:00+00:00"}
    waste = gpu_hours_lost(1.0, 8, per_gpu=rows, stragglers=[clock], steady_s=3600.0, failed_hosts=["nid0000"])
    # nid0000 failed: its 4 GPUs lose 1 h each (to hardware too); nid0001's 3 other GPUs wait 0.25 h
    assert waste.failed_node_gpu_hours == pytest.approx(4.0)
    assert waste.straggler_gpu_hours == pytest.approx(0.75)
    assert waste.lost == pytest.approx(4.75)
    assert waste.hardware_gpu_hours == pytest.approx(4.75) and waste.own == pytest.approx(0.0)
    assert dict(waste.hardware_hosts) == pytest.approx({"nid0000": 4.0, "nid0001": 0.75})
    # a slow GPU for the job's own reasons (its saturation lags at the same clock) stays the job's
    slow = {**clock, "signal": "saturation"}
    own = gpu_hours_lost(1.0, 8, per_gpu=rows, stragglers=[slow], steady_s=3600.0)
    assert own.hardware_gpu_hours == 0.0 and own.own == pytest.approx(0.4 + 7 * 0.25)
    # both at once over the same minutes: the union takes the larger deviation; the hardware part is the clock's alone
    both = gpu_hours_lost(1.0, 8, per_gpu=rows, stragglers=[clock, {**slow, "deviation": -0.4}], steady_s=3600.0)
    assert both.straggler_gpu_hours == pytest.approx(7 * 0.4)
    assert both.hardware_gpu_hours == pytest.approx(7 * 0.25)
    assert both.own == pytest.approx(0.4 + 7 * 0.4 - 7 * 0.25)


def test_the_wasteful_job_ranks_first_even_where_a_big_training_job_loses_more_gpu_hours():
    # The demo's world by hand, per hour. Megatron: 512 GPUs busy 0.887 (checkpoints every 30 min, an evaluation):
    # 512 × 0.113 = 57.9 GPU-h stalled, 11 % of what it holds; one GPU at 72 % clock for the whole steady state in a
    # job at 60 % of its compute ceiling: 511 × 0.28 × 0.6 = 85.8 GPU-h lost to hardware. Data prep: 64 GPUs, 48 idle,
    # 16 busy 0.75: 48 + 16 × 0.25 = 52 GPU-h lost by the job, 81 % of what it holds.
    clock = {"level": "gpu", "host": "nid0000", "gpu": 2, "signal": "sm_clock", "deviation": -0.28, "duration_s": 3600.0,
             "start": "2026-01-01T00:00:00+00:00", "end": "2026-01-01T01:00:00+00:00"}
    megatron = gpu_hours_lost(1.0, 512, per_gpu=_healthy(512, busy=0.887), stragglers=[clock], steady_s=3600.0,
                              compute=60.0)
    assert megatron.stalled_gpu_hours == pytest.approx(512 * 0.113)
    assert megatron.hardware_gpu_hours == pytest.approx(511 * 0.28 * 0.6)
    assert megatron.own == pytest.approx(57.856)
    prep = gpu_hours_lost(1.0, 64, per_gpu=_healthy(16, busy=0.75, score=20.0)
                          + _healthy(48, busy=0.01, score=0.5, host="idle{:04d}"))
    assert prep.own == pytest.approx(52.0) and prep.own_share == pytest.approx(52.0 / 64)
    assert megatron.lost > megatron.own > prep.own  # the big job loses more GPU-hours, as measured and shown
    ranked = sorted([("megatron", rank_key(megatron, score=64.0, gpus=512)), ("prep", rank_key(prep, score=20.0, gpus=64))],
                    key=lambda item: item[1])
    assert [name for name, _ in ranked] == ["prep", "megatron"]
    assert rank_key(megatron, score=64.0, gpus=512)[0] == 1  # not wasteful: 11 % lost by the job, S 64
    # among jobs the verdict does not call wasteful, the one losing more ranks first
    small = gpu_hours_lost(1.0, 64, per_gpu=_healthy(64, busy=0.9))
    assert rank_key(megatron, score=64.0, gpus=512) < rank_key(small, score=64.0, gpus=64)
    # and a throttled GPU alone never makes a job wasteful: what it costs is the node's
    throttled = gpu_hours_lost(1.0, 8, per_gpu=_healthy(8), stragglers=[{**clock, "deviation": -0.5}], steady_s=3600.0)
    assert throttled.share == pytest.approx(7 * 0.5 / 8) and throttled.own_share == 0.0
    assert rank_key(throttled, score=64.0, gpus=8)[0] == 1
