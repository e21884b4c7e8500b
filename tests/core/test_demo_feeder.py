"""The living demo's feeder: its clock, its idempotence, and the stories it keeps telling.

The clock is tested through ``feed_demo`` with explicit moments; the feeders through ``run_feeders`` on a
small machine (four dragonfly groups) with a Megatron-like job whose problems are planted, a few other
running jobs, and silent nodes, on a real embedded telemetry store.
"""
import io
import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from apps.core import demo as core_demo
from apps.core.demo import FEED_CLAIM_SECONDS, FEEDER_HEARTBEAT, MAX_FEED_SPAN, DemoContext, FeedContext, feed_demo, run_feeders
from apps.core.models import DemoState, Heartbeat
from apps.telemetry.backends.base import Query
from apps.telemetry.synthetic_jobs import POWER_CAP_BIT, default_planted

ORIGIN = datetime(2026, 11, 21, 9, 0, tzinfo=timezone.utc)
SEED = 20261121


def start_clock(*, origin=ORIGIN, last_seen=ORIGIN, memory=None) -> Heartbeat:
    """A loaded demo as the build leaves it: the DemoState row and the clock at its origin."""
    DemoState.objects.create(seed=SEED, parts=["clock"])
    context = DemoContext(seed=SEED, rng=random.Random(SEED), out=io.StringIO(), now=origin)
    context.feed_memory.update(memory or {})
    core_demo.build_clock(context)
    Heartbeat.objects.filter(name=FEEDER_HEARTBEAT).update(last_seen=last_seen)
    return Heartbeat.objects.get(name=FEEDER_HEARTBEAT)


def clock() -> dict:
    return Heartbeat.objects.get(name=FEEDER_HEARTBEAT).details


@pytest.mark.django_db
def test_without_a_demo_nothing_is_fed():
    result = feed_demo(now=ORIGIN)
    assert result["fed"] is False and "no demo loaded" in result["reason"]


@pytest.mark.django_db
def test_the_demo_clock_runs_at_its_speed_never_behind_the_wall_clock_and_catches_up_over_a_bounded_span(store):
    start_clock()
    first = feed_demo(now=ORIGIN + timedelta(seconds=30), speed=1)
    assert first["fed"] and first["demo_from"] == ORIGIN.isoformat()
    assert first["demo_to"] == (ORIGIN + timedelta(seconds=30)).isoformat() and first["skipped_s"] == 0
    assert set(first["feeders"]) >= {"jobs", "telemetry", "fleet"} and first["cpu_s"] >= 0
    # ten times faster: 30 real seconds are 300 demo seconds, ahead of the wall clock
    fast = feed_demo(now=ORIGIN + timedelta(seconds=60), speed=10)
    assert (fast["demo_from"], fast["demo_to"]) == ((ORIGIN + timedelta(seconds=30)).isoformat(),
                                                    (ORIGIN + timedelta(seconds=330)).isoformat())
    # back at real time after a night switched off (the demo stays 270 s ahead): the clock moves by the night,
    # feeding only its last MAX_FEED_SPAN
    later = ORIGIN + timedelta(hours=9)
    night = feed_demo(now=later, speed=1)
    target = later + timedelta(seconds=270)
    assert night["demo_to"] == target.isoformat() and night["demo_from"] == (target - MAX_FEED_SPAN).isoformat()
    assert night["skipped_s"] == pytest.approx((target - MAX_FEED_SPAN - ORIGIN - timedelta(seconds=330)).total_seconds())
    assert clock()["demo_time"] == target.isoformat() and clock()["ticks"] == 3 and clock()["claim"] is None
    assert clock()["last"]["demo_seconds"] == MAX_FEED_SPAN.total_seconds()
    # no real time passed: nothing to feed; a stopped clock neither
    assert feed_demo(now=later, speed=1)["fed"] is False
    assert feed_demo(now=later + timedelta(seconds=30), speed=0)["fed"] is False


