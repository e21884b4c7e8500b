"""Celery tasks of the vetting app: evaluate the rules when results arrive, and on a schedule."""
from celery import shared_task

from apps.core.models import TaskRun
from apps.core.tasks import IDEMPOTENT


@shared_task(name="vetting.evaluate_run", bind=True, max_retries=3, default_retry_delay=30, **IDEMPOTENT)
def evaluate_run_task(self, run_pk: int) -> dict:
    """The rules over the nodes of one stored run (and their switches). Idempotent."""
    from .models import VettingRun
    from .services import rules_evaluate

    run = VettingRun.objects.filter(pk=run_pk).first()
    if run is None:
        return {"run": run_pk, "status": "gone"}
    hosts = list(run.results.values_list("host", flat=True).distinct())
    task = TaskRun.objects.create(name="vetting.evaluate_run", subject=f"vetting run {run_pk} ({len(hosts)} nodes)")
    task.start("evaluating the rules", total=1)
    try:
        outcome = rules_evaluate(hosts=hosts)
    except Exception as exc:
        task.finish(error=str(exc)[:400])
        raise self.retry(exc=exc)
    task.report(1, f"{outcome['findings']} findings, {outcome['created']} new recommendations")
    task.finish()
    return {"run": run_pk, **outcome}


@shared_task(name="vetting.evaluate_rules", **IDEMPOTENT)
def evaluate_rules_task() -> dict:
    """Every enabled rule over every node, then the GPU-health counters of the last hour (beat, every
    VETTING_RULES_SECONDS): windows move with time."""
    from .services import rules_evaluate

    from .services import gpu_health_evaluate, telemetry_findings_evaluate

    task = TaskRun.objects.create(name="vetting.evaluate_rules", subject="all nodes")
    task.start("evaluating the rules, the GPU-health counters and the telemetry's hardware faults", total=3)
    try:
        outcome = rules_evaluate()
        task.report(1, f"{outcome['findings']} findings, {outcome['created']} new recommendations")
        health = gpu_health_evaluate()  # idempotent: only raises states, never twice for the same evidence
        task.report(2, f"GPU health: {health['raised']} node(s) raised")
        faults = telemetry_findings_evaluate()  # the same: NICs retrying, GPUs hot or held down, in running jobs
    except Exception as exc:
        task.finish(error=str(exc)[:400])
        raise
    task.report(3, f"{outcome['findings']} findings, {outcome['created']} new recommendations; "
                   f"GPU health: {health['raised']} node(s) raised; telemetry faults: {faults['raised']} node(s) raised")
    task.finish()
    return {**outcome, "gpu_health": health, "telemetry_faults": faults}
