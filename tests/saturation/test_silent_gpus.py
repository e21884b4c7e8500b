"""GPUs whose telemetry stops while the job runs are a finding (issue 35, item 3: three quarters of job 1200412's
GPUs were silent for its last 80 minutes while its page said "telemetry complete" and "Nothing needs your
attention"). The rule (apps/saturation/silence.py, plain) by hand, then real samples, a real scoring, the real page."""
import re
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from django.utils import timezone

from apps.saturation.silence import silent_gpus, tolerance_s
from tests.telemetry.contract import synthetic

NAN = np.nan


def test_a_gpu_that_stops_is_named_with_the_end_of_its_last_column():
    # 3 GPUs x 10 columns of 60 s from t=0: GPU 2 stops after column 3; GPU 1 misses one column (a gap, not silence)
    arrays = {"S": np.ones((3, 10)), "limiter": np.zeros((3, 10)), "power_capped": np.zeros((3, 10))}
    arrays["S"][2, 4:] = NAN
    arrays["S"][1, 6] = NAN
    found = silent_gpus(["a", "a", "b"], [0, 1, 0], arrays, origin_ns=0, step_s=60)
    assert [(item.host, item.gpu, item.last_ns) for item in found] == [("b", 0, 4 * 60 * 10**9)]


def test_silence_shorter_than_the_tolerance_and_gpus_that_never_reported_are_not_named():
    arrays = {"S": np.ones((3, 10)), "busy": np.full((3, 10), NAN)}
    arrays["S"][0, 6:] = NAN  # 4 columns x 60 s = 240 s < 300 s
    arrays["S"][1, :] = NAN  # never reported: the telemetry panel counts those
    assert tolerance_s(60) == 300 and tolerance_s(600) == 1200
    assert silent_gpus(["a", "a", "b"], [0, 1, 0], arrays, origin_ns=0, step_s=60) == []
    arrays["busy"][0, 8] = 0.5  # another metric of the GPU still arrived: it is not silent
    arrays["S"][0, 3:] = NAN
    assert silent_gpus(["a", "a", "b"], [0, 1, 0], arrays, origin_ns=0, step_s=60) == []


HOSTS = ("nid000001", "nid000002", "nid000003", "nid000004")


@pytest.mark.django_db
def test_three_quarters_of_the_gpus_silent_for_the_last_80_minutes_is_critical_on_the_first_screen(client, django_user_model,
                                                                                                    store):
    from apps.jobs.models import Cluster, Job
    from apps.saturation.services import job_saturation_refresh

    start = timezone.now().replace(microsecond=0, second=0) - timedelta(hours=5)
    cluster, _ = Cluster.objects.get_or_create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=1200412, user_name="alice", account="a-llm01", state="CANCELLED",
                             submit_time=start, start_time=start, end_time=start + timedelta(minutes=180), gpus=16,
                             node_count=4, node_list=list(HOSTS), nodes="nid[000001-000004]")
    frame = synthetic(hosts=HOSTS, fields=(1002, 1004, 1005, 155), minutes=180, every_s=60, start=start)
    stop = start + timedelta(minutes=100)
    frame = frame[(frame["host"] == "nid000001") | (frame["ts"] < pd.Timestamp(stop))]
    store.write(frame)
    record = job_saturation_refresh(job)
    assert record.status == "ready" and "silent GPUs" in record.flags
    silent = [g for g in record.per_gpu if g.get("silent_from")]
    assert len(silent) == 12 and {g["host"] for g in silent} == {"nid000002", "nid000003", "nid000004"}

    django_user_model.objects.create_user("alice", password="pw")
    client.login(username="alice", password="pw")
    text = client.get(f"/jobs/alps/{job.job_id}/summary/").content.decode()
    findings = re.findall(r'<span class="finding__title">(.*?)</span>', text, re.S)
    assert "Nothing needs your attention" not in text
    last = stop - timedelta(minutes=1)  # their last sample; the column holding it ends within the scoring step
    assert any(f"12 of 16 GPUs stopped sending telemetry from {last:%H:%M} UTC, 1 h 2" in item
               and "min before the job ended" in item for item in findings), findings
    assert "nid000002:0,1,2,3" in text and "finding--critical" in text
