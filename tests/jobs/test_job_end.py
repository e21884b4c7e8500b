"""A job's end (issue 35, item 3): its products are brought up to date at once, not at the beat's next sweep,
and until its score exists the page says it is not scored yet — never "the job has not started".

Real components: the event service and ``jobs_upsert``, the live refresh's cache keys and its task run in
this process, the embedded telemetry store, the real scoring and the real first screen."""
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from apps.core.live import key
from apps.jobs.services import JobEvent, job_event_apply, jobs_upsert
from apps.jobs.slurm_json import SlurmJob
from tests.telemetry.contract import synthetic

HOSTS = ("nid000001", "nid000002")
UNCONSUMED = "job-end-tests-nobody"  # the queued refresh waits here; the test runs the task itself


@pytest.fixture
def refresh_queue(settings):
    settings.JOB_REFRESH_QUEUE = UNCONSUMED
    yield
    cache.clear()


def running_job(job_id=501, minutes_ago=40):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0, second=0) - timedelta(minutes=minutes_ago)
    cluster, _ = Cluster.objects.get_or_create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", account="a-llm01", state="RUNNING",
                             submit_time=start - timedelta(minutes=1), start_time=start, gpus=8, node_count=2,
                             node_list=list(HOSTS), nodes="nid[000001-000002]")
    cache.delete_many([key(kind, job.pk) for kind in ("dirty", "pending", "lock")])
    return job


@pytest.mark.django_db
def test_the_end_event_scores_the_job_at_once(refresh_queue, store, django_capture_on_commit_callbacks):
    from apps.core.tasks import refresh_job_task
    from apps.saturation.models import JobSaturation

    job = running_job()
    store.write(synthetic(hosts=HOSTS, fields=(1002, 1004, 1005, 155), minutes=30, start=job.start_time))
    end = job.start_time + timedelta(minutes=30)
    with django_capture_on_commit_callbacks(execute=True):
        job_event_apply(JobEvent(cluster="alps", job_id=job.job_id, event="end", time=end, state="CANCELLED"))
    queued = cache.get(key("pending", job.pk))
    assert queued, "the job's end queued no refresh of its products"
    assert not JobSaturation.objects.filter(job=job, status="ready").exists()

    refresh_job_task.apply(args=[job.pk], kwargs={"reason": "the job ended"}, task_id=queued).get()
    record = JobSaturation.objects.get(job=job)
    assert record.status == "ready" and record.score is not None
    assert record.window_end == end  # scored up to the end, not to the last sweep


@pytest.mark.django_db
def test_a_sync_that_sees_a_running_job_end_queues_its_refresh_once(refresh_queue, django_capture_on_commit_callbacks):
    job = running_job(job_id=502)
    other = running_job(job_id=503)
    end = timezone.now().replace(microsecond=0)
    records = [SlurmJob(cluster="alps", job_id=502, state="FAILED", start_time=job.start_time, end_time=end, exit_code=2,
                        node_list=HOSTS, nodes="nid[000001-000002]"),
               SlurmJob(cluster="alps", job_id=503, state="RUNNING", start_time=other.start_time,
                        node_list=HOSTS, nodes="nid[000001-000002]"),
               # a job first seen when it was over (a first sync holds thousands): left to the beat's sweep
               SlurmJob(cluster="alps", job_id=504, state="COMPLETED", start_time=job.start_time, end_time=end,
                        node_list=HOSTS, nodes="nid[000001-000002]")]
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        jobs_upsert(job.cluster, records, source="sacct")
    assert cache.get(key("pending", job.pk)) and cache.get(key("pending", other.pk)) is None
    assert len(callbacks) == 1
    cache.delete_many([key(kind, job.pk) for kind in ("dirty", "pending")])
    with django_capture_on_commit_callbacks(execute=True) as callbacks:  # the same document again: nothing ended now
        jobs_upsert(job.cluster, records, source="sacct")
    assert cache.get(key("pending", job.pk)) is None and not callbacks


@pytest.mark.django_db
def test_a_pending_job_cancelled_before_it_started_queues_nothing(refresh_queue, django_capture_on_commit_callbacks):
    from apps.jobs.models import Cluster, Job

    cluster, _ = Cluster.objects.get_or_create(name="alps")
    job = Job.objects.create(cluster=cluster, job_id=505, user_name="alice", state="PENDING", submit_time=timezone.now())
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        job_event_apply(JobEvent(cluster="alps", job_id=505, event="end", time=timezone.now(), state="CANCELLED"))
    assert not callbacks and cache.get(key("pending", job.pk)) is None


@pytest.mark.parametrize("message", ["", "the job has not started on any node yet"])
@pytest.mark.django_db
def test_a_finished_job_waiting_for_its_score_says_so_not_that_it_never_started(client, django_user_model, message):
    """Job 1200412: cancelled after 4 h 41 min, its row still waiting from before its end (or just created by
    the scoring that the end queued), and the page said "Waiting: the job has not started on any node yet"."""
    from apps.saturation.models import JobSaturation

    job = running_job(job_id=506, minutes_ago=300)
    job.state, job.end_time = "CANCELLED", job.start_time + timedelta(minutes=281)
    job.save()
    JobSaturation.objects.create(job=job, status="waiting", message=message)
    django_user_model.objects.create_user("alice", password="pw")
    client.login(username="alice", password="pw")
    text = client.get(f"/jobs/alps/{job.job_id}/summary/").content.decode()
    assert "has not started" not in text
    assert "Not scored yet" in text and "the job ended" in text


@pytest.mark.django_db
def test_a_scoring_in_progress_is_said_before_a_waiting_message(client, django_user_model):
    from apps.saturation.models import JobSaturation

    job = running_job(job_id=507, minutes_ago=90)
    JobSaturation.objects.create(job=job, status="waiting", message="", scoring_since=timezone.now() - timedelta(seconds=20))
    django_user_model.objects.create_user("alice", password="pw")
    client.login(username="alice", password="pw")
    text = client.get(f"/jobs/alps/{job.job_id}/summary/").content.decode()
    assert "has not started" not in text and "Scoring since" in text
