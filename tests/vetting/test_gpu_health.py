"""GPU-health counters judged (plain ``apps.vetting.gpu_health``), the node states they raise from the telemetry
store (``services.gpu_health_evaluate``), and the job page naming the counters that changed during the job."""
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from django.utils import timezone

from apps.telemetry.backends.base import aggregate_frame
from apps.vetting import gpu_health
from apps.vetting.gpu_health import DEGRADED, FAILED, NOTED, judge, node_verdicts
from tests.telemetry.contract import synthetic

T0 = pd.Timestamp("2026-03-02T10:04:00Z")


def health_frame(*, hosts=("nid000123", "nid000124"), minutes=60, start=T0, changes=(), baseline=None, cluster="alps"):
    """Synthetic samples of every judged health field (flat at ``baseline`` or 0), every 10 s, with ``changes``:
    (host, gpu, field, minute, new value) — the value from that minute on."""
    frame = synthetic(hosts=hosts, fields=gpu_health.HEALTH_FIELDS, minutes=minutes, start=start, cluster=cluster)
    frame["value"] = 0.0
    for (host, gpu, field), value in (baseline or {}).items():
        frame.loc[(frame.host == host) & (frame.gpu == gpu) & (frame.field == field), "value"] = float(value)
    for host, gpu, field, minute, value in changes:
        at = start + pd.Timedelta(minutes=minute)
        frame.loc[(frame.host == host) & (frame.gpu == gpu) & (frame.field == field) & (frame.ts >= at), "value"] = float(value)
    return frame


def judged(frame, step=300, **kwargs):
    return judge(aggregate_frame(frame, step, ("min", "max")), since=frame.ts.min().to_pydatetime(), **kwargs)


# --- the plain judge ------------------------------------------------------------------------------------------

def test_new_double_bit_errors_fail_the_node_naming_gpu_counter_and_values():
    frame = health_frame(baseline={("nid000123", 2, 311): 306}, changes=[("nid000123", 2, 311, 25, 310)])
    [change] = judged(frame)
    assert (change.host, change.gpu, change.field, change.level) == ("nid000123", 2, 311, FAILED)
    assert (change.before, change.after, change.rise) == (306, 310, 4)
    assert change.words == ("nid000123 GPU 2: 4 new double-bit ECC errors (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL 306 → 310) "
                            "since 10:04 UTC")
    assert change.first_seen == pd.Timestamp("2026-03-02T10:25:00Z")  # the 5-minute bucket it rose in
    verdict = node_verdicts([change])["nid000123"]
    assert (verdict.state, verdict.severity) == ("drain_recommended", "critical")
    assert "GPU 2" in verdict.reason and "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in verdict.reason


def test_flat_counters_and_unset_flags_say_nothing():
    baseline = {("nid000123", 0, 311): 2, ("nid000123", 1, 409): 1200, ("nid000124", 3, 230): 79}
    assert judged(health_frame(baseline=baseline)) == []


@pytest.mark.parametrize("field, value, level, words", [
    (393, 1, FAILED, "1 new row remapped after an uncorrectable error"),
    (395, 1, FAILED, "row remapping failed"),
    (392, 2, FAILED, "2 pages pending retirement"),
    (396, 1, DEGRADED, "row remap pending a GPU reset"),
    (391, 1, DEGRADED, "1 new page retired after double-bit errors"),
    (409, 37, DEGRADED, "37 new NVLink flit CRC errors"),
    (419, 3, DEGRADED, "3 new NVLink data CRC errors"),
    (429, 5, DEGRADED, "5 new NVLink replays"),
    (439, 1, DEGRADED, "1 new NVLink recovery"),
    (310, 12, NOTED, "12 new single-bit (corrected) ECC errors"),
    (202, 4, NOTED, "4 new PCIe replays"),
])
def test_each_counter_and_flag_is_judged(field, value, level, words):
    [change] = judged(health_frame(changes=[("nid000124", 1, field, 40, value)]))
    assert (change.host, change.gpu, change.field, change.level) == ("nid000124", 1, field, level)
    assert words in change.words and "GPU 1" in change.words


@pytest.mark.parametrize("code, level", [(79, FAILED), (48, FAILED), (94, DEGRADED), (13, NOTED), (31, NOTED)])
def test_a_new_xid_code_is_judged_by_what_it_means(code, level):
    [change] = judged(health_frame(changes=[("nid000123", 3, 230, 12, code)]))
    assert (change.field, change.level, change.after) == (230, level, code)
    assert f"XID {code}" in change.words


