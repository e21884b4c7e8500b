"""The notifications tasks: in process (TaskRun progress, a bad ``now`` refused) and on a real Celery worker process
that sends through the SMTP backend to the test's SMTP server (the worker is started with the server's address)."""
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.core.models import TaskRun
from apps.notifications.models import NotificationSent
from apps.notifications.tasks import notify_running_jobs_task, staff_digest_task


def _user(make_user, name):
    user = make_user(name)
    user.email = f"{name}@example.org"
    user.save()
    return user


@pytest.mark.django_db
def test_the_task_mails_once_and_reports_progress(smtp_settings, make_user, running_job, opted_in):
    _user(make_user, "olga")
    opted_in("a-task")
    running_job("a-task", "olga", 1201)
    now = timezone.now()
    first = notify_running_jobs_task.apply(kwargs={"now": now.isoformat()}).get()
    again = notify_running_jobs_task.apply(kwargs={"now": (now + timedelta(minutes=5)).isoformat()}).get()
    assert (first["sent"], again["sent"], again["rate_limited"]) == (1, 0, 1)
    assert len(smtp_settings.to("olga@example.org")) == 1
    runs = list(TaskRun.objects.filter(name="notifications.notify_running_jobs").order_by("pk"))
    assert [run.status for run in runs] == ["succeeded", "succeeded"]
    assert "1 sent" in runs[0].message and "1 within the rate limit" in runs[1].message


@pytest.mark.django_db
def test_a_now_without_a_zone_is_refused(smtp_settings):
    with pytest.raises(ValueError, match="ISO 8601"):
        notify_running_jobs_task.apply(kwargs={"now": "2026-11-26 12:00"}).get()
    assert TaskRun.objects.get(name="notifications.notify_running_jobs").status == "failed"


@pytest.mark.django_db
def test_the_digest_task_says_when_it_is_off(settings):
    settings.NOTIFY_STAFF_DIGEST_EMAILS = []
    assert staff_digest_task.apply().get()["status"] == "off"


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_on_a_real_worker_a_wasteful_job_mails_its_user_once(start_service, smtp_server, make_user, running_job, opted_in):
    _user(make_user, "paula")
    opted_in("a-worker")
    job = running_job("a-worker", "paula", 1301)
    queue = f"notify-{uuid.uuid4().hex[:8]}"  # this test's own worker: the session's worker knows nothing of the SMTP server
    worker = start_service(
        "notify-worker", ["-m", "celery", "-A", "portal", "worker", "--pool=solo", "-Q", queue, "--without-mingle",
                          "--without-gossip", "--loglevel=INFO", f"--hostname={queue}@%h"], " ready.",
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend", EMAIL_HOST=smtp_server.host,
        EMAIL_PORT=str(smtp_server.port), SITE_URL="https://belvedere.example", NOTIFY_RATE_LIMIT_HOURS="24")
    now = timezone.now()
    for minutes in (0, 5):  # two beat ticks: one mail
        notify_running_jobs_task.apply_async(kwargs={"now": (now + timedelta(minutes=minutes)).isoformat()}, queue=queue)

    def done(count):
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if TaskRun.objects.filter(name="notifications.notify_running_jobs", status="succeeded").count() >= count:
                return
            time.sleep(0.3)
        raise AssertionError("the worker did not finish the task; its log ends with:\n" + worker.log_text()[-3000:])

    done(2)
    mails = smtp_server.to("paula@example.org")
    assert len(mails) == 1, worker.log_text()[-3000:]
    assert "https://belvedere.example/jobs/alps/1301/" in mails[0]["body"]
    notify_running_jobs_task.apply_async(kwargs={"now": (now + timedelta(hours=25)).isoformat()}, queue=queue)
    done(3)
    assert len(smtp_server.to("paula@example.org")) == 2
    assert NotificationSent.objects.filter(job=job, status="sent").count() == 2
    assert "notifications.notify_running_jobs" in worker.log_text()
