"""/healthz and /readyz: liveness is cheap; readiness proves a worker answered through the broker."""
import os

import pytest

from apps.core.tasks import ping_task


def test_healthz_is_public_json(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_fails_when_the_ping_runs_eagerly_in_the_web_process(client):
    ping_task.app.conf.task_always_eager = True
    try:
        response = client.get("/readyz")
    finally:
        ping_task.app.conf.task_always_eager = False
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "fail"
    assert body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["broker"]["status"] == "fail"
    assert "eager" in body["checks"]["broker"]["message"]


@pytest.mark.django_db
def test_head_asks_what_get_asks(client, settings):
    """Issue 33, finding 6: HEAD /healthz and /readyz answered 405; load balancers often probe with HEAD. The status is
    GET's (readyz runs its checks: here no worker consumes the ping queue, a 503), without a body."""
    settings.READYZ_PING_QUEUE = "nobody-consumes-this-queue"
    settings.READYZ_BROKER_TIMEOUT = 0.2
    settings.READYZ_CONTROL_PING_TIMEOUT = 0  # no broadcast: a session worker may live beside this test
    for path, status in (("/healthz", 200), ("/readyz", 503)):
        answer = client.head(path)
        assert (answer.status_code, answer.content) == (status, b""), path
        assert answer["Content-Type"] == "application/json" and answer["Cache-Control"].startswith("max-age=0")
    assert client.post("/healthz").status_code == 405


@pytest.mark.django_db
def test_readyz_says_no_worker_answered_when_nobody_consumes_the_queue(client, settings):
    settings.READYZ_PING_QUEUE = "nobody-consumes-this-queue"
    settings.READYZ_BROKER_TIMEOUT = 0.5
    settings.READYZ_CONTROL_PING_TIMEOUT = 0  # no broadcast: a session worker may live beside this test
    response = client.get("/readyz")
    assert response.status_code == 503
    broker = response.json()["checks"]["broker"]
    assert broker["status"] == "fail"
    assert "no worker answered within 0.5 s" in broker["message"]
    # The broker URL may hold credentials: only its scheme is shown.
    assert broker["broker"] in {"filesystem", "redis"}


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_readyz_round_trip_is_answered_by_the_worker_process(client, celery_worker_process):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    broker = body["checks"]["broker"]
    assert broker["status"] == "ok"
    # --pool=solo runs tasks in the worker's main process: the pid must be that subprocess's.
    assert broker["worker_pid"] == celery_worker_process.pid
    assert broker["worker_pid"] != os.getpid()
    assert body["checks"]["database"]["status"] == "ok"
    assert "core.ping" in celery_worker_process.log_text()


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_beat_heartbeat_travels_beat_broker_worker_database(client, celery_worker_process, start_service, tmp_path):
    import time

    from apps.core.models import Heartbeat

    assert not Heartbeat.objects.filter(name="beat").exists()
    beat = start_service(
        "celery-beat",
        ["-m", "celery", "-A", "portal", "beat", "--loglevel=INFO", f"--pidfile={tmp_path / 'beat.pid'}"],
        ready_marker="beat: Starting",
        BELVEDERE_BEAT_HEARTBEAT_SECONDS="1",
    )
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and not Heartbeat.objects.filter(name="beat").exists():
        time.sleep(0.5)
    heartbeat = Heartbeat.objects.filter(name="beat").first()
    assert heartbeat is not None, beat.log_text()[-2000:]
    assert heartbeat.details["worker_pid"] == celery_worker_process.pid
    beat_check = client.get("/readyz").json()["checks"]["beat"]
    assert beat_check["status"] == "ok"


@pytest.mark.django_db
def test_readyz_without_a_worker_leaves_one_expiring_ping_queued_not_one_per_call(client, settings):
    """Issue 16 item 4: each /readyz call while no worker ran left a ``core.ping`` queued for ever."""
    import uuid

    from kombu import Connection

    settings.READYZ_PING_QUEUE = f"nobody-consumes-{uuid.uuid4().hex[:8]}"
    settings.READYZ_BROKER_TIMEOUT = 0.2
    settings.READYZ_CONTROL_PING_TIMEOUT = 0  # no broadcast: a session worker may live beside this test
    for _ in range(4):
        assert client.get("/readyz").status_code == 503
    with Connection(settings.CELERY_BROKER_URL, transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as connection:
        channel = connection.default_channel
        messages = []
        while (message := channel.basic_get(settings.READYZ_PING_QUEUE, no_ack=True)) is not None:
            messages.append(message)
    assert len(messages) == 1
    # A worker that comes back later drops it instead of answering a caller long gone.
    assert messages[0].headers["task"] == "core.ping" and messages[0].headers["expires"]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_readyz_tells_a_busy_worker_from_none(client, settings, celery_worker_process):
    """The ping task waits where the worker takes nothing (as behind a full pool): the worker's main
    process still answers a broadcast ping, so /readyz warns and stays ready instead of saying 503."""
    settings.READYZ_PING_QUEUE = "nobody-consumes-this-queue"
    settings.READYZ_BROKER_TIMEOUT = 0.5
    settings.READYZ_CONTROL_PING_TIMEOUT = 3.0
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    broker = body["checks"]["broker"]
    assert broker["status"] == "warn" and broker["critical"] is False, broker
    assert broker["worker_hostnames"] and all(name.startswith("test-") for name in broker["worker_hostnames"]), broker
    assert "busy" in broker["message"]