def test_an_old_xid_still_reported_is_not_new_but_a_different_one_is():
    frame = health_frame(baseline={("nid000123", 0, 230): 79}, changes=[("nid000123", 0, 230, 30, 74)])
    [change] = judged(frame)
    assert change.after == 74 and change.level == FAILED


def test_a_counter_reset_does_not_count_as_a_drop_or_lose_the_rises_around_it():
    # 10 -> 13 (3 new), GPU reset to 0 at minute 30, then 0 -> 2 (2 new)
    frame = health_frame(baseline={("nid000123", 0, 311): 10}, changes=[
        ("nid000123", 0, 311, 10, 13), ("nid000123", 0, 311, 30, 0), ("nid000123", 0, 311, 45, 2)])
    [change] = judged(frame)
    assert change.rise == 5


def test_a_flag_already_set_at_the_start_is_reported_as_standing_not_new():
    [change] = judged(health_frame(baseline={("nid000124", 2, 395): 1}))
    assert change.new is False and change.level == FAILED and "already at 10:04 UTC" in change.words


def test_levels_filter_and_node_verdict_takes_the_worst():
    frame = health_frame(changes=[("nid000123", 0, 409, 5, 8), ("nid000123", 1, 311, 50, 1), ("nid000124", 0, 310, 5, 3)])
    everything = judged(frame)
    assert [c.level for c in everything] == [FAILED, DEGRADED, NOTED]
    verdicts = node_verdicts(everything)
    assert set(verdicts) == {"nid000123"}  # single-bit errors alone change no state
    assert verdicts["nid000123"].state == "drain_recommended"
    assert verdicts["nid000123"].reason.index("GPU 1") < verdicts["nid000123"].reason.index("GPU 0")
    assert [c.level for c in judged(frame, levels=(DEGRADED,))] == [DEGRADED]


def test_non_health_fields_in_the_aggregate_are_ignored():
    frame = synthetic(fields=(1002, 155), minutes=20)
    assert judged(frame) == []


# --- node states from the telemetry store ----------------------------------------------------------------------

def recent(**kwargs):
    """A health frame ending about now (the service judges the last hour)."""
    start = pd.Timestamp(timezone.now()).floor("min") - pd.Timedelta(minutes=50)
    return health_frame(start=start, minutes=45, **kwargs), start


@pytest.mark.django_db
def test_rising_counters_raise_node_states_with_the_gpu_and_counter_as_reason(store):
    from apps.vetting.models import NodeHealth, NodeHealthEvent
    from apps.vetting.services import GPU_HEALTH_ACTOR, gpu_health_evaluate

    frame, _ = recent(changes=[("nid000123", 2, 311, 20, 4), ("nid000124", 1, 429, 10, 9)])
    store.write(frame)
    outcome = gpu_health_evaluate()
    assert outcome == {"nodes": 2, "raised": 2}
    states = {h.host: h for h in NodeHealth.objects.all()}
    assert states["nid000123"].state == "drain_recommended" and states["nid000123"].severity == "critical"
    assert "nid000123 GPU 2: 4 new double-bit ECC errors (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL 0 → 4)" in states["nid000123"].reason
    assert states["nid000124"].state == "suspect" and "NVLink replays" in states["nid000124"].reason
    assert set(NodeHealthEvent.objects.values_list("actor", flat=True)) == {GPU_HEALTH_ACTOR}

    assert gpu_health_evaluate() == {"nodes": 2, "raised": 0}  # again: nothing new
    assert NodeHealthEvent.objects.count() == 2


@pytest.mark.django_db
def test_healthy_counters_raise_nothing_and_a_cleared_node_stays_cleared(store):
    from apps.vetting.models import NodeHealth
    from apps.vetting.scontrol import SlurmNodeActions
    from apps.vetting.services import gpu_health_evaluate, node_act

    frame, _ = recent(baseline={("nid000123", 0, 311): 7})  # old errors, nothing new
    store.write(frame)
    assert gpu_health_evaluate() == {"nodes": 0, "raised": 0} and not NodeHealth.objects.exists()

    frame, _ = recent(changes=[("nid000124", 0, 409, 5, 3)])
    store.write(frame)
    assert gpu_health_evaluate()["raised"] == 1
    node_act("nid000124", "clear", actor="staff", reason="link reseated",
             backend=SlurmNodeActions(lambda command, timeout: "", dry_run=False))
    assert gpu_health_evaluate()["raised"] == 0  # the same evidence does not bring it back
    assert NodeHealth.objects.get(host="nid000124").state == "healthy"


