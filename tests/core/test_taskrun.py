import pytest

from apps.core.models import TaskRun, TaskRunStatusChoices


@pytest.mark.django_db
def test_task_run_records_progress_and_outcome():
    run = TaskRun.objects.create(name="jobs.sync_cluster", subject="cluster alps")
    assert run.fraction is None
    run.start("listing jobs", total=200)
    run.report(50, "50 of 200 jobs")
    stored = TaskRun.objects.get(pk=run.pk)
    assert stored.status == TaskRunStatusChoices.STATUS_RUNNING
    assert stored.fraction == pytest.approx(0.25)
    assert "50 of 200 jobs" in stored.log
    run.finish()
    stored.refresh_from_db()
    assert stored.status == TaskRunStatusChoices.STATUS_SUCCEEDED
    assert stored.done == 200 and stored.finished is not None


@pytest.mark.django_db
def test_task_run_failure_keeps_the_reason():
    run = TaskRun.objects.create(name="jobs.sync_cluster")
    run.start()
    run.finish(error="squeue: command not found")
    run.refresh_from_db()
    assert run.status == TaskRunStatusChoices.STATUS_FAILED
    assert run.message == "squeue: command not found"
    assert "failed: squeue: command not found" in run.log
