"""Celery tasks of the catalog app: run a product's quality checks; find the products whose checks are due."""
from celery import shared_task

from apps.core.models import TaskRun
from apps.core.tasks import IDEMPOTENT


@shared_task(name="catalog.run_checks", **IDEMPOTENT)
def run_checks_task(product_pk: int) -> dict:
    """Freshness, coverage, gaps and schema drift of one product (idempotent: each run is one more history point)."""
    from .models import DataProduct
    from .services import run_checks

    product = DataProduct.objects.get(pk=product_pk)
    run = TaskRun.objects.create(name="catalog.run_checks", subject=product.name)
    run.start("freshness, coverage, gaps, schema drift", total=1)
    try:
        runs = run_checks(product)
    except Exception as exc:
        run.finish(error=f"{type(exc).__name__}: {exc}"[:400])
        raise
    run.report(1, f"state {product.state}")
    run.finish()
    return {"product": product.name, "state": product.state, "checks": {r.kind: r.status for r in runs}}


@shared_task(name="catalog.schedule_checks", **IDEMPOTENT)
def schedule_checks_task() -> list[str]:
    """Beat: queue the checks of every product whose next run is due."""
    from django.utils import timezone

    from .services import due_products

    due = list(due_products().values_list("pk", "name"))
    for pk, _ in due:
        run_checks_task.delay(pk)
    # Push the next run ahead now, so a slow worker does not get the same product queued twice.
    from datetime import timedelta

    from .models import DataProduct

    DataProduct.objects.filter(pk__in=[pk for pk, _ in due]).update(next_run=timezone.now() + timedelta(minutes=5))
    return [name for _, name in due]
