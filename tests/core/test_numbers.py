"""Numbers as users read them: units, separators, at most three significant digits, words for z."""
import pytest

from apps.core.numbers import count, duration_words, quantity, significant, z_words


@pytest.mark.parametrize("value, text", [
    (1.4791, "1.48"), (32512, "32,500"), (0.000123456, "0.000123"), (82.84, "82.8"), (1390.4, "1,390"),
    (0, "0"), (None, "–"), (float("nan"), "–"), (-5.63, "-5.63"), (100, "100"), (999.6, "1,000"),
])
def test_significant(value, text):
    assert significant(value) == text


def test_quantity_and_count():
    assert quantity(1390.4, "MHz") == "1,390 MHz"
    assert quantity(0.4234, "%") == "42.3 %"
    assert count(32512, "sample") == "32,512 samples"
    assert count(1, "GPU") == "1 GPU"


@pytest.mark.parametrize("seconds, words", [(20, "20 s"), (2700, "45 min"), (5400, "1 h 30 min"), (3 * 86400 + 7200, "3 d 2 h")])
def test_duration_words(seconds, words):
    assert duration_words(seconds) == words


def test_z_in_words():
    assert z_words(-5.63) == "5.6 robust SDs below its peers"
    assert z_words(4.0) == "4 robust SDs above its peers"
    assert z_words(None) == "not compared with peers"
