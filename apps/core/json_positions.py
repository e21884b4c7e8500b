"""Parse JSON and remember the line on which every object starts.

Pure: must not import django.

Import files are checked as a whole and every problem is reported with its line, so a user can
fix them all in one go. The standard library's decoder does not keep positions; its pure-Python
scanner lets us wrap object parsing and note where each ``{`` was.
"""
import json
from bisect import bisect_right
from json import decoder, scanner


class LineDict(dict):
    """A JSON object that knows its 1-based starting line."""

    line: int = 0


def loads_with_lines(text: str):
    """Like :func:`json.loads`, but every JSON object comes back as a :class:`LineDict`.

    Raises :class:`json.JSONDecodeError` (with ``lineno``/``colno``) on malformed input.
    """
    line_starts = [index for index, character in enumerate(text) if character == "\n"]
    parser = json.JSONDecoder()

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
        opening = s_and_end[1] - 1
        pairs, end = decoder.JSONObject(s_and_end, strict, scan_once, None, list, memo)
        result = LineDict(pairs)
        result.line = bisect_right(line_starts, opening) + 1
        return result, end

    parser.parse_object = parse_object
    parser.scan_once = scanner.py_make_scanner(parser)
    return parser.decode(text)
