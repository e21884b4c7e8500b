"""The catalogue's tasks: one product's checks with progress the UI shows, and beat's scheduler handing due
products to a real worker process."""
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.catalog.models import CheckRun, DataProduct
from apps.catalog.services import load_catalog
from apps.catalog.tasks import run_checks_task, schedule_checks_task
from apps.core.models import TaskRun


def test_a_products_checks_as_a_task(db):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    load_catalog()
    product = DataProduct.objects.get(name="topology")
    result = run_checks_task.apply(args=[product.pk]).get()
    assert result == {"product": "topology", "state": "fresh",
                      "checks": {"freshness": "pass", "coverage": "pass", "gaps": "skipped", "drift": "pass"}}
    run = TaskRun.objects.get(name="catalog.run_checks")
    assert run.subject == "topology" and run.status == "succeeded"
    product.refresh_from_db()
    assert product.next_run > timezone.now() + timedelta(minutes=50)  # every 1 h


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_beat_hands_due_products_to_the_worker(celery_worker_process):
    call_command("import_topology", "--preset", "alps", stdout=open("/dev/null", "w"))
    load_catalog()
    DataProduct.objects.update(next_run=timezone.now() + timedelta(hours=1))
    DataProduct.objects.filter(name__in=["topology", "slurm-jobs"]).update(next_run=timezone.now() - timedelta(seconds=1))
    assert sorted(schedule_checks_task.apply().get()) == ["slurm-jobs", "topology"]
    assert schedule_checks_task.apply().get() == []  # pushed ahead: not queued twice
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and CheckRun.objects.values("product").distinct().count() < 2:
        time.sleep(0.5)
    checked = set(CheckRun.objects.values_list("product__name", flat=True))
    assert checked == {"topology", "slurm-jobs"}, celery_worker_process.log_text()[-2000:]
    assert "catalog.run_checks" in celery_worker_process.log_text()
