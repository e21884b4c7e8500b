"""triage_sync over one of each source, its idempotence and state moves, and the staff's state changes."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.saturation.waste import gpu_hours_lost
from apps.triage.models import TriageItem
from apps.triage.services import TriageError, triage_acknowledge, triage_mute, triage_reopen, triage_resolve, triage_sync


def keys(state=None):
    items = TriageItem.objects.all() if state is None else TriageItem.objects.filter(state=state)
    return [item.key for item in items]  # in the model's ranked order


def test_sync_finds_every_kind_and_ranks_wasteful_jobs_by_gpu_hours_lost(sources):
    counts = triage_sync()
    assert counts["created"] == counts["found"] == 7
    ranked = keys()
    assert ranked[:2] == ["wasteful_job:alps/1001", "wasteful_job:alps/1002"]
    assert ranked[2] == "failing_node:nid000777"  # critical before the warnings
    assert set(ranked[3:]) == {"straggler:alps/1003", "bad_switch:5.0", f"namespace_request:{sources['request'].pk}",
                               "catalog_incident:slurm-jobs/freshness"}
    idle = TriageItem.objects.get(key="wasteful_job:alps/1001")
    # Hand-computed: 6 idle GPUs x 10 h whole, 2 busy GPUs x 10 h x (1 - 0.8).
    assert idle.gpu_hours_lost == pytest.approx(64.0, abs=0.05)
    assert idle.owner == "alice (a-llm01)" and idle.job == sources["idle"] and idle.url == "/jobs/alps/1001/"
    assert TriageItem.objects.get(key="wasteful_job:alps/1002").gpu_hours_lost == pytest.approx(0.4, abs=0.01)
    assert "megatron" not in " ".join(keys()[:2])  # saturated: not wasteful, only its straggler
    straggler = TriageItem.objects.get(key="straggler:alps/1003")
    assert "SM clock 20 % below" in straggler.detail
    assert TriageItem.objects.get(kind="catalog_incident").owner == "hpc-ops (ops@example.org)"
    assert TriageItem.objects.get(kind="namespace_request").owner == "alice (a-llm01)"
    node = TriageItem.objects.get(kind="failing_node")
    assert node.severity == "critical" and node.data["drain"] is True


def test_sync_uses_the_shared_waste_rule_and_the_settings(sources, settings):
    settings.WASTE_SCORE_BELOW = 5.0  # eval-small (S = 10, no idle GPU) is no longer wasteful
    triage_sync()
    assert [k for k in keys() if k.startswith("wasteful_job")] == ["wasteful_job:alps/1001"]
    settings.WASTE_IDLE_SHARE = 0.9  # 6 of 8 idle is under 90 %; its score 20 is over 5
    triage_sync()
    item = TriageItem.objects.get(key="wasteful_job:alps/1001")
    assert item.state == "resolved" and item.note == "cleared at source"
    waste = gpu_hours_lost(10.0, 8, per_gpu=sources["idle"].saturation.per_gpu)
    assert waste.lost == pytest.approx(64.0)
    assert item.gpu_hours_lost == pytest.approx(waste.lost, abs=0.05)  # the last value it had at source


def test_sync_is_idempotent_and_keeps_what_people_decided(sources):
    triage_sync()
    first = {item.key: (item.pk, item.state, item.first_seen) for item in TriageItem.objects.all()}
    item = TriageItem.objects.get(key="wasteful_job:alps/1001")
    triage_acknowledge(item, sources["staff"])
    counts = triage_sync()
    assert counts["created"] == 0 and counts["resolved"] == 0 and counts["reopened"] == 0
    again = {item.key: (item.pk, item.state, item.first_seen) for item in TriageItem.objects.all()}
    assert again.keys() == first.keys()
    assert again["wasteful_job:alps/1001"][1] == "acknowledged"
    assert all(again[key][0] == first[key][0] and again[key][2] == first[key][2] for key in first)


def test_cleared_sources_resolve_unless_muted_and_a_returning_problem_reopens(sources):
    triage_sync()
    muted = TriageItem.objects.get(kind="bad_switch")
    triage_mute(muted, sources["staff"], timezone.now() + timedelta(days=1))
    triage_acknowledge(TriageItem.objects.get(kind="catalog_incident"), sources["staff"])
    sources["switch"].status = "resolved"
    sources["switch"].save()
    incident = sources["incident"]
    incident.closed = timezone.now()
    incident.save()
    counts = triage_sync()
    assert counts["resolved"] == 1
    item = TriageItem.objects.get(kind="catalog_incident")
    assert (item.state, item.note, item.open_at_source) == ("resolved", "cleared at source", False)
    assert item.resolved_at is not None
    switch = TriageItem.objects.get(kind="bad_switch")
    assert switch.state == "muted" and not switch.open_at_source
    # The check fails again: a new incident of the same product and check reopens the same item.
    from apps.catalog.models import Incident

    Incident.objects.create(product=incident.product, kind="freshness", opened=timezone.now(), message="stale again")
    counts = triage_sync()
    again = TriageItem.objects.get(kind="catalog_incident")
    assert counts["reopened"] == 1 and again.pk == item.pk
    assert (again.state, again.note, again.assignee, again.detail) == ("new", "came back at source", None, "stale again")


def test_a_resolved_item_that_still_holds_stays_resolved_and_an_ended_mute_comes_back(sources):
    triage_sync()
    node = TriageItem.objects.get(kind="failing_node")
    triage_resolve(node, sources["staff"], note="drained by hand")
    triage_sync()
    assert TriageItem.objects.get(pk=node.pk).state == "resolved"
    stragglers = TriageItem.objects.get(kind="straggler")
    triage_mute(stragglers, sources["staff"], timezone.now() + timedelta(hours=1))
    TriageItem.objects.filter(pk=stragglers.pk).update(muted_until=timezone.now() - timedelta(seconds=1))
    triage_sync()
    stragglers.refresh_from_db()
    assert (stragglers.state, stragglers.muted_until, stragglers.note) == ("new", None, "mute ended, still open at source")


def test_state_changes_are_validated(sources, make_user):
    triage_sync()
    item = TriageItem.objects.get(kind="namespace_request")
    with pytest.raises(TriageError) as error:
        triage_mute(item, sources["staff"], timezone.now() - timedelta(minutes=1))
    assert error.value.field == "muted_until"
    with pytest.raises(TriageError) as error:
        triage_acknowledge(item, sources["staff"], sources["alice"])  # not staff
    assert error.value.field == "assignee"
    assert TriageItem.objects.get(pk=item.pk).state == "new"
    tina = sources["staff"].__class__.objects.get(username="tina")
    item = triage_acknowledge(item, sources["staff"], tina)
    assert (item.state, item.assignee, item.note) == ("acknowledged", tina, "acknowledged by sam")
    assert item.acknowledged_at is not None
    item = triage_reopen(item, sources["staff"])
    assert (item.state, item.assignee, item.acknowledged_at) == ("new", None, None)


def test_the_task_records_its_run(sources):
    from apps.core.models import TaskRun
    from apps.triage.tasks import sync_inbox_task

    result = sync_inbox_task.apply().get()
    assert result["found"] == 7
    run = TaskRun.objects.get(name="triage.sync_inbox")
    assert run.status == "succeeded" and "7 open at source" in run.message
    assert sync_inbox_task.apply().get()["created"] == 0


def test_nodes_out_of_service_are_listed_last_and_a_switch_speaks_for_its_suspect_nodes(sources):
    from apps.vetting.models import NodeHealth

    now = timezone.now()
    NodeHealth.objects.create(host="nid000640", state="suspect", since=now, reason="behind switch 5.0")
    NodeHealth.objects.create(host="nid000418", state="in_repair", since=now, reason="sent to repair: 9 failed runs")
    NodeHealth.objects.create(host="nid000900", state="suspect", since=now, reason="slow HBM")
    triage_sync()
    nodes = {item.data["host"]: item for item in TriageItem.objects.filter(kind="failing_node")}
    assert set(nodes) == {"nid000777", "nid000418", "nid000900"}  # nid000640 is the switch's
    assert (nodes["nid000418"].severity, nodes["nid000418"].data["drain"]) == ("info", False)
    assert nodes["nid000900"].severity == "warning" and nodes["nid000900"].detail == "slow HBM"
    assert keys()[-1] == "failing_node:nid000418"


def test_the_staff_page_folds_the_tail_of_many_wasteful_jobs(sources, rf):
    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation
    from apps.triage import sections

    start = timezone.now() - timedelta(hours=1)
    for n in range(sections.SECTION_WASTEFUL + 3):
        job = Job.objects.create(cluster=sources["idle"].cluster, job_id=2000 + n, name=f"idle-{n}", user_name="bob", state="RUNNING",
                                 submit_time=start, start_time=start, gpus=4)
        JobSaturation.objects.create(job=job, status="ready", score=1.0, idle_gpus=4, computed=timezone.now())
    triage_sync()
    request = rf.get("/staff/")
    request.user = sources["staff"]
    context = sections.staff_inbox(request)
    listed = context["triage_rows"]
    fold = [row for row in listed if "fold" in row]
    assert len(fold) == 1 and fold[0]["fold"] == 2 + 3  # 13 wasteful jobs (11 + 2 from the fixture), 8 shown
    assert listed.index(fold[0]) == sections.SECTION_WASTEFUL
    assert {row["item"].kind for row in listed[sections.SECTION_WASTEFUL + 1:]} == {
        "straggler", "failing_node", "bad_switch", "namespace_request", "catalog_incident"}
    shown = sum(row["item"].gpu_hours_lost for row in listed[:sections.SECTION_WASTEFUL])
    assert fold[0]["lost"] == pytest.approx(context["triage_counts"]["gpu_hours_lost_open"] - shown)


def test_a_switch_level_straggler_keeps_the_hosts_behind_the_switch(sources):
    """Switch and group findings carry ``hosts`` and no ``host``: the item lists them (it used to list none)."""
    record = sources["busy"].saturation
    record.stragglers = [*record.stragglers, {"level": "switch", "host": None, "switch": "2.3", "hosts": ["nid000020", "nid000021"],
                                              "reason": "switch 2.3: all its GPUs 15 % below their peers"}]
    record.save()
    triage_sync()
    item = TriageItem.objects.get(key="straggler:alps/1003")
    assert item.data["hosts"] == ["nid000003", "nid000020", "nid000021"]


def test_no_verdict_while_a_job_warms_up(sources, settings):
    """Issue 35, item 2: a job 3.5 minutes into its run (S 13 over its warm-up; 67 once steady) was listed as
    wasteful. Until its scoring sees the steady state start it gets no inbox item; once it does, the verdict comes
    from its steady numbers; a job whose GPUs never get busy is idle after SATURATION_WARMUP_MAX_SECONDS."""
    from apps.jobs.models import Job
    from apps.saturation.models import JobSaturation

    now = timezone.now()
    start = now - timedelta(minutes=3.5)
    new = Job.objects.create(cluster=sources["idle"].cluster, job_id=1010, name="megatron-new", user_name="alice",
                             account="a-llm01", state="RUNNING", submit_time=start, start_time=start, gpus=8,
                             node_list=["nid001010"])
    rows = [{"host": "nid001010", "gpu": i, "busy": 0.45, "score": 13.0} for i in range(8)]
    record = JobSaturation.objects.create(job=new, status="ready", computed=now, score=13.0, per_gpu=rows,
                                          steady_found=False, steady_start=start, scored_until=now)
    triage_sync()
    assert "wasteful_job:alps/1010" not in keys()
    settings.SATURATION_WARMUP_MAX_SECONDS = 120  # past the longest warm-up: no longer warming up
    triage_sync()
    assert "wasteful_job:alps/1010" in keys()
    settings.SATURATION_WARMUP_MAX_SECONDS = 1800
    record.steady_found = True  # steady now, at S 67 and busy
    record.score = 67.0
    record.per_gpu = [{**row, "busy": 0.99, "score": 67.0} for row in rows]
    record.save()
    triage_sync()
    assert TriageItem.objects.get(key="wasteful_job:alps/1010").state == "resolved"
