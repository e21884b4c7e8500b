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


MAX_DEPTH = 64


class TooDeep(json.JSONDecodeError):
    """The text nests arrays and objects deeper than allowed (a :class:`json.JSONDecodeError`, so
    callers that report malformed JSON with its line report this too)."""


def loads_with_lines(text: str, *, max_depth: int = MAX_DEPTH):
    """Like :func:`json.loads`, but every JSON object comes back as a :class:`LineDict`.

    Raises :class:`json.JSONDecodeError` (with ``lineno``/``colno``) on malformed input, and
    :class:`TooDeep` (one) for arrays and objects nested deeper than ``max_depth`` levels: the
    scanner here is recursive Python, and a 100,000-deep text must not reach the recursion limit.
    """
    line_starts = [index for index, character in enumerate(text) if character == "\n"]
    parser = json.JSONDecoder()
    depth = 0

    def deeper(opening: int) -> None:
        nonlocal depth
        depth += 1
        if depth > max_depth:
            raise TooDeep(f"arrays and objects nested deeper than {max_depth} levels", text, opening)

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
        nonlocal depth
        opening = s_and_end[1] - 1
        deeper(opening)
        pairs, end = decoder.JSONObject(s_and_end, strict, scan_once, None, list, memo)
        depth -= 1
        result = LineDict(pairs)
        result.line = bisect_right(line_starts, opening) + 1
        return result, end

    def parse_array(s_and_end, scan_once):
        nonlocal depth
        deeper(s_and_end[1] - 1)
        result = decoder.JSONArray(s_and_end, scan_once)
        depth -= 1
        return result

    parser.parse_object = parse_object
    parser.parse_array = parse_array
    parser.scan_once = scanner.py_make_scanner(parser)
    try:
        return parser.decode(text)
    except RecursionError:
        raise TooDeep("arrays and objects nested too deeply to read", text, 0) from None
