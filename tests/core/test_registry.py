"""apps/core/registry.py: the one registry shape the core registries share."""
from dataclasses import dataclass

from apps.core.registry import OrderedRegistry


@dataclass
class Entry:
    key: str
    order: int = 0
    page: str = "home"


def test_same_key_replaces_and_entries_come_back_by_order_then_key():
    registry = OrderedRegistry(key=lambda entry: entry.key)
    registry.add(Entry("b", 10))
    registry.add(Entry("a", 10))
    registry.add(Entry("z", 1))
    registry.add(Entry("b", 0))  # a reload registers again: replaced, not doubled
    assert [(entry.key, entry.order) for entry in registry.entries()] == [("b", 0), ("z", 1), ("a", 10)]
    assert len(registry) == 3 and registry.get("a").order == 10 and registry.get("missing") is None


def test_filter_remove_and_own_sort_key():
    registry = OrderedRegistry(key=lambda entry: (entry.page, entry.key), sort_key=lambda entry: (-entry.order, entry.key))
    registry.add(Entry("x", 1, "staff"))
    registry.add(Entry("y", 2, "staff"))
    registry.add(Entry("x", 3, "home"))
    assert [entry.key for entry in registry.entries(lambda entry: entry.page == "staff")] == ["y", "x"]
    registry.remove(("staff", "y"))
    registry.remove(("staff", "never"))
    assert [(entry.page, entry.key) for entry in registry] == [("home", "x"), ("staff", "x")]


def test_a_snapshot_restores_what_tests_changed():
    registry = OrderedRegistry(key=lambda entry: entry.key)
    registry.add(Entry("kept"))
    saved = registry.snapshot()
    registry.clear()
    registry.add(Entry("temporary"))
    registry.restore(saved)
    assert [entry.key for entry in registry] == ["kept"]
