"""The usage report's arithmetic, against cases worked out by hand (no Django, no database)."""
from datetime import datetime, timezone

import pytest

from apps.reports.usage import JobRow, job_usage, score_histogram, usage_report

UTC = timezone.utc


def t(day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(2026, 11, day, hour, minute, tzinfo=UTC) if day > 0 else datetime(2026, 10, 31 + day, hour, minute, tzinfo=UTC)


SINCE, UNTIL = t(1), t(2)  # 1 November 00:00 to 2 November 00:00 (24 h)


def job(job_id, *, gpus, start, end, account="p1", user="alice", partition="normal", **extra) -> JobRow:
    return JobRow(cluster="alps", job_id=job_id, user=user, account=account, partition=partition, gpus=gpus,
                  start=start, end=end, **extra)


EDGES = [
    job(1, gpus=4, start=t(0, 22), end=t(1, 2)),  # crosses the start: 2 h inside -> 8 GPU-h
    job(2, gpus=4, start=t(1, 23), end=t(2, 3)),  # crosses the end: 1 h inside -> 4 GPU-h
    job(3, gpus=1, start=t(0, 0), end=t(3), account="p2"),  # crosses both: 24 h -> 24 GPU-h
    job(4, gpus=2, start=t(1, 12), end=None, account="p2"),  # still running at now (after until): 12 h -> 24
    job(5, gpus=8, start=t(0, 20), end=t(1)),  # ends exactly at the start: outside
    job(6, gpus=8, start=t(2), end=t(2, 5)),  # starts exactly at the end: outside
    job(7, gpus=0, start=t(1, 3), end=t(1, 9), account="p3"),  # no GPUs: a job, 0 GPU-h
    job(8, gpus=None, start=t(1, 3), end=t(1, 4), account="p3"),  # GPUs unknown: 0 GPU-h
    job(9, gpus=16, start=None, end=None),  # pending: outside
]


def test_gpu_hours_are_the_allocations_inside_the_window():
    report = usage_report(EDGES, since=SINCE, until=UNTIL, now=t(3))
    assert report["totals"]["gpu_hours"] == pytest.approx(8 + 4 + 24 + 24)
    assert report["totals"]["jobs"] == 6  # 1, 2, 3, 4, 7, 8
    by_project = {row["key"]: row for row in report["rows"]}
    assert by_project["p1"]["gpu_hours"] == pytest.approx(12) and by_project["p1"]["jobs"] == 2
    assert by_project["p2"]["gpu_hours"] == pytest.approx(48) and by_project["p2"]["jobs"] == 2
    assert by_project["p3"]["gpu_hours"] == 0 and by_project["p3"]["jobs"] == 2
    assert [row["key"] for row in report["rows"]] == ["p2", "p1", "p3"]  # most GPU-hours first
    assert sum(row["gpu_hours"] for row in report["rows"]) == pytest.approx(report["totals"]["gpu_hours"])


def test_a_running_job_counts_until_now_when_now_is_inside_the_window():
    running = job(1, gpus=2, start=t(0, 12), end=None)
    assert job_usage(running, SINCE, UNTIL, now=t(1, 18)).gpu_hours == pytest.approx(2 * 18)
    assert job_usage(running, SINCE, UNTIL, now=t(5)).gpu_hours == pytest.approx(2 * 24)
    assert job_usage(running, t(2), t(3), now=t(1, 18)) is None  # the window starts after now


def test_a_window_of_minutes_on_a_long_job():
    long_job = job(1, gpus=4096, start=t(-10), end=t(10))
    usage = job_usage(long_job, t(1, 10, 0), t(1, 10, 15), now=t(20))
    assert usage.gpu_hours == pytest.approx(4096 * 0.25)


MIXED = [
    # 2 h inside, scored 50, 8 kWh over its 4 h run -> 4 kWh inside, busy half the time: loses 4 × 2 × 0.5 = 4
    job(1, gpus=4, start=t(0, 22), end=t(1, 2), score=50.0, energy_j=8 * 3.6e6, user="alice",
        per_gpu=[{"busy": 0.5, "score": 50.0}] * 4),
    # 2 h inside, no score, 2 of 8 GPUs idle: loses 2 × 2 = 4 (idle), the 6 busy GPUs' loss is unknown
    job(2, gpus=8, start=t(1, 10), end=t(1, 12), score=None, idle_gpus=2, user="bob"),
    # running since 12:00 the day before, now 18:00: 18 h inside, score 80, busy 0.8: loses 2 × 18 × 0.2 = 7.2;
    # 30 kWh over its 30 h so far -> 18 kWh inside
    job(3, gpus=2, start=t(0, 12), end=None, score=80.0, energy_j=30 * 3.6e6, account="p2", user="alice",
        partition="debug", per_gpu=[{"busy": 0.8, "score": 80.0}] * 2),
]


def test_saturation_loss_and_energy_with_their_coverage():
    report = usage_report(MIXED, since=SINCE, until=UNTIL, now=t(1, 18))
    totals = report["totals"]
    assert totals["gpu_hours"] == pytest.approx(8 + 16 + 36)
    assert totals["mean_saturation"] == pytest.approx((50 * 8 + 80 * 36) / 44)  # weighted by GPU-hours, scored only
    assert totals["scored_share"] == pytest.approx(44 / 60)
    assert totals["gpu_hours_lost"] == pytest.approx(4 + 4 + 7.2)
    assert totals["idle_gpu_hours"] == pytest.approx(4)
    assert totals["lost_known_share"] == pytest.approx((8 + 4 + 36) / 60)
    assert totals["energy_kwh"] == pytest.approx(4 + 18)
    assert totals["energy_share"] == pytest.approx(44 / 60)
    p1, p2 = (next(row for row in report["rows"] if row["key"] == key) for key in ("p1", "p2"))
    assert p1["gpu_hours"] == pytest.approx(24) and p1["mean_saturation"] == pytest.approx(50)
    assert p1["scored_share"] == pytest.approx(8 / 24) and p1["gpu_hours_lost"] == pytest.approx(8)
    assert p2["gpu_hours_lost"] == pytest.approx(7.2) and p2["energy_kwh"] == pytest.approx(18)
    assert report["biggest"]["key"] == "p1" and report["biggest"]["share"] == pytest.approx(8 / 15.2)
    # the wasteful first (job 1: half its GPU-hours lost; job 2: a quarter of its GPUs idle), then job 3, which loses
    # more GPU-hours but only 20 % of what it holds at S 80
    assert [(j["job_id"], round(j["gpu_hours_lost"], 6), j["wasteful"]) for j in report["top_jobs"]] == \
        [(1, 4.0, True), (2, 4.0, True), (3, 7.2, False)]
    assert report["top_jobs"][2]["running"] is True


def test_nothing_known_is_never_guessed():
    report = usage_report([job(2, gpus=8, start=t(1, 10), end=t(1, 12), score=None)], since=SINCE, until=UNTIL, now=t(3))
    totals = report["totals"]
    assert totals["mean_saturation"] is None and totals["scored_share"] == 0
    assert totals["energy_kwh"] is None and totals["energy_share"] == 0
    assert totals["gpu_hours_lost"] == 0 and totals["lost_known_share"] == 0
    assert report["biggest"] is None and report["top_jobs"] == []
    empty = usage_report([], since=SINCE, until=UNTIL, now=t(3))["totals"]
    assert empty["gpu_hours"] == 0 and empty["scored_share"] is None and empty["jobs"] == 0


def test_grouping_by_user_and_partition():
    by_user = {r["key"]: r["gpu_hours"] for r in usage_report(MIXED, since=SINCE, until=UNTIL, now=t(1, 18), group_by="user")["rows"]}
    assert by_user == pytest.approx({"alice": 44, "bob": 16})
    by_partition = {r["key"]: r["jobs"] for r in
                    usage_report(MIXED, since=SINCE, until=UNTIL, now=t(1, 18), group_by="partition")["rows"]}
    assert by_partition == {"normal": 2, "debug": 1}
    with pytest.raises(ValueError):
        usage_report(MIXED, since=SINCE, until=UNTIL, now=t(3), group_by="colour")
    with pytest.raises(ValueError):
        usage_report(MIXED, since=UNTIL, until=SINCE, now=t(3))


def test_per_gpu_rows_decide_the_loss_gpu_by_gpu():
    rows = [{"busy": 0.0, "score": 0.0}, {"busy": 0.9, "score": 60.0}, {"busy": 0.9, "score": None}]
    usage = job_usage(job(1, gpus=4, start=t(1, 1), end=t(1, 4), score=40.0, per_gpu=rows), SINCE, UNTIL, t(3))
    assert usage.gpu_hours == pytest.approx(12)
    assert usage.idle_gpu_hours == pytest.approx(3)  # one idle GPU × 3 h
    assert usage.lost == pytest.approx(3 + 2 * 3 * 0.1)  # the idle GPU whole, the two busy ones 10 % without work
    assert usage.known_gpu_hours == pytest.approx(3 * 3)  # one GPU never reported


def test_the_most_wasteful_jobs_are_the_idle_ones_not_healthy_training():
    """Issue 35: 'most wasteful jobs' were all S 64-67 training jobs (GPUs × (1 − S)), the idle job eighth. Healthy
    busy training loses nothing (its distance to the reference is headroom); the job with idle GPUs comes first and a
    job warming up loses nothing."""
    training = [job(i, gpus=512, start=t(1, 0), end=t(1, 10), score=64.0 + i % 4, reference=70.0,
                    per_gpu=[{"busy": 1.0, "score": 64.0 + i % 4}] * 512) for i in range(1, 8)]
    prep = job(20, gpus=64, start=t(1, 0), end=t(1, 10), score=5.0, idle_gpus=48,
               per_gpu=[{"busy": 0.0, "score": 0.0}] * 48 + [{"busy": 1.0, "score": 20.0}] * 16)
    warm = job(21, gpus=64, start=t(1, 9, 56), end=None, score=13.0, warming_up=True,
               per_gpu=[{"busy": 0.3, "score": 13.0}] * 64)
    report = usage_report(training + [prep, warm], since=SINCE, until=UNTIL, now=t(1, 10))
    assert [j["job_id"] for j in report["top_jobs"]] == [20]
    assert report["top_jobs"][0]["gpu_hours_lost"] == pytest.approx(48 * 10)
    assert report["totals"]["gpu_hours_lost"] == pytest.approx(480)
    # headroom: 512 GPUs × 10 h × (70 − S)/100 for S 65, 66, 67, 64, 65, 66, 67
    assert report["totals"]["headroom_gpu_hours"] == pytest.approx(512 * 10 * (5 + 4 + 3 + 6 + 5 + 4 + 3) / 100)


def test_score_histogram_bins():
    jobs = [job(i, gpus=1, start=t(1, 1), end=t(1, 1 + i), score=s) for i, s in
            enumerate([0.0, 9.99, 10.0, 100.0, None, 55.0], start=1)]
    usages = [job_usage(row, SINCE, UNTIL, t(3)) for row in jobs]
    histogram = score_histogram(usages)
    assert histogram["edges"] == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert histogram["jobs"] == [2, 1, 0, 0, 0, 1, 0, 0, 0, 1]
    assert histogram["gpu_hours"][0] == pytest.approx(1 + 2) and histogram["gpu_hours"][9] == pytest.approx(4)


def test_rows_may_be_plain_mappings():
    row = {"cluster": "alps", "job_id": 1, "user": "u", "account": "a", "partition": "p", "gpus": 4,
           "start": t(1, 1), "end": t(1, 3), "score": None, "idle_gpus": 0, "per_gpu": None, "energy_j": None,
           "extra": "ignored"}
    assert usage_report([row], since=SINCE, until=UNTIL, now=t(3))["totals"]["gpu_hours"] == pytest.approx(8)


def test_energy_counts_only_the_measured_span_inside_the_window():
    # 8 GPUs, run 31 Oct 20:00 to 1 Nov 06:00; energy 10 kWh measured from 31 Oct 22:00 to 1 Nov 02:00 (4 h).
    row = job(1, gpus=8, start=t(0, 20), end=t(1, 6), energy_j=10 * 3.6e6, energy_start=t(0, 22), energy_end=t(1, 2))
    usage = job_usage(row, SINCE, UNTIL, t(3))
    assert usage.gpu_hours == pytest.approx(8 * 6)
    assert usage.energy_kwh == pytest.approx(10 * 2 / 4)  # 00:00-02:00 of the 4 measured hours
    assert usage.energy_gpu_hours == pytest.approx(8 * 2)
    totals = usage_report([row], since=SINCE, until=UNTIL, now=t(3))["totals"]
    assert totals["energy_kwh"] == pytest.approx(5) and totals["energy_share"] == pytest.approx(16 / 48)
    # measured only before the window: nothing known inside it, so no energy rather than 0 kWh
    before = job(2, gpus=8, start=t(0, 20), end=t(1, 6), energy_j=3.6e6, energy_start=t(0, 20), energy_end=t(0, 23))
    assert job_usage(before, SINCE, UNTIL, t(3)).energy_kwh is None
    alone = usage_report([before], since=SINCE, until=UNTIL, now=t(3))["totals"]
    assert alone["energy_kwh"] is None and alone["energy_share"] == 0
