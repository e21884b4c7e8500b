"""The EDF syntax recovery (apps.edf.tomlsyntax.diagnose) does work in proportion to its text, also on hostile
input within MAX_EDF_CHARS: lines that each leave a string, a header or an array open, or open a multi-line
string that never closes. The work is counted, not timed: the Python lines run in the EDF readers and the
characters the text hands out (slices and counts), for a text and the same text twice as long."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from apps.edf import tomlpos, tomlsyntax

READERS = {Path(tomlsyntax.__file__).resolve(), Path(tomlpos.__file__).resolve()}

# Each line kind read past alone was super-linear before: a string not closed ('k = "x # y'), a header or array
# left open ('[t', 'a = [1,': one copy of the text per repair), and a multi-line string opened after a backslash
# ('a = \"""': the backslash escapes the next line's opening, so each one is read to the end of the text).
KINDS = ['k{i} = "x # y\n', "[t{i}\n", "a{i} = [1,\n", 'a{i} = \\"""\n', '\\"""\n', "x{i} = 1\n", "a{i} = '''x\n"]


class CountingText(str):
    """A text that counts the characters it hands out; what is made from it by slicing or joining counts too."""

    def __new__(cls, text, counter=None):
        made = super().__new__(cls, text)
        made.counter = counter if counter is not None else [0]
        return made

    def __getitem__(self, key):
        got = str.__getitem__(self, key)
        self.counter[0] += len(got)
        return CountingText(got, self.counter)

    def __add__(self, other):
        return CountingText(str.__add__(self, other), self.counter)

    def __radd__(self, other):
        return CountingText(str.__add__(other, self), self.counter)

    def count(self, sub, start=None, end=None):
        self.counter[0] += len(range(len(self))[start:end])
        return str.count(self, sub, start, end)


def hostile(kinds, lines):
    return "".join(kinds[i % len(kinds)].format(i=i) for i in range(lines))


def work(text):
    """(Python lines run in tomlsyntax and tomlpos, characters read from the text) for diagnose(text)."""
    lines = [0]
    files: dict = {}

    def trace(frame, event, arg):
        path = files.get(frame.f_code.co_filename)
        if path is None:
            path = files[frame.f_code.co_filename] = Path(frame.f_code.co_filename).resolve() in READERS
        if not path:
            return None
        if event == "line":
            lines[0] += 1
        return trace

    counted = CountingText(text)
    sys.settrace(trace)
    try:
        diagnosis = tomlsyntax.diagnose(counted)
    finally:
        sys.settrace(None)
    plain = tomlsyntax.diagnose(text)
    assert (diagnosis.issues, diagnosis.data, diagnosis.dropped, diagnosis.repaired) == (
        plain.issues, plain.data, plain.dropped, plain.repaired)
    return lines[0], counted.counter[0], plain


@pytest.mark.parametrize("kinds", [[kind] for kind in KINDS[:5]] + [KINDS], ids=lambda kinds: "+".join(
    kind.split("{")[0].strip() or kind.strip() for kind in kinds))
def test_hostile_lines_are_read_past_in_work_proportional_to_the_text(kinds):
    small, large = hostile(kinds, 300), hostile(kinds, 600)
    lines_small, chars_small, diagnosis_small = work(small)
    lines_large, chars_large, diagnosis_large = work(large)
    # both texts are read past to their end: the last issue told is on one of their last lines
    assert max(issue.line for issue in diagnosis_small.issues) >= 300 - len(kinds)
    assert max(issue.line for issue in diagnosis_large.issues) >= 600 - len(kinds)
    # twice the text, twice the work (a read to the end per line, or a copy of the text per repair, is four times)
    assert lines_large <= 2.5 * lines_small, (lines_small, lines_large)
    assert chars_large <= 2.5 * chars_small, (chars_small, chars_large)
    assert chars_large <= 10 * len(large), (chars_large, len(large))


def test_repairs_at_one_place_are_made_in_the_order_they_were_found():
    # the inline table's } and the array's ] both go after "1": the table was closed first, inside the array
    diagnosis = tomlsyntax.diagnose("a = [{b = 1\nc = 2\n")
    assert diagnosis.text == "a = [{b = 1}]\nc = 2\n"
    assert diagnosis.data == {"a": [{"b": 1}], "c": 2} and diagnosis.repaired == {1}
