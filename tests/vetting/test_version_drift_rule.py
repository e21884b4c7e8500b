"""The vetting rule kind version_drift: nodes whose versions differ from their partition's majority (issue 38)."""
from datetime import datetime, timezone

import pandas as pd

from apps.vetting.rules import BUILT_IN_RULES, VERSION_COLUMNS, RuleSpec, check_rule, empty_history, evaluate

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)
SEEN = datetime(2026, 12, 5, 9, 0, tzinfo=timezone.utc)
RULE = next(rule for rule in BUILT_IN_RULES if rule.kind == "version_drift")


def frame(rows):
    return pd.DataFrame([(*row, SEEN) for row in rows], columns=list(VERSION_COLUMNS))


def test_a_node_off_its_partitions_majority_is_suspect_and_other_partitions_are_judged_on_their_own():
    rows = [(f"nid{n:06d}", "normal", "driver", "560.35.03") for n in range(1, 9)]
    rows[3] = ("nid000004", "normal", "driver", "550.54.15")
    rows += [(f"nid{n:06d}", "debug", "driver", "550.54.15") for n in range(100, 105)]  # another partition, uniform
    rows += [("nid000200", "tiny", "driver", "1"), ("nid000201", "tiny", "driver", "2")]  # too few nodes to judge
    (found,) = evaluate([RULE], empty_history(), now=NOW, versions=frame(rows))
    assert (found.subject, found.action, found.latest) == ("nid000004", "suspect", SEEN)
    assert found.summary == "nid000004 runs driver 550.54.15 while 7 of the 8 nodes of partition normal run 560.35.03"


def test_the_rule_checks_its_parameters():
    assert check_rule("version_drift", {"keys": ["driver"], "min_nodes": 0}, "suspect", "warning")[1] == [
        ("params.min_nodes", "must be more than 0")]
    assert evaluate([RuleSpec("x", "x", "version_drift", {}, "suspect")], empty_history(), now=NOW, versions=None) == []
