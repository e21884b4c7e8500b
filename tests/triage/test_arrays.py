"""Job arrays in the triage inbox (issue 35, item 7): 31 of 39 items were tasks of one job array, each its own row.
An array's tasks make one row per kind, with the count of tasks and the worst of them; the tasks are listed inside."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.triage.inbox import Finding, group_arrays
from apps.triage.models import TriageItem
from apps.triage.services import triage_sync


def test_group_arrays_makes_one_finding_per_array_and_kind():
    def task(n, lost, severity="warning"):
        return Finding(key=f"wasteful_job:alps/{500 + n}", kind="wasteful_job", title=f"alps/{500 + n} sweep wastes GPUs",
                       owner="bob", severity=severity, gpu_hours_lost=lost, url=f"/jobs/alps/{500 + n}/",
                       data={"job": f"alps/{500 + n}", "task": f"alps/500_{n}", "job_name": "sweep", "gpus": 4, "idle_gpus": 4,
                             "hours": 1.0 + n})
    alone = Finding(key="wasteful_job:alps/9", kind="wasteful_job", title="t", owner="eve", gpu_hours_lost=50.0)
    tasks = [task(0, 2.0), task(1, 8.0), task(2, 4.0)]
    out = group_arrays([*tasks, alone], {f.key: "alps/500" for f in tasks})
    assert [f.key for f in out] == ["wasteful_job:alps/9", "wasteful_job:alps/500_[]"]
    array = out[1]
    assert array.gpu_hours_lost == 14.0  # 2 + 8 + 4: the whole array's loss ranks it
    assert array.data["task_count"] == 3 and array.data["worst"] == "alps/500_1"
    assert [row["job"] for row in array.data["tasks"]] == ["alps/500_1", "alps/500_2", "alps/500_0"]
    assert array.title == "Job array alps/500 sweep: 3 tasks waste GPUs (worst alps/500_1)"
    assert array.url == "/jobs/alps/501/"
    assert (array.data["gpus"], array.data["idle_gpus"], array.data["hours"]) == (12, 12, 3.0)
    # a critical task makes the array critical, whatever it lost
    worst = group_arrays([task(0, 9.0), task(1, 1.0, "critical")], {"wasteful_job:alps/500": "a", "wasteful_job:alps/501": "a"})
    assert worst[0].severity == "critical" and worst[0].data["worst"] == "alps/500_1"


@pytest.mark.django_db
def test_an_arrays_tasks_make_one_inbox_row_with_its_tasks_inside(sources, client):
    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation

    start = timezone.now() - timedelta(hours=2)
    for task in range(31):  # every task idle: each wasteful on its own
        job = Job.objects.create(cluster=sources["idle"].cluster, job_id=7000 + task, array_job_id=7000, array_task_id=task,
                                 name="sweep", user_name="alice", account="a-llm01", state="RUNNING", submit_time=start,
                                 start_time=start, gpus=4, node_list=[f"nid007{task:03d}"])
        JobSaturation.objects.create(job=job, status="ready", score=1.0, idle_gpus=4 - (task == 17), computed=timezone.now(),
                                     per_gpu=[{"host": f"nid007{task:03d}", "gpu": g, "busy": 0.0 if g < 4 - (task == 17) else 0.9,
                                               "score": 0.0} for g in range(4)])
    triage_sync()
    rows = TriageItem.objects.filter(kind="wasteful_job")
    assert sorted(item.key for item in rows) == ["wasteful_job:alps/1001", "wasteful_job:alps/1002", "wasteful_job:alps/7000_[]"]
    array = rows.get(key="wasteful_job:alps/7000_[]")
    assert array.data["task_count"] == 31 and len(array.data["tasks"]) == 31
    assert array.gpu_hours_lost == pytest.approx(sum(task["gpu_hours_lost"] for task in array.data["tasks"]))
    assert array.data["worst"] != "alps/7000_17"  # the one with a working GPU loses least
    assert array.data["tasks"][-1]["job"] == "alps/7000_17"
    assert "31 tasks waste GPUs" in array.title
    client.force_login(sources["staff"])
    page = client.get("/staff/triage/").content.decode()
    assert page.count("31 tasks of job array alps/7000") == 1
    assert page.count('data-job="alps/7000_') == 31
    assert "/jobs/alps/7017/" in page
