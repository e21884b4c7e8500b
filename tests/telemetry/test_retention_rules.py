"""The tier rules of ``apps/telemetry/retention.py``, plain: words, horizons, which step a window can be read at."""
from datetime import datetime, timedelta, timezone

import pytest

from apps.telemetry.retention import Retention, TierError

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("days, words", [
    ((30, 90, 365), "raw for 30 days, 1-min to 90 days, 10-min to 1 year"),
    ((0.25, 3, 14), "raw for 6 hours, 1-min to 3 days, 10-min to 14 days"),
    ((1, 2, 730), "raw for 1 day, 1-min to 2 days, 10-min to 2 years"),
])
def test_the_tiers_in_words(days, words):
    assert Retention(*days).describe() == words


def test_a_coarser_tier_never_goes_before_a_finer_one_and_days_are_positive():
    with pytest.raises(ValueError, match="must not shrink"):
        Retention(30, 10, 365)
    with pytest.raises(ValueError, match="positive"):
        Retention(0, 90, 365)
    with pytest.raises(ValueError, match="unknown telemetry retention option"):
        Retention.from_options({"raw": 3})


def test_which_tier_holds_a_moment_and_the_step_it_can_be_read_at():
    tiers = Retention()
    assert tiers.tier_at(NOW - timedelta(days=29), NOW) == "raw"
    assert tiers.tier_at(NOW - timedelta(days=31), NOW) == "1m"
    assert tiers.tier_at(NOW - timedelta(days=91), NOW) == "10m"
    assert tiers.tier_at(NOW - timedelta(days=366), NOW) is None
    assert tiers.step_for(NOW - timedelta(days=1), NOW, 10) == 10
    assert tiers.step_for(NOW - timedelta(days=31), NOW, 10) == 60
    assert tiers.step_for(NOW - timedelta(days=31), NOW, 90) == 120  # the next multiple of the tier's resolution
    assert tiers.step_for(NOW - timedelta(days=91), NOW, 60) == 600
    assert tiers.step_for(NOW - timedelta(days=400), NOW, 60) is None


def test_a_step_the_tier_cannot_answer_is_refused_naming_it_and_a_window_past_every_tier_is_not():
    tiers = Retention()
    with pytest.raises(TierError, match="1-minute rollups.*multiple of 60 s, not 10"):
        tiers.check_step(NOW - timedelta(days=31), NOW, 10)
    with pytest.raises(TierError, match="percentiles need raw samples, kept for 30 days"):
        tiers.check_step(NOW - timedelta(days=31), NOW, 60, percentiles=True)
    tiers.check_step(NOW - timedelta(days=500), NOW, 10, end=NOW - timedelta(days=400))  # nothing kept: an empty answer
    with pytest.raises(TierError, match="10-minute rollups.*600 s"):  # reaching back past every tier: the coarsest rules
        tiers.check_step(NOW - timedelta(days=500), NOW, 60, end=NOW)
