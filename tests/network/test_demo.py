"""The demo's NICs: the Megatron job's degraded hsn2 on the node whose GPUs wait is named with its counters, by the
network API and by the saturation stragglers; its other NICs and other jobs' are healthy; the feeder keeps counting."""
from datetime import timedelta

import pandas as pd
import pytest

from apps.jobs.models import Job

# What the demo planted: the store's network table on each engine is the contract suite's, the API's the tests beside.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.engine_independent]


@pytest.fixture
def demo():
    from tests.demo_snapshot import load_demo

    load_demo()
    return Job.objects.select_related("cluster").get(cluster__name="alps", job_id=1200772)


def _demo_user():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="demo")


def test_the_degraded_nic_is_named_with_its_counters(demo, client):
    from apps.telemetry.synthetic_jobs import default_planted

    slow = default_planted(list(demo.node_list)).slow_nic
    assert slow == "nid000473"
    client.force_login(_demo_user())
    body = client.get("/api/v1/jobs/alps/1200772/network/").json()
    assert [(f["host"], f["nic"]) for f in body["findings"]] == [(slow, "hsn2")]
    finding = body["findings"][0]
    assert finding["reason"].startswith(f"hsn2 on {slow}: 30 % of packets retried, its peers < 1 %")
    assert finding["retries"] == pytest.approx(0.30 * finding["tx_packets"], rel=0.03) and finding["tx_packets"] > 1e6
    assert body["reporting"] == body["expected"] == 4 * len(demo.node_list)
    assert "the job's straggler" in body["verdict"]


def test_the_saturation_straggler_names_the_nic_not_a_guess(demo):
    from apps.saturation.models import JobSaturation

    stragglers = JobSaturation.objects.get(job=demo).stragglers
    node = next(s for s in stragglers if s["level"] == "node" and s["host"] == "nid000473")
    assert node["nic"] == "hsn2" and "network: hsn2 on nid000473: 30 % of packets retried, its peers < 1 %" in node["cause"]
    assert "no throttling" not in node["cause"]
    assert not any(s["level"] == "nic" for s in stragglers)


def test_a_healthy_job_gets_no_network_finding(demo, client):
    from apps.network.panel import summary

    client.force_login(_demo_user())
    others = Job.objects.filter(cluster__name="alps", user_name="demo").exclude(pk=demo.pk).exclude(start_time=None)
    checked = 0
    for job in others.order_by("-start_time")[:3]:
        body = client.get(f"/api/v1/jobs/alps/{job.job_id}/network/", {"series": "none"}).json()
        if not body["reporting"]:
            continue
        checked += 1
        assert body["findings"] == [], job.job_id
        part = summary(job)
        assert part.findings == [] and part.facts[0].value == "alike"
    assert checked


def test_the_feeder_continues_the_counters(demo):
    from apps.core.demo import FeedContext
    from apps.network.demo import FEED_INTERVAL, feed
    from apps.telemetry.store import telemetry_store

    store = telemetry_store()
    last = store.read_net("alps", hosts=["nid000473"], nics=["hsn2"], fields=["nic_tx_bytes"])
    end = last["ts"].max().to_pydatetime() + timedelta(seconds=60)
    context = FeedContext(seed=_seed(), start=end - timedelta(seconds=60), end=end, origin=end,
                          memory={"megatron": demo.pk})
    summary = feed(context)
    assert summary["jobs"] >= 1 and summary["samples"] > 0
    after = store.read_net("alps", hosts=["nid000473"], nics=["hsn2"], fields=["nic_tx_bytes"])
    ordered = after.sort_values("ts")
    rates = (ordered["value"].diff() / ordered["ts"].diff().dt.total_seconds()).dropna()
    assert len(after) == len(last) + 60 // FEED_INTERVAL and (rates > 0).all()
    # the fed minute runs on at the rate of the minute before it (no jump between build and feed)
    assert rates.iloc[-1] == pytest.approx(rates.iloc[-8], rel=0.1)


def _seed() -> int:
    from apps.core.models import DemoState

    return int(DemoState.objects.get().seed)