@pytest.mark.django_db
def test_a_demo_built_a_while_ago_resumes_at_the_wall_clock(store):
    """Built (origin) ten minutes before the first tick, as a slow build and start do: at speed 1 the first tick
    feeds those ten minutes and the clock is the wall clock; slower than real time it would lag behind."""
    start_clock(last_seen=ORIGIN + timedelta(minutes=9))
    now = ORIGIN + timedelta(minutes=10)
    tick = feed_demo(now=now, speed=1)
    assert (tick["demo_from"], tick["demo_to"]) == (ORIGIN.isoformat(), now.isoformat())


@pytest.mark.django_db
def test_a_span_being_fed_is_not_fed_again_and_a_lost_tick_is_redone(store):
    start_clock()
    Heartbeat.objects.filter(name=FEEDER_HEARTBEAT).update(last_seen=ORIGIN + timedelta(seconds=30), details={
        **clock(), "claim": {"start": ORIGIN.isoformat(), "end": (ORIGIN + timedelta(seconds=30)).isoformat(),
                             "at": (ORIGIN + timedelta(seconds=30)).isoformat(), "since": ORIGIN.isoformat()}})
    busy = feed_demo(now=ORIGIN + timedelta(seconds=40), speed=1)
    assert busy["fed"] is False and "another tick is feeding" in busy["reason"]
    # The claiming tick's worker died: after FEED_CLAIM_SECONDS the next tick feeds from where it began.
    lost = ORIGIN + timedelta(seconds=30 + FEED_CLAIM_SECONDS + 1)
    redo = feed_demo(now=lost, speed=1)
    assert redo["fed"] and redo["demo_from"] == ORIGIN.isoformat() and redo["demo_to"] == lost.isoformat()


@pytest.mark.django_db
def test_a_failing_feeder_hands_its_span_back(store):
    start_clock()

    @core_demo.demo_feeder("broken", order=1)
    def broken(context):
        raise RuntimeError("feeder broke")

    try:
        with pytest.raises(RuntimeError, match="feeder broke"):
            feed_demo(now=ORIGIN + timedelta(seconds=30), speed=1)
    finally:
        core_demo._feeders.pop("broken")
    row = Heartbeat.objects.get(name=FEEDER_HEARTBEAT)
    assert row.last_seen == ORIGIN and row.details["demo_time"] == ORIGIN.isoformat() and row.details["claim"] is None
    again = feed_demo(now=ORIGIN + timedelta(seconds=60), speed=1)
    assert again["fed"] and again["demo_from"] == ORIGIN.isoformat()


# ---------------------------------------------------------------------------------------------
# The feeders on a small machine


@pytest.fixture
def small_demo(store):
    """Four dragonfly groups; a 16-node Megatron run six hours in (its problems planted), two other running jobs,
    a few silent nodes; the clock's memory as the build leaves it."""
    from apps.jobs.models import Cluster, Job, ClusterSyncModeChoices
    from apps.topology.generator import DragonflyParameters, generate
    from apps.topology.models import Node
    from apps.topology.services import topology_apply

    topology_apply(generate(DragonflyParameters(groups=4, first_nid=1)), source="test", prune=True)
    Node.objects.update(state="idle")
    hosts = sorted(Node.objects.values_list("hostname", flat=True))
    cluster = Cluster.objects.create(name="alps", title="[demo] test", sync_mode=ClusterSyncModeChoices.MODE_PUSH)

    def job(job_id, name, nodes, start, limit, user="someone"):
        Node.objects.filter(hostname__in=nodes).update(state="allocated")
        return Job.objects.create(cluster=cluster, job_id=job_id, name=name, user_name=user, account="a-test", state="RUNNING",
                                  start_time=start, time_limit_minutes=limit, node_list=nodes, node_count=len(nodes),
                                  gpus=4 * len(nodes), source="demo")

    megatron = job(1, "megatron-gpt-175b-pretrain", hosts[40:56], ORIGIN - timedelta(hours=6, minutes=12), 24 * 60, user="demo")
    finetune = job(2, "finetune-esm2", hosts[60:62], ORIGIN - timedelta(minutes=50), 60)
    prep = job(3, "data-prep-7", hosts[70:71], ORIGIN - timedelta(hours=3), 720)
    silent = hosts[100:104]
    Node.objects.filter(hostname=hosts[120]).update(state="down")
    memory = {"megatron": megatron.pk, "keep_running": [megatron.pk], "silent_nodes": silent, "users": ["demo", "someone"],
              "accounts": {"demo": ["a-test"], "someone": ["a-test"]}}
    start_clock(memory=memory)
    return {"hosts": hosts, "megatron": megatron, "finetune": finetune, "prep": prep, "silent": silent, "down": hosts[120],
            "memory": memory, "store": store}


