"""The rules engine on constructed histories: thresholds, windows, switch correlation, critical results."""
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest

from apps.vetting.rules import BUILT_IN_RULES, HISTORY_COLUMNS, RuleSpec, check_rule, evaluate

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


class History:
    """Rows of a rules history, written like a story."""

    def __init__(self):
        self.rows, self.run = [], 0

    def run_of(self, days_ago, results, kind="vetnode"):
        """results: (host, eval_name, eval_type, outcome, bandwidth, switch, ranks)"""
        self.run += 1
        for host, eval_name, eval_type, outcome, bandwidth, switch, ranks in results:
            for rank in range(ranks):
                self.rows.append({"id": len(self.rows) + 1, "time": NOW - timedelta(days=days_ago), "run_id": self.run,
                                  "host": host, "switch": switch, "group": int(switch.split(".")[0]) if switch else None,
                                  "kind": kind, "eval_name": eval_name, "eval_type": eval_type, "outcome": outcome,
                                  "bandwidth_gbs": bandwidth})
        return self

    def frame(self):
        return pd.DataFrame(self.rows, columns=list(HISTORY_COLUMNS))


GPU_RULE = RuleSpec("gpu", "GPU failures", "failures_in_window", {"min_failures": 3, "days": 7, "evals": ["GPUEval"]}, "drain_recommended")
SWITCH_RULE = RuleSpec("nccl", "NCCL behind a switch", "low_bandwidth_same_switch",
                       {"min_gbs": 15.0, "consecutive": 2, "min_nodes": 2, "evals": ["Nccl"], "days": 30}, "suspect")
CRITICAL_RULE = RuleSpec("crit", "Critical", "critical_result", {"days": 1, "kinds": ["health"]}, "exclude_now", "critical")


def gpu(host, outcome, ranks=4):
    return (host, "gpu idle", "vetnode.evaluations.gpu_eval.GPUEval", outcome, None, "3.1", ranks)


def test_failures_count_once_per_run_and_evaluation_and_need_the_threshold():
    story = History()
    story.run_of(6, [gpu("nid000001", "fail"), gpu("nid000002", "pass")])  # 4 ranks report one failure: counts once
    story.run_of(3, [gpu("nid000001", "fail")])
    assert evaluate([GPU_RULE], story.frame(), now=NOW) == []  # 2 of 3
    story.run_of(1, [gpu("nid000001", "fail"), gpu("nid000002", "fail")])
    [finding] = evaluate([GPU_RULE], story.frame(), now=NOW)
    assert (finding.subject_kind, finding.subject, finding.hosts, finding.action) == ("node", "nid000001", ["nid000001"], "drain_recommended")
    assert "3 failed evaluations in 7 days (gpu idle)" in finding.summary
    assert len(finding.evidence) == 12 and finding.latest == NOW - timedelta(days=1)  # every failing row, newest first
    assert finding.evidence == sorted(finding.evidence, reverse=True)


def test_the_window_moves_with_time_and_other_evaluations_do_not_count():
    story = History()
    for days in (9, 6, 2):
        story.run_of(days, [gpu("nid000001", "fail")])
    assert evaluate([GPU_RULE], story.frame(), now=NOW) == []  # the one 9 days ago is outside 7 days
    assert len(evaluate([GPU_RULE], story.frame(), now=NOW - timedelta(days=2))) == 1  # two days ago all three were inside
    other = History()
    for days in (3, 2, 1):
        other.run_of(days, [("nid000001", "nccl", "vetnode.evaluations.nccl_lib_eval.NcclLibEval", "fail", 10.0, "3.1", 4)])
    assert evaluate([GPU_RULE], other.frame(), now=NOW) == []


def nccl(host, bandwidth, switch):
    return (host, "nccl internode", "vetnode.evaluations.nccl_lib_eval.NcclLibEval", "fail" if bandwidth < 16.1 else "pass",
            bandwidth, switch, 4)


def test_low_bandwidth_behind_one_switch_in_consecutive_runs_suspects_the_switch():
    story = History()
    story.run_of(3, [nccl("nid000001", 22.0, "3.1"), nccl("nid000002", 22.0, "3.1"), nccl("nid000009", 22.0, "3.2")])
    story.run_of(2, [nccl("nid000001", 11.0, "3.1"), nccl("nid000002", 12.5, "3.1"), nccl("nid000009", 22.0, "3.2")])
    assert evaluate([SWITCH_RULE], story.frame(), now=NOW) == []  # one low run only
    story.run_of(1, [nccl("nid000001", 10.5, "3.1"), nccl("nid000003", 13.0, "3.1"), nccl("nid000009", 9.0, "3.2")])
    [finding] = evaluate([SWITCH_RULE], story.frame(), now=NOW)
    assert (finding.subject_kind, finding.subject) == ("switch", "3.1")
    assert finding.hosts == ["nid000001", "nid000002", "nid000003"] and "lowest 10.50 GB/s" in finding.summary
    assert "suspect the switch or its links" in finding.summary
    # switch 3.2 had one low node once: a node's problem at most, not the switch's


