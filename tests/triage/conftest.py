"""A small world with one of each source: a wasteful running job, a job with stragglers, a failing node and a
bad switch (vetting recommendations), a namespace request waiting for approval, an open catalogue incident."""
from datetime import timedelta

import pytest
from django.utils import timezone


@pytest.fixture
def sources(db, make_user):
    from apps.catalog.models import DataProduct, Incident
    from apps.jobs.models import Cluster, Job
    from apps.namespaces.models import NamespaceRequest
    from apps.saturation.models import JobSaturation
    from apps.vetting.models import NodeHealth, Recommendation, Rule
    from apps.vetting.services import rules_ensure_built_in
    from tests.namespaces.conftest import typical

    now = timezone.now()
    staff = make_user("sam", is_staff=True)
    make_user("tina", is_staff=True)
    alice = make_user("alice", accounts=["a-llm01"])
    alice.email = "alice@example.org"
    alice.save()
    cluster = Cluster.objects.create(name="alps")

    def job(job_id, name, gpus, hours, **saturation):
        start = now - timedelta(hours=hours)
        row = Job.objects.create(cluster=cluster, job_id=job_id, name=name, user_name="alice", account="a-llm01", state="RUNNING",
                                 submit_time=start, start_time=start, gpus=gpus, node_list=[f"nid{job_id % 1000:06d}"])
        JobSaturation.objects.create(job=row, status="ready", computed=now, **saturation)
        return row

    def gpus(host, n, busy, score):
        return [{"host": host, "gpu": i, "busy": busy, "score": score} for i in range(n)]

    # 8 GPUs, 6 idle, for 10 h: the idle ones lose 60 GPU-hours, the 2 busy ones (busy 0.8) 2 * 10 * 0.2 = 4 more.
    idle = job(1001, "data-prep-1", 8, 10.0, score=20.0, idle_gpus=6,
               per_gpu=gpus("nid001001", 6, 0.0, 0.0) + gpus("nid001001", 2, 0.8, 80.0)[:2])
    # 4 GPUs at S = 10 (wasteful by its low steady score), busy 95 % of the time, for 2 h: 4 * 2 * 0.05 = 0.4 GPU-hours
    # lost; its distance to saturation is headroom.
    slow = job(1002, "eval-small", 4, 2.0, score=10.0, idle_gpus=0, per_gpu=gpus("nid001002", 4, 0.95, 10.0))
    # Saturated, but with a straggler: not wasteful.
    busy = job(1003, "megatron", 16, 5.0, score=80.0, idle_gpus=0, per_gpu=gpus("nid001003", 16, 1.0, 80.0),
               stragglers=[{"level": "node", "host": "nid000003", "reason": "nid000003: SM clock 20 % below its peers for 40 min"}])
    rules_ensure_built_in()
    rule = Rule.objects.get(slug="vetting-failures-30d")
    switch_rule = Rule.objects.get(slug="nccl-low-same-switch")
    NodeHealth.objects.create(host="nid000777", state="drain_recommended", severity="critical", since=now)
    node = Recommendation.objects.create(rule=rule, rule_version=1, subject_kind="node", subject="nid000777", hosts=["nid000777"],
                                         action="drain_recommended", severity="critical", summary="4 failed GPU evaluations in 7 days")
    switch = Recommendation.objects.create(rule=switch_rule, rule_version=1, subject_kind="switch", subject="5.0",
                                           hosts=["nid000640", "nid000641"], action="suspect", severity="warning",
                                           summary="low NCCL bandwidth behind switch 5.0 in 3 runs")
    from apps.accounts.models import Project

    request = NamespaceRequest.objects.create(kind="create", project=Project.objects.get(slurm_account="a-llm01"),
                                              name="a-llm01-serve", spec={**typical(), "name": "serve"}, status="waiting_approval",
                                              requested_by=alice, needs_approval=["GPU quota above the envelope"])
    product = DataProduct.objects.create(name="slurm-jobs", title="Slurm jobs", domain="jobs", status="active", owner_team="hpc-ops",
                                         owner_contact="ops@example.org", version="1", definition={}, source_file="x", digest="0",
                                         loaded=now)
    incident = Incident.objects.create(product=product, kind="freshness", opened=now - timedelta(hours=1), message="newest row 3 h old")
    return {"staff": staff, "alice": alice, "idle": idle, "slow": slow, "busy": busy, "node": node, "switch": switch,
            "request": request, "incident": incident}