def span(start, end, memory) -> FeedContext:
    return FeedContext(seed=SEED, start=start, end=end, origin=ORIGIN, memory=dict(memory))


def samples(store, start, end, **query):
    return store.read(Query(start=start, end=end, cluster="alps", **query))


@pytest.mark.django_db
def test_feeding_the_same_span_twice_writes_nothing_twice(small_demo):
    from apps.jobs.models import Job

    store = small_demo["store"]
    first = span(ORIGIN, ORIGIN + timedelta(minutes=4), small_demo["memory"])
    summary = run_feeders(first)
    written = samples(store, ORIGIN, ORIGIN + timedelta(hours=1))
    jobs = sorted(Job.objects.values_list("job_id", "state", "end_time"))
    assert summary["telemetry"]["samples"] > 0 and summary["fleet"]["samples"] > 0
    run_feeders(span(ORIGIN, ORIGIN + timedelta(minutes=4), small_demo["memory"]))
    again = samples(store, ORIGIN, ORIGIN + timedelta(hours=1))
    assert len(again) == len(written)
    assert again.equals(written)  # the same moments, and the same values: each window has its own seed
    assert sorted(Job.objects.values_list("job_id", "state", "end_time")) == jobs
    # a span overlapping the first one adds only its new part
    run_feeders(span(ORIGIN + timedelta(minutes=2), ORIGIN + timedelta(minutes=6), small_demo["memory"]))
    grown = samples(store, ORIGIN, ORIGIN + timedelta(hours=1))
    assert grown.duplicated(["host", "gpu", "field", "ts"]).sum() == 0
    megatron_host = small_demo["megatron"].node_list[0]
    times = grown[(grown.host == megatron_host) & (grown.gpu == 0) & (grown.field == 1004)]["ts"]
    assert len(times) == 36 and times.diff().dropna().dt.total_seconds().eq(10).all()  # (0, 6 min] every 10 s


