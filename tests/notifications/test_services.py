"""Acceptance 4 of issue 19: a wasteful running job triggers exactly one e-mail to its user within the rate limit,
sent through Django's SMTP backend to a real SMTP server (aiosmtpd) started by the test. Also: projects that did
not opt in get none, persistent stragglers, users without an address, refused mail, concurrent workers, and the
staff digest."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.notifications.models import NotificationSent, StaffDigest, StragglerSighting
from apps.notifications.services import notification_claim, notify_running_jobs, staff_digest

pytestmark = pytest.mark.django_db


def test_a_wasteful_running_job_mails_its_user_exactly_once_within_the_rate_limit(smtp_settings, make_user, running_job,
                                                                                 opted_in):
    inbox = smtp_settings
    alice = make_user("alice", accounts=["a-wst"])
    alice.email = "alice@example.org"
    alice.save()
    opted_in("a-wst", waste=True)
    job = running_job("a-wst", "alice", 4711, score=12.0)
    now = timezone.now()

    first = notify_running_jobs(now=now)
    second = notify_running_jobs(now=now + timedelta(minutes=5))
    assert (first["sent"], second["sent"], second["rate_limited"]) == (1, 0, 1)
    mails = inbox.to("alice@example.org")
    assert len(mails) == 1 and len(inbox.messages) == 1
    assert "https://belvedere.example/jobs/alps/4711/" in mails[0]["body"]
    assert "alps/4711" in mails[0]["subject"] and "12 of 100" in mails[0]["subject"]
    assert "data loader" in mails[0]["body"]
    row = NotificationSent.objects.get(job=job)
    assert (row.reason, row.status, row.recipient) == ("wasteful", "sent", "alice@example.org")

    # Just inside the window: still none. Past it: the second mail.
    assert notify_running_jobs(now=now + timedelta(hours=23, minutes=59))["sent"] == 0
    assert notify_running_jobs(now=now + timedelta(hours=24, minutes=1))["sent"] == 1
    assert len(inbox.to("alice@example.org")) == 2 and NotificationSent.objects.filter(job=job, status="sent").count() == 2


def test_jobs_of_projects_that_did_not_opt_in_or_are_not_wasteful_get_none(smtp_settings, make_user, running_job, opted_in):
    inbox = smtp_settings
    for name in ("bob", "carol", "dave"):
        user = make_user(name)
        user.email = f"{name}@example.org"
        user.save()
    opted_in("a-off", waste=False, straggler=False)  # a row, both switches off
    running_job("a-off", "bob", 5001, score=5.0)
    running_job("a-never", "carol", 5002, score=5.0, idle_gpus=16)  # no row at all
    opted_in("a-on", waste=True)
    running_job("a-on", "dave", 5003, score=75.0, idle_gpus=2)  # saturated, 2 of 16 idle: under the 25 % share
    running_job("a-on", "dave", 5004, score=5.0, state="COMPLETED")  # wasteful but no longer running
    counts = notify_running_jobs()
    assert counts["sent"] == 0 and inbox.messages == []
    assert NotificationSent.objects.count() == 0


def test_an_idle_allocation_is_wasteful_even_with_a_fair_score(smtp_settings, make_user, running_job, opted_in):
    inbox = smtp_settings
    user = make_user("erin")
    user.email = "erin@example.org"
    user.save()
    opted_in("a-idle")
    running_job("a-idle", "erin", 6001, score=45.0, idle_gpus=8)
    assert notify_running_jobs()["sent"] == 1
    (mail,) = inbox.to("erin@example.org")
    assert "8 of 16 GPUs idle" in mail["subject"] and "scancel 6001" in mail["body"]


def test_a_straggler_is_mailed_once_it_persisted(smtp_settings, make_user, running_job, opted_in):
    inbox = smtp_settings
    user = make_user("frank")
    user.email = "frank@example.org"
    user.save()
    opted_in("a-str", waste=True, straggler=True)
    young = {"level": "gpu", "host": "nid001234", "gpu": 2, "rank": 6, "hosts": ["nid001234"], "duration_s": 600.0,
             "signal": "sm_clock", "reason": "SM clock 28 % below its peers", "cause": "power-limited"}
    job = running_job("a-str", "frank", 7001, score=70.0, stragglers=[young])  # not wasteful: only the straggler counts
    now = timezone.now()
    # Seen for 10 min by the detector, first found by this sweep: not yet.
    assert notify_running_jobs(now=now)["sent"] == 0
    assert StragglerSighting.objects.get(job=job).first_seen == now
    assert notify_running_jobs(now=now + timedelta(minutes=29))["sent"] == 0
    # Still there 31 min after the first sweep found it: mailed, once.
    assert notify_running_jobs(now=now + timedelta(minutes=31))["sent"] == 1
    assert notify_running_jobs(now=now + timedelta(minutes=40))["sent"] == 0
    (mail,) = inbox.to("frank@example.org")
    assert "GPU 2 of node nid001234 (rank 6)" in mail["subject"]
    assert "--exclude=nid001234" in mail["body"] and "https://belvedere.example/jobs/alps/7001/" in mail["body"]
    assert NotificationSent.objects.get(job=job).reason == "straggler"


def test_a_straggler_that_went_away_starts_again_and_a_long_measured_one_is_mailed_at_once(smtp_settings, make_user,
                                                                                           running_job, opted_in):
    from apps.saturation.models import JobSaturation

    inbox = smtp_settings
    user = make_user("gina")
    user.email = "gina@example.org"
    user.save()
    opted_in("a-gone", waste=False, straggler=True)
    finding = {"level": "node", "host": "nid002000", "gpu": None, "hosts": ["nid002000"], "duration_s": 300.0, "reason": "slow"}
    job = running_job("a-gone", "gina", 7101, score=70.0, stragglers=[finding])
    now = timezone.now()
    notify_running_jobs(now=now)
    JobSaturation.objects.filter(job=job).update(stragglers=[])  # the lag stopped
    notify_running_jobs(now=now + timedelta(minutes=20))
    assert not StragglerSighting.objects.filter(job=job).exists()
    JobSaturation.objects.filter(job=job).update(stragglers=[finding])  # back: counted from now, not from the first sighting
    assert notify_running_jobs(now=now + timedelta(minutes=40))["sent"] == 0
    assert inbox.messages == []
    # The detector measured 45 min of lag: persisted, whatever the sweeps saw.
    JobSaturation.objects.filter(job=job).update(stragglers=[{**finding, "duration_s": 2700.0}])
    assert notify_running_jobs(now=now + timedelta(minutes=41))["sent"] == 1
    assert "lagging for 45 min" in inbox.to("gina@example.org")[0]["body"]


def test_a_straggler_is_counted_only_while_the_project_watches_it(smtp_settings, make_user, running_job, opted_in):
    from apps.notifications.models import ProjectNotifications

    inbox = smtp_settings
    user = make_user("rosa")
    user.email = "rosa@example.org"
    user.save()
    opted_in("a-watch", waste=False, straggler=True)
    finding = {"level": "gpu", "host": "nid004000", "gpu": 1, "hosts": ["nid004000"], "duration_s": 300.0, "reason": "slow"}
    job = running_job("a-watch", "rosa", 9501, score=70.0, stragglers=[finding])
    now = timezone.now()
    notify_running_jobs(now=now)
    ProjectNotifications.objects.filter(project__slurm_account="a-watch").update(straggler=False)
    notify_running_jobs(now=now + timedelta(minutes=10))
    assert not StragglerSighting.objects.filter(job=job).exists()  # not watched: forgotten
    ProjectNotifications.objects.filter(project__slurm_account="a-watch").update(straggler=True)
    assert notify_running_jobs(now=now + timedelta(minutes=40))["sent"] == 0  # counted again from here
    assert notify_running_jobs(now=now + timedelta(minutes=71))["sent"] == 1
    assert len(inbox.to("rosa@example.org")) == 1


def test_a_user_without_an_address_is_skipped_and_logged_once(smtp_settings, make_user, running_job, opted_in, caplog):
    inbox = smtp_settings
    make_user("hank")  # no e-mail
    opted_in("a-noaddr")
    job = running_job("a-noaddr", "hank", 8001)
    running_job("a-noaddr", "nobody-here", 8002)  # no portal account at all
    with caplog.at_level("INFO", logger="apps.notifications.services"):
        counts = notify_running_jobs()
    assert counts == {"jobs": 2, "sent": 0, "skipped": 2, "failed": 0, "rate_limited": 0}
    assert inbox.messages == []
    assert NotificationSent.objects.get(job=job).detail == "the job's user has no e-mail address"
    assert "no portal account" in caplog.text
    assert notify_running_jobs()["rate_limited"] == 2  # not logged again every 5 minutes


def test_a_refused_mail_is_recorded_and_tried_again(settings, make_user, running_job, opted_in):
    from tests.notifications.conftest import free_port

    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 5  # nothing listens
    user = make_user("ivy")
    user.email = "ivy@example.org"
    user.save()
    opted_in("a-down")
    job = running_job("a-down", "ivy", 8101)
    assert notify_running_jobs()["failed"] == 1
    row = NotificationSent.objects.get(job=job)
    assert row.status == "failed" and "ConnectionRefused" in row.detail
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notify_running_jobs()["sent"] == 1  # a failed mail does not count for the rate limit


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_once_claim_one_mail(running_job):
    """Several threads (own database connections) claim the same job and reason at the same moment: one wins."""
    job = running_job("a-race", "jane", 9001)
    now = timezone.now()
    for attempt in range(3):
        barrier = threading.Barrier(4)
        won, errors = [], []

        def claim():
            try:
                barrier.wait(timeout=10)
                row = notification_claim(job, "wasteful", now=now + timedelta(days=2 * attempt), user_name="jane",
                                         recipient="jane@example.org", subject="s")
                if row is not None:
                    won.append(row.pk)
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=claim) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == [] and len(won) == 1, (attempt, won, errors)
    assert NotificationSent.objects.filter(job=job).count() == 3


@pytest.mark.django_db(transaction=True)
def test_two_sweeps_at_once_send_one_mail_through_smtp(smtp_settings, make_user, running_job, opted_in):
    """Two whole sweeps (as two workers would run them) at the same moment: the SMTP server receives one mail per
    job and reason, and the straggler sightings they both write do not collide."""
    inbox = smtp_settings
    user = make_user("quinn")
    user.email = "quinn@example.org"
    user.save()
    opted_in("a-two", waste=True, straggler=True)
    finding = {"level": "node", "host": "nid003000", "gpu": None, "hosts": ["nid003000"], "duration_s": 3600.0, "reason": "slow"}
    running_job("a-two", "quinn", 9401, score=10.0, stragglers=[finding])
    now = timezone.now()
    barrier = threading.Barrier(2)
    results, errors = [], []

    def sweep():
        try:
            barrier.wait(timeout=10)
            results.append(notify_running_jobs(now=now))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweep) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sum(result["sent"] for result in results) == 2 and sum(result["rate_limited"] for result in results) == 2
    subjects = sorted(mail["subject"] for mail in inbox.to("quinn@example.org"))
    assert len(subjects) == 2 and "wastes GPUs" in subjects[0] + subjects[1] and "slows it down" in subjects[0] + subjects[1]
    assert StragglerSighting.objects.count() == 1


def test_the_staff_digest_lists_the_inbox_once_per_period(smtp_settings, running_job, settings):
    """The digest rebuilds the triage inbox from its sources, then mails its open items, wasteful jobs by GPU-hours
    lost; muted items are left out; a second digest in the same period sends nothing."""
    from apps.triage.models import TriageItem
    from apps.triage.services import triage_sync

    inbox = smtp_settings
    settings.NOTIFY_STAFF_DIGEST_EMAILS = ["ops@example.org", "hpc@example.org"]
    settings.NOTIFY_STAFF_DIGEST_HOURS = 24.0
    running_job("a-any", "kim", 9101, score=45.0, idle_gpus=12)  # any project: staff see all
    running_job("a-any", "lee", 9102, score=8.0)
    running_job("a-any", "max", 9103, score=80.0)  # fine: not listed
    running_job("a-any", "ned", 9104, score=5.0)  # wasteful, but staff muted it
    now = timezone.now()
    triage_sync(now - timedelta(minutes=5))
    TriageItem.objects.filter(key__endswith="alps/9104").update(state="muted", muted_until=now + timedelta(days=3))
    outcome = staff_digest(now=now)
    assert outcome["status"] == "sent" and outcome["items"] == 2
    assert staff_digest(now=now + timedelta(seconds=1))["status"] == "already sent"
    (mail,) = inbox.messages
    assert sorted(mail["to"]) == ["hpc@example.org", "ops@example.org"]
    assert mail["subject"] == "[Belvedere] triage: 2 items need a person"
    body = mail["body"]
    # By GPU-hours lost, most first (issue 35): 12 idle GPUs of 16 lose 36 (whole) and the 4 busy ones (busy 0.9) 1.2;
    # S 8 on 16 GPUs busy 0.9 for 3 h loses only their time without work, 48 × 0.1 = 4.8 (the rest is headroom).
    assert body.index("alps/9101") < body.index("alps/9102")
    assert "37.2 GPU-hours lost [kim (a-any)]" in body and "4.8 GPU-hours lost [lee (a-any)]" in body
    assert "alps/9103" not in body and "alps/9104" not in body
    assert "https://belvedere.example/staff/triage/" in body and "https://belvedere.example/jobs/alps/9102/" in body
    assert f"Rebuilt from its sources at {now:%Y-%m-%d %H:%M} UTC" in body
    assert StaffDigest.objects.get().status == "sent"


def test_no_digest_without_addresses(settings):
    settings.NOTIFY_STAFF_DIGEST_EMAILS = []
    assert staff_digest()["status"] == "off" and not StaffDigest.objects.exists()


def test_a_job_without_known_gpus_is_never_called_wasteful(smtp_settings, make_user, running_job, opted_in):
    user = make_user("nora")
    user.email = "nora@example.org"
    user.save()
    opted_in("a-cpu")
    running_job("a-cpu", "nora", 9201, score=0.0, gpus=0)  # a CPU job: no GPU to waste, its score means nothing
    assert notify_running_jobs()["sent"] == 0 and smtp_settings.messages == []


def test_the_demo_part_opts_the_demo_researchers_projects_in(make_user, running_job):
    import random

    from apps.core.demo import DemoContext
    from apps.notifications.demo import build
    from apps.notifications.models import ProjectNotifications

    make_user("demo", accounts=["a-llm01", "a-bio06"])
    make_user("other", accounts=["a-astro10"])
    running_job("a-llm01", "demo", 9301, score=10.0)
    context = DemoContext(seed=1, rng=random.Random(1), out=None, shared={"memberships": {"demo": {"a-llm01", "a-bio06"},
                                                                                             "other": {"a-astro10"}}})
    summary = build(context)
    assert sorted(ProjectNotifications.objects.filter(waste=True, straggler=True).values_list("project__slurm_account", flat=True)) \
        == ["a-bio06", "a-llm01"]
    assert summary == {"projects opted in": 2, "running jobs watched": 1, "wasteful now": 1, "with stragglers": 0}


def test_no_mail_while_a_job_warms_up(smtp_settings, make_user, running_job, opted_in):
    """Issue 35, item 2: a job was mailed "wastes GPUs: saturation 13 of 100" 3.5 minutes after it started (steady score
    67). Until its scoring sees the steady state start, no mail; its steady numbers decide once it does."""
    from apps.saturation.models import JobSaturation

    inbox = smtp_settings
    user = make_user("fay")
    user.email = "fay@example.org"
    user.save()
    opted_in("a-warm")
    job = running_job("a-warm", "fay", 7001, score=13.0, busy=0.45, steady_found=False)
    job.start_time = timezone.now() - timedelta(minutes=3, seconds=30)
    job.save(update_fields=["start_time"])
    assert notify_running_jobs()["sent"] == 0 and inbox.messages == []
    record = JobSaturation.objects.get(job=job)
    steady_rows = [{**row, "busy": 0.99, "score": 67.0} for row in record.per_gpu]
    JobSaturation.objects.filter(job=job).update(steady_found=True, score=67.0, per_gpu=steady_rows)  # warmed up: healthy
    assert notify_running_jobs()["sent"] == 0 and inbox.messages == []
    JobSaturation.objects.filter(job=job).update(score=13.0)  # the same low score in the steady state is mailed
    assert notify_running_jobs()["sent"] == 1
