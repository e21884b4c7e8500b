"""Celery tasks of the appmetrics app.

``appmetrics.build_report`` builds one job's PDF report (``reporting.report_build``). Idempotent: it draws what the
database and the telemetry store hold now and replaces the file in one rename, so it is acknowledged late and handed
back when its worker dies mid-run; a message delivered again after it completed does nothing (``task_run_begin``).
"""
from celery import shared_task

from apps.core.tasks import IDEMPOTENT, hold_for_tests, task_run_begin


@shared_task(name="appmetrics.build_report", bind=True, **IDEMPOTENT)
def build_report_task(self, report_pk: int) -> dict:
    """Build the PDF report of ``JobReport`` ``report_pk``; its status, progress and message say how it goes."""
    from .choices import JobReportStatusChoices as Status
    from .models import JobReport
    from .reporting import report_build

    report = JobReport.objects.select_related("job", "job__cluster").filter(pk=report_pk).first()
    if report is None:  # the job was deleted meanwhile
        return {"report": report_pk, "status": "gone"}
    run = task_run_begin(self, "appmetrics.build_report", f"job {report.job.cluster.name}/{report.job.job_id}",
                         "building the PDF report", total=100)
    if run is None:
        if report.status in (Status.WAITING, Status.BUILDING):
            JobReport.objects.filter(pk=report_pk).update(status=Status.FAILED,
                                                          message="its worker was killed each time it built this report")
        return {"report": report_pk, "status": "skipped"}
    hold_for_tests("appmetrics.build_report")
    try:
        report = report_build(report_pk)
    except Exception as exc:  # recorded on the report (failed, with the reason): asking again builds it anew
        run.finish(error=f"{type(exc).__name__}: {exc}"[:400])
        return {"report": report_pk, "status": Status.FAILED, "message": str(exc)[:400]}
    run.report(100, f"{report.pages} pages")
    run.finish()
    return {"report": report_pk, "status": report.status, "pages": report.pages}