def test_one_low_node_behind_a_switch_is_not_a_switch_problem():
    story = History()
    for days in (2, 1):
        story.run_of(days, [nccl("nid000001", 9.0, "3.1"), nccl("nid000002", 23.0, "3.1")])
    assert evaluate([SWITCH_RULE], story.frame(), now=NOW) == []


def test_a_critical_health_check_excludes_the_node_now():
    story = History()
    story.run_of(0.5, [("nid000007", "check_gpu_xid", "nhc", "critical", None, "3.1", 1),
                       ("nid000008", "check_gpu_xid", "nhc", "warn", None, "3.1", 1)], kind="health")
    story.run_of(3, [("nid000006", "check_gpu_xid", "nhc", "critical", None, "3.1", 1)], kind="health")
    [finding] = evaluate([CRITICAL_RULE], story.frame(), now=NOW)
    assert finding.subject == "nid000007" and finding.severity == "critical" and finding.action == "exclude_now"
    assert "check_gpu_xid was critical" in finding.summary


def test_same_history_same_findings_and_disabled_or_invalid_rules_find_nothing():
    story = History()
    for days in (3, 2, 1):
        story.run_of(days, [gpu("nid000001", "fail")])
    first = evaluate(list(BUILT_IN_RULES), story.frame(), now=NOW)
    again = evaluate(list(BUILT_IN_RULES), story.frame(), now=NOW)
    assert [(f.key, f.evidence) for f in first] == [(f.key, f.evidence) for f in again] and first
    off = RuleSpec(**{**GPU_RULE.__dict__, "enabled": False})
    broken = RuleSpec(**{**GPU_RULE.__dict__, "params": {"min_failures": "three"}})
    assert evaluate([off, broken], story.frame(), now=NOW) == []


@pytest.mark.parametrize("kind, params, action, severity, fields", [
    ("nope", {}, "suspect", "warning", {"kind"}),
    ("failures_in_window", {"min_failures": 0}, "suspect", "warning", {"params.min_failures"}),
    ("failures_in_window", {"min_failures": 2.5}, "suspect", "warning", {"params.min_failures"}),
    ("failures_in_window", {"windows": 3}, "suspect", "warning", {"params.windows"}),
    ("failures_in_window", {"kinds": ["slurm"]}, "drain", "loud", {"params.kinds", "action", "severity"}),
    ("low_bandwidth_same_switch", {"min_gbs": True}, "suspect", "warning", {"params.min_gbs"}),
    # Issue 33, finding 3b: these raised (a 500 from the rules API) instead of naming the field.
    ("nope", [1, 2], "suspect", "warning", {"kind", "params"}),
    ("nope", "abc", "suspect", "warning", {"kind", "params"}),
    ("failures_in_window", ["min_failures"], "suspect", "warning", {"params"}),
    ("failures_in_window", {"min_failures": float("inf")}, "suspect", "warning", {"params.min_failures"}),
    ("failures_in_window", {"days": 1e9}, "suspect", "warning", {"params.days"}),
    (["failures_in_window"], {}, None, "warning", {"kind", "action"}),
])
def test_invalid_rules_name_the_field(kind, params, action, severity, fields):
    _, problems = check_rule(kind, params, action, severity)
    assert {field for field, _ in problems} == fields


def test_node_failures_explained_by_a_bad_switch_are_not_recommended_twice():
    story = History()
    for days in (6, 5, 4, 3, 2, 1):
        story.run_of(days, [nccl("nid000001", 9.0, "3.1"), nccl("nid000002", 9.5, "3.1"), gpu("nid000002", "fail" if days < 4 else "pass")])
    failures = RuleSpec("fails", "Failing", "failures_in_window", {"min_failures": 3, "days": 7}, "suspect")
    findings = evaluate([failures, SWITCH_RULE], story.frame(), now=NOW)
    # nid000001 only failed NCCL: the switch explains it; nid000002 also failed its GPU check three times
    assert sorted((f.subject_kind, f.subject) for f in findings) == [("node", "nid000002"), ("switch", "3.1")]
    node = next(f for f in findings if f.subject == "nid000002")
    assert node.evals == ["gpu idle", "nccl internode"]
