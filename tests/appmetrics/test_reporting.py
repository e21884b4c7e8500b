"""The PDF job report through the worker's code path: the demo's Megatron job built by the ``appmetrics.build_report``
task, every page converted to PNG (test-artifacts/screenshots/report-page-<n>.png, looked at) and read back; a job
without application metrics; the API (ask, status, one build at a time, the file, 404 saying why)."""
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from django.urls import path

from apps.appmetrics.api import report as report_views
from apps.appmetrics.models import JobReport
from apps.appmetrics.tasks import build_report_task
from apps.jobs.models import Cluster, Job
from tests.demo_snapshot import load_demo

SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

# The routes as apps/appmetrics/api/urls.py mounts them at /api/v1/ (this module is the tests' URL map).
urlpatterns = [
    path("api/v1/jobs/<slug:cluster>/<int:job_id>/report/", report_views.ReportView.as_view(), name="report"),
    path("api/v1/jobs/<slug:cluster>/<int:job_id>/report.pdf", report_views.ReportFileView.as_view(), name="report-pdf"),
]


def _pages_text(file: Path) -> list[str]:
    pdf = pdfium.PdfDocument(str(file))
    return [" ".join(page.get_textpage().get_text_range().split()) for page in pdf]


def _dark_share(image) -> float:
    grey = image.convert("L")
    return sum(count for value, count in enumerate(grey.histogram()) if value < 200) / (grey.width * grey.height)


@pytest.mark.engine_independent
def test_the_demo_megatron_jobs_report_is_built_by_the_task_and_reads_back(transactional_db, store, settings):
    from apps.jobs.demo import MEGATRON_NAME

    load_demo()
    job = Job.objects.select_related("cluster").get(name=MEGATRON_NAME)
    report = JobReport.objects.create(job=job)
    outcome = build_report_task.apply(args=[report.pk]).get()
    report.refresh_from_db()
    assert outcome["status"] == "ready", (outcome, report.message)
    assert (report.status, report.progress, report.pages) == ("ready", 100, outcome["pages"])
    file = Path(settings.DATA_DIR) / report.path
    assert file.is_file() and file.read_bytes()[:5] == b"%PDF-"

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for old in SCREENSHOTS.glob("report-page-*.png"):
        old.unlink()
    pdf = pdfium.PdfDocument(str(file))
    assert len(pdf) == report.pages >= 4
    for number, page in enumerate(pdf, 1):
        image = page.render(scale=1.4).to_pil()
        image.save(SCREENSHOTS / f"report-page-{number}.png")
        assert _dark_share(image) > 0.005, f"page {number} looks blank"
    texts = _pages_text(file)
    job_id = f"{job.cluster.name}/{job.job_id}"
    assert job_id in texts[0] and "MFU" in texts[0] and "GPU saturation" in texts[0]
    assert all(f"job {job_id}" in text and f"of {len(texts)}" in text for text in texts)
    assert "Throughput and GPU activity over time" in " ".join(texts) and "Per-GPU saturation" in " ".join(texts)


@pytest.fixture
def bare_job(db, store):
    cluster = Cluster.objects.create(name="alps")
    t0 = datetime(2026, 2, 1, 8, tzinfo=timezone.utc)
    return Job.objects.create(cluster=cluster, job_id=77, name="no-metrics", user_name="alice", account="a-llm01",
                              state="COMPLETED", gpus=8, node_count=2, node_list=["nid000001", "nid000002"],
                              start_time=t0, end_time=t0 + timedelta(hours=2))


def test_a_job_without_app_metrics_gets_a_report_that_says_what_is_missing(bare_job, settings):
    report = JobReport.objects.create(job=bare_job)
    assert build_report_task.apply(args=[report.pk]).get()["status"] == "ready"
    report.refresh_from_db()
    text = " ".join(_pages_text(Path(settings.DATA_DIR) / report.path))
    assert "alps/77" in text and "MFU" in text
    assert "the job logged no application metrics" in text
    assert "has not been scored yet" in text
    assert "no model config" in text
    assert "No throughput" in text



def test_the_api_queues_one_build_reports_progress_and_serves_the_file(bare_job, api_client, make_user,
                                                                        django_capture_on_commit_callbacks):
    api_client.force_authenticate(make_user("alice", accounts=["a-llm01"]))
    url = "/api/v1/jobs/alps/77/report/"
    assert api_client.get(url).json()["status"] == "none"
    missing = api_client.get("/api/v1/jobs/alps/77/report.pdf", HTTP_ACCEPT="application/pdf")
    assert missing.status_code == 404 and "no report was asked for" in missing.json()["detail"]

    with django_capture_on_commit_callbacks(execute=False) as queued:  # the task is queued once the row commits
        first = api_client.post(url)
        second = api_client.post(url)  # while the first waits: not queued again
    assert (first.status_code, first.json()["queued"], first.json()["status"]) == (202, True, "waiting")
    assert (second.status_code, second.json()["queued"]) == (202, False)
    assert len(queued) == 1
    waiting = api_client.get("/api/v1/jobs/alps/77/report.pdf")
    assert waiting.status_code == 404 and "waiting for a worker" in waiting.json()["detail"]

    report = JobReport.objects.get(job=bare_job)
    build_report_task.apply(args=[report.pk])  # what the worker does with the queued message
    status = api_client.get(url).json()
    assert (status["status"], status["progress"], status["pdf"]) == ("ready", 100, "/api/v1/jobs/alps/77/report.pdf")
    answer = api_client.get("/api/v1/jobs/alps/77/report.pdf", HTTP_ACCEPT="application/pdf")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/pdf"
    assert b"".join(answer.streaming_content)[:5] == b"%PDF-"

    # Ready: asking again queues a new build.
    with django_capture_on_commit_callbacks(execute=False) as again:
        assert api_client.post(url).json()["queued"] is True
    assert len(again) == 1



def test_others_are_told_the_job_does_not_exist(bare_job, api_client, make_user):
    api_client.force_authenticate(make_user("mallory", accounts=["a-other"]))
    assert api_client.post("/api/v1/jobs/alps/77/report/").status_code == 404
    assert api_client.get("/api/v1/jobs/alps/77/report.pdf").status_code == 404
    assert not JobReport.objects.exists()
