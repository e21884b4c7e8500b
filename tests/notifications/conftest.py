"""A real SMTP server for the notifications tests (aiosmtpd on a free local port), and running jobs to mail about."""
import socket
import threading
from datetime import timedelta
from email import message_from_bytes
from email.policy import default as default_policy

import pytest
from django.utils import timezone


class Inbox:
    """What the SMTP server received: one entry per message, with its envelope and parsed mail."""

    def __init__(self):
        self.messages = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        mail = message_from_bytes(envelope.original_content or envelope.content, policy=default_policy)
        with self._lock:
            self.messages.append({"from": envelope.mail_from, "to": list(envelope.rcpt_tos), "subject": str(mail["subject"]),
                                  "body": mail.get_body(preferencelist=("plain",)).get_content()})
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[dict]:
        with self._lock:
            return [message for message in self.messages if address in message["to"]]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def smtp_server():
    from aiosmtpd.controller import Controller

    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    inbox.host, inbox.port = controller.hostname, controller.port
    yield inbox
    controller.stop()


@pytest.fixture
def smtp_settings(settings, smtp_server):
    """Django sends through the real SMTP backend to the test's server."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = smtp_server.host, smtp_server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_TIMEOUT = 10
    settings.SITE_URL = "https://belvedere.example"
    settings.NOTIFY_RATE_LIMIT_HOURS = 24.0
    settings.NOTIFY_STRAGGLER_MINUTES = 30
    settings.WASTE_SCORE_BELOW, settings.WASTE_IDLE_SHARE = 30.0, 0.25
    return smtp_server


@pytest.fixture
def running_job():
    """``running_job(account, user_name, job_id, score=..., idle_gpus=..., stragglers=...)``: a running 16-GPU job
    started 3 h ago with a ready saturation record."""
    from apps.jobs.models import Cluster, Job
    from apps.saturation.models import JobSaturation

    def make(account: str, user_name: str, job_id: int, *, score=12.0, idle_gpus=0, stragglers=(), gpus=16, state="RUNNING",
             cluster="alps", busy=0.9, steady_found=True):
        now = timezone.now()
        job = Job.objects.create(cluster=Cluster.objects.get_or_create(name=cluster)[0], job_id=job_id, name=f"train-{job_id}",
                                 user_name=user_name, account=account, state=state, gpus=gpus,
                                 submit_time=now - timedelta(hours=3, minutes=5), start_time=now - timedelta(hours=3),
                                 node_list=[f"nid{job_id % 1000:03d}{n:03d}" for n in range(gpus // 4)])
        hosts = job.node_list
        per_gpu = [{"host": hosts[i // 4] if hosts else "", "gpu": i % 4, "busy": 0.0 if i < idle_gpus else busy,
                    "score": 0.0 if i < idle_gpus else score} for i in range(gpus)]  # busy: the working GPUs' busy share
        JobSaturation.objects.create(job=job, status="ready", computed=now, score=score, idle_gpus=idle_gpus,
                                     limiter="pcie", stragglers=list(stragglers), per_gpu=per_gpu, steady_found=steady_found,
                                     steady_start=job.start_time, scored_until=now)
        return job

    return make


@pytest.fixture
def opted_in():
    """``opted_in(account, waste=True, straggler=False)``: the project, opted in."""
    from apps.accounts.models import Project
    from apps.notifications.models import ProjectNotifications

    def make(account: str, *, waste=True, straggler=False):
        project, _ = Project.objects.get_or_create(slurm_account=account, defaults={"title": f"Project {account}"})
        ProjectNotifications.objects.update_or_create(project=project, defaults={"waste": waste, "straggler": straggler})
        return project

    return make
