"""Telemetry's heatmaps take their physical ranges from the job's GPU model, which the saturation app keeps (its
ceilings table): telemetry asks apps.core.gpu_models, which saturation fills from its AppConfig.ready()."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core import heatmaps
from apps.core.gpu_models import gpu_model_for
from apps.topology.generator import generate
from apps.topology.services import topology_apply
from tests.topology.conftest import SMALL

HOSTS = ["nid000001", "nid000002"]


@pytest.fixture
def job(db):
    from apps.jobs.models import Cluster, Job

    topology_apply(generate(SMALL), source="test", prune=True)
    start = timezone.now() - timedelta(minutes=30)
    return Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=7, user_name="alice", state="RUNNING",
                              start_time=start, node_list=HOSTS)


def test_the_heatmaps_facts_follow_the_model_of_the_jobs_nodes(job):
    from apps.topology.models import Node

    Node.objects.filter(hostname__in=HOSTS).update(gpu_model="NVIDIA H100 80GB HBM3")
    assert heatmaps.facts_of(gpu_model_for(job)).name == "H100 SXM"
    Node.objects.filter(hostname__in=HOSTS).update(gpu_model="NVIDIA GH200 120GB")
    assert heatmaps.facts_of(gpu_model_for(job)).name == "GH200"


def test_the_ceilings_staff_keep_give_the_facts(job):
    from apps.saturation.models import GpuModelCeiling
    from apps.topology.models import Node

    Node.objects.filter(hostname__in=HOSTS).update(gpu_model="NVIDIA B200")
    GpuModelCeiling.objects.create(name="B200", matches="B200", max_sm_clock_mhz=1965.0)
    facts = heatmaps.facts_of(gpu_model_for(job))
    assert (facts.name, facts.max_sm_clock_mhz) == ("B200", 1965.0)
