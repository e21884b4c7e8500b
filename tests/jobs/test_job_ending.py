"""A failed job's first screen says how it ended and the likely cause, first (issue 35, item 4: job 1200698,
failed with exit code 2, opened with "Nothing needs your attention" and its exit code at the bottom).

The rules (apps/jobs/endings.py, plain) with hand-made cases, then the real first screen of real jobs."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.jobs.endings import Step, ending, signal_of


def test_a_clean_end_or_a_running_job_has_nothing_to_say():
    assert ending(state="COMPLETED", exit_code=0) is None
    assert ending(state="RUNNING") is None and ending(state="PENDING") is None


def test_exit_code_2_is_a_usage_error_and_critical():
    found = ending(state="FAILED", exit_code=2, when="14:02 UTC", elapsed_s=3 * 60,
                   steps=[Step("batch", "batch", "COMPLETED", 0), Step("0", "python", "FAILED", 2)])
    assert found.level == "critical"
    assert found.title == "The job failed at 14:02 UTC after 3 min: exit code 2."
    assert "usage error" in found.cause and "Step 0 (python): failed, exit code 2." in found.cause
    assert found.facts == ["exit code 2"]


@pytest.mark.parametrize("exit_code, signal", [(None, 9), (137, None)])
def test_signal_9_is_a_kill_the_oom_killer_or_the_time_limit(exit_code, signal):
    assert signal_of(exit_code, signal) == 9
    early = ending(state="FAILED", exit_code=exit_code, signal=signal, elapsed_s=600, limit_minutes=60)
    assert "SIGKILL" in early.cause and "out-of-memory killer" in early.cause and early.facts == ["signal 9"]
    at_limit = ending(state="FAILED", exit_code=exit_code, signal=signal, elapsed_s=3600, limit_minutes=60)
    assert "at its time limit" in at_limit.cause and "--time" in at_limit.action


def test_each_bad_final_state_has_its_cause_and_level():
    cases = {
        "TIMEOUT": ("warning", "time limit of 4 h"), "OUT_OF_MEMORY": ("critical", "out of host memory"),
        "NODE_FAIL": ("critical", "A node of the job failed"), "CANCELLED": ("warning", "cancelled"),
        "PREEMPTED": ("warning", "preempted"),
    }
    for state, (level, words) in cases.items():
        found = ending(state=state, elapsed_s=4 * 3600, limit_minutes=240)
        assert found is not None and found.level == level and words in found.title, (state, found)


def test_a_node_failure_names_slurms_reason_and_a_cancel_who():
    assert "nid001234 not responding" in ending(state="NODE_FAIL", reason="nid001234 not responding").cause
    assert "(cancelled by alice)" in ending(state="CANCELLED", reason="cancelled by alice").title


# -- the page ------------------------------------------------------------------------------------------

HOSTS = ("nid000001", "nid000002")


def make_job(state, *, exit_code=None, signal=None, job_id=1200698):
    from apps.jobs.models import Cluster, Job

    start = timezone.now().replace(microsecond=0) - timedelta(hours=3)
    cluster, _ = Cluster.objects.get_or_create(name="alps")
    return Job.objects.create(cluster=cluster, job_id=job_id, user_name="alice", account="a-llm01", state=state,
                              submit_time=start, start_time=start, end_time=start + timedelta(minutes=47), gpus=8,
                              node_count=2, node_list=list(HOSTS), nodes="nid[000001-000002]", exit_code=exit_code,
                              signal=signal, time_limit_minutes=720)


def findings_of(html: str) -> list[str]:
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", item)).strip()
            for item in re.findall(r'<li class="finding finding--[a-z]+">(.*?)</li>', html, re.S)]


@pytest.fixture
def alice_client(client, django_user_model):
    django_user_model.objects.create_user("alice", password="pw")
    client.login(username="alice", password="pw")
    return client


@pytest.mark.django_db
def test_a_failed_jobs_first_screen_opens_with_how_it_ended(alice_client):
    from apps.saturation.models import JobSaturation

    job = make_job("FAILED", exit_code=2)
    # a critical straggler too: how the job ended still comes first
    JobSaturation.objects.create(job=job, status="ready", score=61.0, limiter="tensor", computed=timezone.now(),
                                 product="p.npz", stragglers=[{"level": "gpu", "host": "nid000002", "gpu": 3, "signal": "S",
                                                               "z": -6.0}])
    html = alice_client.get(f"/jobs/alps/{job.job_id}/").content.decode()
    assert "Nothing needs your attention" not in html
    findings = findings_of(html)
    assert findings[0].startswith("critical The job failed at") and "exit code 2" in findings[0]
    assert "Likely cause: exit code 2: a usage error" in findings[0] and "What to do:" in findings[0]
    assert any("nid000002:3" in item for item in findings[1:])
    state = re.search(r'id="fact-state">(.*?)</div>', html, re.S).group(1)
    assert "exit code 2" in state
    assert 'class="fact fact--critical" role="listitem" id="fact-state"' in html


@pytest.mark.django_db
def test_a_cancelled_job_says_it_was_cancelled_and_a_clean_one_says_nothing(alice_client):
    cancelled = make_job("CANCELLED", signal=15, job_id=1200412)
    findings = findings_of(alice_client.get(f"/jobs/alps/{cancelled.job_id}/summary/").content.decode())
    assert findings and findings[0].startswith("warning The job was cancelled") and "SIGTERM" in findings[0]
    clean = make_job("COMPLETED", exit_code=0, job_id=1200413)
    html = alice_client.get(f"/jobs/alps/{clean.job_id}/summary/").content.decode()
    assert not any("The job" in item for item in findings_of(html))


def test_a_job_the_flight_recorder_found_stuck_is_told_the_hang_not_to_ask_for_more_time():
    """Issue 36: a timed-out job whose ranks were stuck in a collective: the hang is the likely cause; "a longer
    --time" would only wait longer."""
    from apps.jobs.endings import ending

    verdict = "rank 37 never entered all_reduce #23 of data-parallel group 5 (7 of 8 ranks waited 10 min)"
    plain = ending(state="TIMEOUT", elapsed_s=4 * 3600, limit_minutes=240, when="06:11 UTC")
    assert "longer --time" in plain.action and plain.level == "warning"
    stuck = ending(state="TIMEOUT", elapsed_s=4 * 3600, limit_minutes=240, when="06:11 UTC", hang=verdict)
    assert stuck.level == "critical"
    assert stuck.title == "The job reached its time limit at 06:11 UTC after 4 h while stuck: Slurm stopped it."
    assert verdict in stuck.cause and "stuck collective" in stuck.cause
    assert "longer --time" not in stuck.action and "--exclude" in stuck.action
    # the NCCL watchdog's abort (SIGABRT) with a verdict says the same cause
    aborted = ending(state="FAILED", exit_code=134, hang=verdict)
    assert verdict in aborted.cause and "signal 6" in aborted.title
    # a clean end is not a hang, whatever a source says
    assert ending(state="COMPLETED", exit_code=0, hang=verdict) is None


@pytest.mark.django_db
def test_the_state_tile_of_a_job_that_ran_days_ago_gives_its_date():
    """A timed-out job of two days ago read "ran 4 h, 05:14 UTC–09:14 UTC", as if it were this morning's."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.jobs.models import Cluster, Job
    from apps.jobs.panel import timeline_summary

    end = timezone.now() - timedelta(hours=50)
    job = Job.objects.create(cluster=Cluster.objects.create(name="alps"), job_id=77, user_name="a", account="p",
                             state="TIMEOUT", submit_time=end - timedelta(hours=5), start_time=end - timedelta(hours=4),
                             end_time=end, time_limit_minutes=240)
    (fact,) = timeline_summary(job).facts
    assert f"{(end - timedelta(hours=4)):%Y-%m-%d %H:%M} UTC–" in fact.detail
