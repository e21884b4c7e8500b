"""The job-end summary (issue 20): off by default, switched by the user on the notifications page; once on, each of
the user's jobs that ends afterwards is mailed once (through a real SMTP server, aiosmtpd), after its final scoring,
even with two workers sweeping at the same moment."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.jobs.models import Cluster, Job
from apps.notifications.models import NotificationSent, UserNotifications
from apps.notifications.services import notify_ended_jobs, user_notifications_update
from apps.notifications.tasks import notify_ended_jobs_task
from apps.saturation.models import JobSaturation


def _ended(job_id: int, user: str, *, minutes_ago: float = 5, scored: bool = True, state: str = "COMPLETED", stragglers=()):
    now = timezone.now()
    end = now - timedelta(minutes=minutes_ago)
    job = Job.objects.create(cluster=Cluster.objects.get_or_create(name="alps")[0], job_id=job_id, name=f"train-{job_id}",
                             user_name=user, account="a-llm01", state=state, gpus=16, start_time=end - timedelta(hours=2),
                             end_time=None if state == "RUNNING" else end,
                             node_list=[f"nid{job_id % 1000:03d}{n:03d}" for n in range(4)])
    if scored:
        JobSaturation.objects.create(job=job, status="ready", computed=now, score=47.0, limiter="dram", idle_gpus=0,
                                     stragglers=list(stragglers))
    return job


@pytest.fixture
def alice(make_user):
    user = make_user("alice", accounts=["a-llm01"])
    user.email = "alice@example.org"
    user.save()
    return user


@pytest.mark.django_db
def test_off_by_default_then_one_mail_per_ended_job(smtp_settings, store, alice):
    inbox = smtp_settings
    _ended(100, "alice")
    assert notify_ended_jobs()["jobs"] == 0 and inbox.messages == []  # nobody asked
    assert not UserNotifications.objects.filter(user=alice, job_end=True).exists()

    user_notifications_update(alice, job_end=True)
    straggler = {"level": "gpu", "host": "nid101000", "gpu": 3, "reason": "SM clock 20 % below its peers"}
    job = _ended(101, "alice", minutes_ago=0, stragglers=[straggler])
    _ended(102, "alice", state="RUNNING")
    _ended(103, "bob")
    first = notify_ended_jobs(now=timezone.now() + timedelta(minutes=1))
    assert (first["jobs"], first["sent"]) == (1, 1), first  # 100 ended before the switch; 102 runs; bob did not ask
    (mail,) = inbox.to("alice@example.org")
    assert "alps/101" in mail["subject"] and "COMPLETED" in mail["subject"] and "47/100" in mail["subject"]
    body = mail["body"]
    assert "GPU saturation 47 of 100, limited by dram" in body
    assert "GPU 3 of node nid101000" in body and "SM clock 20 %" in body
    assert "https://belvedere.example/jobs/alps/101/" in body
    assert "https://belvedere.example/api/v1/jobs/alps/101/report/" in body
    assert "not available: no throughput" in body  # the job sent no application metrics: said so
    assert "https://belvedere.example/notifications/" in body

    # Never again for that job, however much later.
    assert notify_ended_jobs(now=timezone.now() + timedelta(days=1))["sent"] == 0
    assert len(inbox.messages) == 1
    row = NotificationSent.objects.get(job=job)
    assert (row.reason, row.status, row.recipient) == ("job_end", "sent", "alice@example.org")


@pytest.mark.django_db
def test_it_waits_for_the_final_scoring_but_not_for_ever(smtp_settings, store, alice, settings):
    settings.NOTIFY_JOB_END_WAIT_MINUTES = 30
    user_notifications_update(alice, job_end=True)
    job = _ended(200, "alice", minutes_ago=0, scored=False)
    now = timezone.now()
    assert notify_ended_jobs(now=now + timedelta(minutes=10))["jobs"] == 0
    counts = notify_ended_jobs(now=now + timedelta(minutes=31))
    assert counts["sent"] == 1
    (mail,) = smtp_settings.to("alice@example.org")
    assert "not scored" in mail["subject"] and "not available: GPU saturation" in mail["body"]
    assert NotificationSent.objects.filter(job=job, reason="job_end").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_send_one_mail_per_job(smtp_settings, store, alice):
    user_notifications_update(alice, job_end=True)
    for job_id in (301, 302):
        _ended(job_id, "alice", minutes_ago=0)
    now = timezone.now() + timedelta(minutes=1)
    barrier = threading.Barrier(2)
    results, errors = [], []

    def sweep():
        try:
            barrier.wait(timeout=10)
            results.append(notify_ended_jobs(now=now))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sum(result["sent"] for result in results) == 2
    subjects = sorted(mail["subject"] for mail in smtp_settings.to("alice@example.org"))
    assert len(subjects) == 2 and "alps/301" in subjects[0] and "alps/302" in subjects[1]


@pytest.mark.django_db
def test_the_task_runs_the_sweep(smtp_settings, store, alice):
    assert notify_ended_jobs_task.name == "notifications.notify_ended_jobs" and notify_ended_jobs_task.acks_late
    user_notifications_update(alice, job_end=True)
    _ended(401, "alice", minutes_ago=0)
    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    assert notify_ended_jobs_task.apply(kwargs={"now": later}).get()["sent"] == 1
    assert notify_ended_jobs_task.apply(kwargs={"now": later}).get()["sent"] == 0
    assert len(smtp_settings.to("alice@example.org")) == 1


@pytest.mark.django_db
def test_the_page_switches_it_for_the_user_only(client, alice, make_user):
    client.force_login(alice)
    page = client.get("/notifications/").content.decode()
    assert 'name="job_end"' in page and 'value="on" checked' not in page.split('id="notify-job-end"')[1].split("</section>")[0]
    client.post("/notifications/", {"kind": "job_end", "job_end": "on"})
    row = UserNotifications.objects.get(user=alice)
    assert row.job_end and row.job_end_since is not None
    page = client.get("/notifications/").content.decode()
    assert "checked" in page.split('id="notify-job-end"')[1].split("</section>")[0]
    client.post("/notifications/", {"kind": "job_end"})  # unticked
    assert not UserNotifications.objects.get(user=alice).job_end
    assert not UserNotifications.objects.exclude(user=alice).exists()
