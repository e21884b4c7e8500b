"""diff_rows: the one add/change/remove comparison behind the topology import and the job-step upsert."""
from apps.core.diff import diff_rows

STORED = {
    "a": {"pk": 1, "xname": "x1", "gpus": 4},
    "b": {"pk": 2, "xname": "x2", "gpus": 4},
    "c": {"pk": 3, "xname": "x3", "gpus": 4},
}


def test_added_changed_removed_and_unchanged():
    diff = diff_rows(STORED, {"a": {"xname": "x1", "gpus": 4}, "b": {"xname": "x2", "gpus": 8}, "d": {"xname": "", "gpus": 2}})
    assert diff.added == [("d", {"xname": "", "gpus": 2})]
    assert [(change.key, change.pk, change.fields) for change in diff.changed] == [("b", 2, {"gpus": 8})]
    assert diff.changed[0].merged() == {"xname": "x2", "gpus": 8}
    assert diff.removed == [("c", 3)]
    assert diff.unchanged == 1


def test_empty_wanted_values_keep_stored_ones_when_asked():
    wanted = {"a": {"xname": "", "gpus": 8}}
    assert diff_rows(STORED, wanted).changed[0].fields == {"xname": "", "gpus": 8}
    assert diff_rows(STORED, wanted, keep_when_empty=True).changed[0].fields == {"gpus": 8}
    # zero is a value, not "unknown"
    assert diff_rows(STORED, {"a": {"xname": "x1", "gpus": 0}}, keep_when_empty=True).changed[0].fields == {"gpus": 0}


def test_without_remove_unwanted_rows_stay():
    assert diff_rows(STORED, {"a": {"xname": "x1"}}, remove=False).removed == []