@pytest.mark.django_db
def test_without_a_readable_store_nothing_changes(settings):
    from apps.telemetry.store import reset_telemetry_stores
    from apps.vetting.services import gpu_health_evaluate

    settings.TELEMETRY_BACKENDS = {}
    reset_telemetry_stores()
    try:
        assert gpu_health_evaluate()["raised"] == 0
    finally:
        reset_telemetry_stores()


# --- the job page ---------------------------------------------------------------------------------------------

@pytest.fixture
def job_world(db, topology):
    from apps.jobs.models import Cluster, Job, node_search_text

    cluster = Cluster.objects.create(name="alps")
    hosts = ["nid000123", "nid000124"]
    start = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    job = Job.objects.create(cluster=cluster, job_id=7001, user_name="alice", account="a-llm01", state="COMPLETED",
                             submit_time=start - timedelta(minutes=5), start_time=start, end_time=start + timedelta(minutes=90),
                             node_list=hosts, node_count=2, node_search=node_search_text(hosts))
    return job, pd.Timestamp(start)


def fresh(job):
    from apps.jobs.models import Job

    return Job.objects.select_related("cluster").get(pk=job.pk)


def test_counters_that_rose_during_the_job_are_on_its_first_screen_and_panel(job_world, store):
    from apps.vetting.panel import context, summary

    job, start = job_world
    store.write(health_frame(start=start, minutes=90, baseline={("nid000123", 2, 311): 306},
                             changes=[("nid000123", 2, 311, 40, 310), ("nid000124", 0, 310, 10, 25)]))
    found = summary(fresh(job))
    critical = [f for f in found.findings if "GPU health" in f.title]
    assert [f.level for f in critical] == ["critical", "info"]
    assert "nid000123 GPU 2: 4 new double-bit ECC errors (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL 306 → 310)" in critical[0].title
    assert critical[0].action == "Resubmit excluding nid000123 (--exclude=nid000123)"
    assert "nid000124 GPU 0: 25 new single-bit" in critical[1].title
    rows = context(fresh(job))["vetting"]["gpu_health"]
    assert [(r["host"], r["gpu"], r["field"], r["rise"]) for r in rows] == [("nid000123", 2, 311, 4), ("nid000124", 0, 310, 25)]


def test_the_job_page_lists_the_counters_that_changed(job_world, store, client, make_user):
    job, start = job_world
    store.write(health_frame(start=start, minutes=90, baseline={("nid000123", 2, 311): 306},
                             changes=[("nid000123", 2, 311, 40, 310)]))
    client.force_login(make_user("alice", accounts=["a-llm01"]))
    page = client.get("/jobs/alps/7001/").content.decode()
    section = page.split('id="vetting-gpu-health"', 1)[1].split("</ul>", 1)[0]
    assert 'data-host="nid000123"' in section and "4 new double-bit ECC errors" in section


def test_a_job_whose_counters_did_not_change_hears_nothing_about_them(job_world, store):
    from apps.vetting.panel import context, summary

    job, start = job_world
    # errors before the job and after it ended, none during; an old XID still reported throughout
    store.write(health_frame(start=start - pd.Timedelta(hours=1), minutes=60, changes=[("nid000123", 1, 311, 10, 2)]))
    store.write(health_frame(start=start, minutes=90, baseline={("nid000123", 1, 311): 2, ("nid000124", 3, 230): 79}))
    store.write(health_frame(start=start + pd.Timedelta(minutes=100), minutes=10, baseline={("nid000123", 1, 311): 2},
                             changes=[("nid000123", 1, 311, 5, 9)]))
    found = summary(fresh(job))
    assert not [f for f in found.findings if "GPU health" in f.title]
    assert context(fresh(job))["vetting"]["gpu_health"] == []


def test_reading_the_job_page_health_is_one_store_query_and_no_sql(job_world, store, django_assert_num_queries, monkeypatch):
    from apps.vetting import selectors

    job, start = job_world
    store.write(health_frame(start=start, minutes=30, changes=[("nid000123", 0, 409, 5, 3)]))
    job = fresh(job)
    calls = []
    original = selectors.gpu_health_aggregate
    monkeypatch.setattr(selectors, "gpu_health_aggregate", lambda **kw: calls.append(kw) or original(**kw))
    with django_assert_num_queries(0):
        changes = selectors.job_gpu_health(job, start=start.to_pydatetime(), end=(start + pd.Timedelta(minutes=90)).to_pydatetime())
    assert len(calls) == 1 and [c.field for c in changes] == [409]
    assert np.isfinite([c.rise for c in changes]).all()
