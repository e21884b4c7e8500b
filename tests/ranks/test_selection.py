"""apps.ranks.selection: the one parser of "6,7" / "0-3" selections (API filters and job page)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.ranks.selection import MAX_VALUE, MAX_VALUES, SelectionError, parse_selection


@pytest.mark.parametrize("text, values", [
    ("", None), (None, None), (" , ,", None), ("1", [1]), ("6,7", [6, 7]), ("0-3", [0, 1, 2, 3]),
    (" 1 , 4 - 5 ,", [1, 4, 5]), ("3,1-2,2", [1, 2, 3]), ("007", [7]), ("0-0", [0]),
])
def test_selections(text, values):
    assert parse_selection(text) == values


@pytest.mark.parametrize("text, message", [
    ("²", r"'²' is not a number or a range like 1 or 6,7 or 0-3 \(digits 0-9 only\)"),
    ("١", r"'١' is not a number"),  # int("١") == 1: the parser must not read it
    ("1-²", r"'1-²' is not a number"),
    ("-1", r"'-1' is not a number"),
    ("1.0", r"'1.0' is not a number"),
    ("1 2", r"'1 2' is not a number"),
    ("3-1", r"'3-1': the range ends before it starts; write 1-3"),
    ("0-1000000000", r"^1000000000 is too large: a coordinate is at most 999,999,999$"),
    ("9" * 5000, r"^9{20}… is too large"),  # no int() of 5,000 digits (Python refuses those: a 500)
    ("0-99999,0-1", r"more than 100,000 values"),
])
def test_bad_selections_say_what_is_wrong(text, message):
    with pytest.raises(SelectionError, match=message):
        parse_selection(text)


def test_leading_zeros_do_not_count_as_size():
    assert parse_selection("0" * 5000 + "5") == [5]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_a_selection_or_a_selection_error(text):
    try:
        values = parse_selection(text)
    except SelectionError:
        return
    assert values is None or (values == sorted(set(values)) and len(values) <= MAX_VALUES and values[-1] <= MAX_VALUE)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 50)), min_size=1, max_size=6))
def test_ranges_name_exactly_their_values(ranges):
    text = ",".join(f"{low}-{low + width}" if width else f"{low}" for low, width in ranges)
    assert parse_selection(text) == sorted({v for low, width in ranges for v in range(low, low + width + 1)})
