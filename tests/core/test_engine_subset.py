"""Which tests the PostgreSQL + Redis profile runs again (engine_sensitive in tests/conftest.py)."""
import pytest

from tests.conftest import engine_sensitive


class Item:
    def __init__(self, nodeid: str, *markers):
        self.nodeid = nodeid
        self.markers = {marker.name: marker for marker in markers}

    def get_closest_marker(self, name):
        return self.markers.get(name)


def test_a_sensitive_module_is_run_again_except_its_engine_independent_tests():
    assert engine_sensitive(Item("tests/core/test_demo.py::test_reset"))
    assert not engine_sensitive(Item("tests/core/test_demo.py::test_logins", pytest.mark.engine_independent.mark))


def test_workers_and_real_transactions_are_run_again_browsers_are_not():
    assert engine_sensitive(Item("tests/x/test_y.py::t", pytest.mark.integration.mark))
    assert engine_sensitive(Item("tests/x/test_y.py::t", pytest.mark.django_db(transaction=True).mark))
    assert not engine_sensitive(Item("tests/x/test_y.py::t", pytest.mark.django_db.mark))
    assert not engine_sensitive(Item("tests/browser/test_y.py::t", pytest.mark.browser.mark, pytest.mark.integration.mark))