@pytest.mark.django_db
def test_fed_samples_keep_the_planted_problems_the_fields_scoring_needs_and_the_silent_nodes(small_demo):
    from apps.saturation.products import FIELDS_NEEDED

    store = small_demo["store"]
    end = ORIGIN + timedelta(minutes=10)
    run_feeders(span(ORIGIN, end, small_demo["memory"]))
    megatron = small_demo["megatron"]
    hosts = list(megatron.node_list)
    data = samples(store, ORIGIN, end + timedelta(seconds=1), hosts=tuple(hosts))
    training = data[data.ts.dt.minute.isin([2, 3, 4, 5, 6, 7, 8])]  # 6:14-6:20 into the run: training, no checkpoint

    def per_gpu(field):
        part = training[training.field == field]
        return part.groupby(["host", "gpu"])["value"].median()

    planted = default_planted(hosts)
    clock, temperature, tensor = per_gpu(100), per_gpu(150), per_gpu(1004)
    assert clock[planted.throttled] < 0.8 * clock.drop(planted.throttled).median()
    reasons = training[(training.field == 112) & (training.host == planted.throttled[0]) & (training.gpu == planted.throttled[1])]
    assert (reasons["value"].astype(int) & POWER_CAP_BIT).all()
    assert temperature[planted.hot] - temperature.drop(planted.hot).median() >= 12
    nic = tensor[planted.slow_nic]
    assert nic.max() < 0.92 * tensor.drop(planted.slow_nic, level="host").median()
    # every running job's GPUs have the fields the score needs, at 10 s
    for job in (small_demo["finetune"], small_demo["prep"]):
        fed = samples(store, ORIGIN, end + timedelta(seconds=1), hosts=tuple(job.node_list))
        assert {1001, 1002, 1004, 1005, 203, 100, 155} <= set(fed.field) <= set(FIELDS_NEEDED) | {112, 140, 156, 252}
        assert fed.groupby(["host", "gpu", "field"]).size().eq(60).all()
    # idle nodes: power and temperature once a minute; the silent and the down nodes: nothing
    fleet = samples(store, ORIGIN, end + timedelta(seconds=1))
    idle = fleet[fleet.host == small_demo["hosts"][0]]
    assert set(idle.field) == {150, 155} and idle.groupby(["gpu", "field"]).size().eq(10).all()
    assert not fleet.host.isin(small_demo["silent"] + [small_demo["down"]]).any()
    busy_hosts = {host for job in (megatron, small_demo["finetune"], small_demo["prep"]) for host in job.node_list}
    assert fleet[fleet.host.isin(busy_hosts) & (fleet.field == 155)].groupby(["host", "gpu"]).size().eq(60).all()


@pytest.mark.django_db
def test_the_timeline_ends_jobs_at_their_planned_end_starts_new_ones_and_keeps_the_megatron_run(small_demo):
    from apps.jobs.demo import TIMELINE_FIRST_ID, planned_end
    from apps.jobs.models import Job
    from apps.topology.models import Node

    finetune = small_demo["finetune"]
    end, state = planned_end(finetune, ORIGIN, SEED)
    assert ORIGIN < end <= ORIGIN + timedelta(minutes=10)  # its time limit comes first
    moment = ORIGIN
    while moment < ORIGIN + timedelta(hours=2):
        run_feeders(span(moment, moment + timedelta(minutes=10), small_demo["memory"]))
        moment += timedelta(minutes=10)
    finetune.refresh_from_db()
    assert (finetune.state, finetune.end_time) == (state, end) and finetune.steps.filter(end_time=None).count() == 0
    assert Job.objects.get(pk=small_demo["megatron"].pk).state == "RUNNING"
    new = Job.objects.filter(job_id__gte=TIMELINE_FIRST_ID)
    assert new.count() >= 5
    assert {job.start_time for job in new} <= {ORIGIN + timedelta(seconds=300 * n) for n in range(1, 25)}
    silent = set(small_demo["silent"]) | {small_demo["down"]}
    assert not any(set(job.node_list) & silent for job in new)
    running_nodes = {host for nodes in Job.objects.filter(state="RUNNING").values_list("node_list", flat=True) for host in nodes}
    assert set(Node.objects.filter(state="allocated").values_list("hostname", flat=True)) == running_nodes
    # the telemetry of a job that ended stops at its end; the fleet takes its node over until the next job there
    store = small_demo["store"]
    host = finetune.node_list[0]
    data = samples(store, ORIGIN, ORIGIN + timedelta(hours=2), hosts=(host,), gpus=(0,))
    following = min([job.start_time for job in new if host in job.node_list and job.start_time >= end],
                    default=ORIGIN + timedelta(hours=2))
    profiling = data[(data.field == 1004) & (data.ts <= following)]
    assert profiling.ts.max() <= end and profiling.ts.max() > end - timedelta(seconds=11)
    assert following - end >= timedelta(minutes=5)  # (for this seed)
    power = data[(data.field == 155) & (data.ts > end) & (data.ts <= following)]
    assert len(power) >= int((following - end).total_seconds() // 60) - 1
    assert power.ts.diff().dropna().dt.total_seconds().eq(60).all() and np.median(power["value"]) < 150  # idle, each minute
