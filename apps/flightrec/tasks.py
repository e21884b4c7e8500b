"""Celery tasks of the flightrec app.

``flightrec.analyse_job`` analyses every stored dump of one job (``services.job_flight_analyse``), reporting its
progress per dump on a TaskRun. Idempotent: it reads what is stored now and replaces the analysis; a message
delivered again after it completed does nothing (``task_run_begin``); dumps that arrive meanwhile queue another.
"""
from celery import shared_task

from apps.core.tasks import IDEMPOTENT, task_run_begin


@shared_task(name="flightrec.analyse_job", bind=True, **IDEMPOTENT)
def analyse_job(self, job_pk: int) -> dict:
    from apps.jobs.models import Job

    from .services import job_flight_analyse

    job = Job.objects.select_related("cluster").filter(pk=job_pk).first()
    if job is None:
        return {"job": job_pk, "status": "gone"}
    run = task_run_begin(self, "flightrec.analyse_job", f"job {job.cluster.name}/{job.job_id}",
                         "analysing Flight Recorder dumps")
    if run is None:
        return {"job": job_pk, "status": "skipped"}
    every = 64

    def progress(done: int, total: int) -> None:
        if done == total or done % every == 0:
            run.report(done, f"{done:,} of {total:,} dumps read", total=total)

    try:
        analysis = job_flight_analyse(job, progress)
    except Exception as exc:  # recorded on the run and the analysis; the next dump queues it again
        from .choices import FlightAnalysisStatusChoices
        from .models import FlightAnalysis

        FlightAnalysis.objects.filter(job=job).update(status=FlightAnalysisStatusChoices.FAILED,
                                                       message=f"{type(exc).__name__}: {exc}"[:500])
        run.finish(error=f"{type(exc).__name__}: {exc}"[:400])
        return {"job": job_pk, "status": "failed"}
    run.finish()
    return {"job": job_pk, "status": analysis.status, "dumps": analysis.dumps}
