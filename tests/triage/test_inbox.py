"""The inbox's plain rules: ranking, how a sync moves an item's state, the prepared message."""
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from apps.triage import inbox

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def test_wasteful_jobs_rank_above_everything_then_by_gpu_hours_lost_then_severity_and_age():
    old, young = NOW - timedelta(days=2), NOW - timedelta(hours=1)
    items = {
        "small waste": (inbox.rank_of("wasteful_job", "warning"), 12.0, young),
        "big waste": (inbox.rank_of("wasteful_job", "warning"), 480.0, young),
        "critical node": (inbox.rank_of("failing_node", "critical"), None, young),
        "old warning": (inbox.rank_of("namespace_request", "warning"), None, old),
        "young warning": (inbox.rank_of("catalog_incident", "warning"), None, young),
    }
    ranked = sorted(items, key=lambda name: inbox.sort_key(*items[name]))
    assert ranked == ["big waste", "small waste", "critical node", "old warning", "young warning"]


def test_a_finding_checks_its_kind_severity_and_key():
    with pytest.raises(ValueError, match="kind"):
        inbox.Finding(key="oops:1", kind="oops", title="t", owner="o")
    with pytest.raises(ValueError, match="severity"):
        inbox.Finding(key="straggler:alps/1", kind="straggler", title="t", owner="o", severity="loud")
    with pytest.raises(ValueError, match="must start with"):
        inbox.Finding(key="alps/1", kind="straggler", title="t", owner="o")
    assert inbox.Finding(key="bad_switch:5.0", kind="bad_switch", title="t", owner="o", severity="critical").rank == 1


@pytest.mark.parametrize("state, was_open, holds, muted_until, expected, note", [
    ("new", True, True, None, "new", ""),
    ("acknowledged", True, True, None, "acknowledged", ""),
    ("resolved", True, True, None, "resolved", ""),  # resolved by hand while it holds: a person decided
    ("resolved", False, True, None, "new", inbox.CAME_BACK_NOTE),  # it had cleared and came back
    ("muted", True, True, NOW + timedelta(hours=1), "muted", ""),
    ("muted", True, True, NOW - timedelta(minutes=1), "new", inbox.MUTE_ENDED_NOTE),
    ("new", True, False, None, "resolved", inbox.CLEARED_NOTE),
    ("acknowledged", True, False, None, "resolved", inbox.CLEARED_NOTE),
    ("muted", True, False, NOW + timedelta(hours=1), "muted", ""),  # a mute is kept until it runs out
    ("muted", False, False, NOW - timedelta(hours=1), "resolved", inbox.CLEARED_NOTE),
    ("resolved", False, False, None, "resolved", ""),
])
def test_reconcile(state, was_open, holds, muted_until, expected, note):
    move = inbox.reconcile(state=state, was_open=was_open, holds=holds, muted_until=muted_until, now=NOW)
    assert (move.state, move.note) == (expected, note)
    assert move.reopened == (expected == "new" and state != "new")


def test_reconcile_refuses_an_unknown_state():
    with pytest.raises(ValueError):
        inbox.reconcile(state="open", was_open=True, holds=True, muted_until=None, now=NOW)


def test_prepared_mail_names_the_job_the_loss_and_what_to_do():
    subject, body = inbox.prepared_mail(job_label="alps/1200123", job_name="data-prep-7", url="https://p.example/jobs/alps/1200123/",
                                        lost=187.25, hours=12.5, gpus=16, idle_gpus=12, score=6.0)
    assert "alps/1200123" in subject and "187 GPU-hours" in subject
    assert "12 of the job's 16 GPUs sat idle" in body and "https://p.example/jobs/alps/1200123/" in body
    _, busy = inbox.prepared_mail(job_label="alps/9", job_name="", url="u", lost=3.0, hours=2.0, gpus=4, idle_gpus=0,
                                  score=21.4, limiter="memory")
    assert "21 % saturated (limited by memory)" in busy and "idle" not in busy.split("\n\n")[2]


def test_mailto_round_trips_subject_and_body():
    link = inbox.mailto("ana@example.org", "GPU-hours & you", "line one\nline two: 50 %")
    parts = urlsplit(link)
    assert parts.scheme == "mailto" and parts.path == "ana@example.org"
    query = parse_qs(parts.query)
    assert query["subject"] == ["GPU-hours & you"] and query["body"] == ["line one\r\nline two: 50 %"]
    assert unquote(inbox.mailto("", "s", "b")).startswith("mailto:?subject=s")


def test_straggler_detail_shows_the_first_reasons_and_counts_the_rest():
    findings = [{"reason": f"rank {i}: SM clock low"} for i in range(5)]
    text = inbox.straggler_detail(findings)
    assert text.startswith("rank 0: SM clock low; rank 1") and text.endswith("and 2 more")
    assert inbox.straggler_detail(findings[:1]) == "rank 0: SM clock low"
