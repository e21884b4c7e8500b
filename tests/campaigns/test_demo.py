"""The demo's campaign (apps/campaigns/demo.py), built alone: 14 chained allocations over days, found by detection, with
a node failure, an NCCL timeout, a time limit without a final checkpoint and a restart from an older checkpoint."""
import io
import random

import pytest

pytestmark = pytest.mark.django_db


def test_the_demo_campaign_tells_its_four_stories(store, settings):
    settings.CAMPAIGN_CACHE_SECONDS = 0
    from apps.campaigns import demo
    from apps.campaigns.models import Campaign
    from apps.campaigns.selectors import campaign_summary
    from apps.core.demo import DemoContext
    from apps.jobs.models import Cluster

    Cluster.objects.create(name="alps")
    context = DemoContext(seed=1, rng=random.Random(1), out=io.StringIO(),
                          shared={"hostnames": [f"nid{i:06d}" for i in range(1, 200)], "memberships": {"demo": ["a-llm01"]}})
    summary = demo.build(context)
    assert summary["campaign_jobs"] == 14 and summary["campaigns_created"] == 1
    campaign = Campaign.objects.get(name=demo.NAME)
    body = campaign_summary(campaign)
    assert len(body["jobs"]) == 14 and campaign.source == "singleton"
    days = (body["jobs"][-1]["end"] - body["jobs"][0]["start"]).total_seconds() / 86400
    assert days > 3
    assert [row["cause"] for row in body["failures"]] == ["node failure", "NCCL timeout", "time limit without a final checkpoint"]
    assert [item["job"] for item in body["older_restarts"]] == [f"alps/{demo.FIRST_ID + 10}"]
    assert 0.5 < body["goodput"] < 0.95 and body["mtbf_hours"] and body["checkpoint"]["young_daly_s"]
    assert body["queue_hours"] > 10 and "optimum" in body["checkpoint"]["words"]


def test_a_member_jobs_pdf_report_has_the_campaign_page(store, settings, tmp_path):
    settings.CAMPAIGN_CACHE_SECONDS = 0
    from apps.appmetrics import report_pdf
    from apps.appmetrics.reporting import report_sections_facts
    from apps.campaigns import demo
    from apps.core.demo import DemoContext
    from apps.jobs.models import Cluster, Job

    Cluster.objects.create(name="alps")
    demo.build(DemoContext(seed=1, rng=random.Random(1), out=io.StringIO(),
                           shared={"hostnames": [f"nid{i:06d}" for i in range(1, 200)], "memberships": {"demo": ["a-llm01"]}}))
    job = Job.objects.get(job_id=demo.FIRST_ID + 6)
    [section] = report_sections_facts(job)
    assert section["title"] == f"Campaign {demo.NAME}" and any("Goodput" in line for line in section["lines"])
    assert [row[2] for row in section["table"]["rows"]] == ["node failure", "NCCL timeout", "time limit without a final checkpoint"]
    plain = report_pdf.render_report({"job": {"id": f"alps/{job.job_id}"}}, tmp_path / "plain.pdf")
    pages = report_pdf.render_report({"job": {"id": f"alps/{job.job_id}"}, "sections": [section]}, tmp_path / "with.pdf")
    assert pages == plain + 1
