"""Where each key and value of a TOML document starts, by key path.

Python's ``tomllib`` is the judge of whether a text is TOML (strict TOML 1.0, with a line and
column for every syntax error), but it forgets where values came from. This scanner walks the same
text once more and records, for every key path, the position of the key and of its value; array
elements get the path plus their index. It is lenient: on text that is not TOML it records what
it can and stops, so positions of the part before a syntax error are still known. Its reading of the
text (``Cursor``: positions, blanks, comments, dotted keys, multi-line strings, arrays of tables) also
serves the EDF pre-scan in ``tomlsyntax``, which reads past errors instead. Plain Python: no Django.

Lines and columns are 1-based, columns count characters.
"""
from __future__ import annotations

import bisect
import tomllib
from dataclasses import dataclass, field

Path = tuple  # of str keys and int array indices

_BARE_KEY = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SCALAR_END = set(",]}#\n\r")


class _Stop(Exception):
    """The text stops being TOML here; keep what was recorded."""


@dataclass
class Positions:
    keys: dict = field(default_factory=dict)  # path -> (line, column) of the key or table header
    values: dict = field(default_factory=dict)  # path -> (line, column) of the value
    tables: dict = field(default_factory=dict)  # path -> [(line, column), ...] of each [table] header

    def of(self, path, *, key: bool = False) -> tuple[int, int]:
        """Best position for ``path``: its value (or key), else the nearest recorded ancestor, else 1:1."""
        path = tuple(path)
        while path:
            first, second = (self.keys, self.values) if key else (self.values, self.keys)
            if path in first:
                return first[path]
            if path in second:
                return second[path]
            path = path[:-1]
        return (1, 1)


def scan(text: str) -> Positions:
    scanner = _Scanner(text)
    try:
        scanner.document()
    except (_Stop, IndexError, tomllib.TOMLDecodeError):
        pass
    return scanner.positions


class Cursor:
    """A place in a TOML text and the reading every scanner of it needs: this module's and the EDF
    pre-scan's (``tomlsyntax``), which differ in what they do with a mistake. Offsets count characters."""

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.i = 0
        self._line_starts = [0] + [index + 1 for index, char in enumerate(text) if char == "\n"]
        self._arrays: dict = {}  # path of an array of tables -> index of its current element
        self._never_closed: dict = {}  # quote -> bytearray: 1 where reading a multi-line string on never closes it

    def where(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def line_end(self, offset: int) -> int:
        """Where the line of ``offset`` ends: at its \\n (its \\r\\n), or at the end of the text."""
        end = self.text.find("\n", offset)
        end = self.n if end < 0 else end
        return end - 1 if end > offset and self.text[end - 1] == "\r" else end

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < self.n else ""

    def skip_blank(self, newlines: bool) -> None:
        """Spaces and tabs; with ``newlines``, line ends and comments too."""
        while self.i < self.n:
            char = self.text[self.i]
            if char in " \t" or (newlines and char in "\r\n"):
                self.i += 1
            elif char == "#" and newlines:
                self.i = self.line_end(self.i)
            else:
                return

    def dotted_key(self) -> tuple[list | None, int]:
        """A dotted key from self.i: its parts and the offset just after the last one; parts None when there
        is no key. A quoted part is read by ``quoted_key_part``; one not closed ends the key there."""
        parts: list = []
        end = self.i
        while True:
            self.skip_blank(newlines=False)
            char = self.peek()
            if char and char in "\"'":
                part, closed = self.quoted_key_part()
                parts.append(part)
                end = self.i
                if not closed:
                    return parts, end
            else:
                start = self.i
                while self.i < self.n and self.text[self.i] in _BARE_KEY:
                    self.i += 1
                if self.i == start:
                    return None, end
                parts.append(self.text[start:self.i])
                end = self.i
            self.skip_blank(newlines=False)
            if self.peek() != ".":
                return parts, end
            self.i += 1

    def quoted_key_part(self) -> tuple[str, bool]:
        """The quoted key part at self.i, read past; and whether it was closed."""
        raise NotImplementedError

    def multiline_string_end(self, start: int) -> int:
        """Just after the multi-line string opened at ``start`` (its \"\"\" or '''); -1 when it is never closed."""
        quote = self.text[start]
        never = self._never_closed.get(quote)
        j = start + 3
        while j < self.n:
            if never is not None and never[j]:
                break  # read on from here once already, to the end of the text, without a closing delimiter
            if quote == '"' and self.text[j] == "\\":
                j += 2
                continue
            if self.text.startswith(quote * 3, j):
                j += 3
                # A closing delimiter may be preceded inside the string by up to two quotes.
                extra = 0
                while j < self.n and self.text[j] == quote and extra < 2:
                    j += 1
                    extra += 1
                return j
            j += 1
        self._mark_never_closed(quote, start + 3)
        return -1

    def _mark_never_closed(self, quote: str, j: int) -> None:
        """Where reading a multi-line string from ``j`` went, none closes it: marked, so that the next string
        not closed (the pre-scan reads on past one) stops where its reading joins this one. Without it a text
        of lines that each open a multi-line string after a backslash (it escapes the first quote of the next
        line's opening, so none closes) is read to its end once per line."""
        never = self._never_closed.setdefault(quote, bytearray(self.n))
        while j < self.n and not never[j]:
            never[j] = 1
            j += 2 if quote == '"' and self.text[j] == "\\" else 1

    def table_of_header(self, parts, array: bool) -> tuple[Path, Path]:
        """A [header]'s (or [[header]]'s) path, and the table its keys go to: for [[a]], a's next element."""
        parts = tuple(parts)
        path = self._in_arrays(parts[:-1]) + parts[-1:]  # [a.b] after [[a]]: b of a's last element
        if not array:
            return path, path
        index = self._arrays.get(path, -1) + 1
        self._arrays[path] = index
        return path, path + (index,)

    def _in_arrays(self, path: Path) -> Path:
        """The path with the index of the current element after each array of tables it goes through."""
        out: Path = ()
        for part in path:
            out += (part,)
            if out in self._arrays:
                out += (self._arrays[out],)
        return out


class _Scanner(Cursor):
    def __init__(self, text: str):
        super().__init__(text)
        self.positions = Positions()

    def skip_to_line_end(self) -> None:
        self.skip_blank(newlines=False)
        if self.peek() == "#":
            self.i = self.line_end(self.i)

    def document(self) -> None:
        current: Path = ()
        while True:
            self.skip_blank(newlines=True)
            if self.i >= self.n:
                return
            start = self.i
            if self.peek() == "[":
                aot = self.peek(1) == "["
                self.i += 2 if aot else 1
                parts = self.key()
                self.skip_blank(newlines=False)
                closing = "]]" if aot else "]"
                if not self.text.startswith(closing, self.i):
                    raise _Stop
                self.i += len(closing)
                path, current = self.table_of_header(parts, aot)
                self.positions.keys.setdefault(current, self.where(start))
                self.positions.tables.setdefault(current, []).append(self.where(start))
                for depth in range(1, len(path)):
                    self.positions.keys.setdefault(path[:depth], self.where(start))
            else:
                self.key_value(current)
            self.skip_to_line_end()

    def key_value(self, table: Path) -> None:
        start = self.i
        parts = self.key()
        self.skip_blank(newlines=False)
        if self.peek() != "=":
            raise _Stop
        self.i += 1
        self.skip_blank(newlines=False)
        full = table + parts
        for depth in range(len(table) + 1, len(full) + 1):
            self.positions.keys.setdefault(full[:depth], self.where(start))
        self.value(full)

    def key(self) -> Path:
        parts, _ = self.dotted_key()
        if parts is None:
            raise _Stop
        return tuple(parts)

    def quoted_key_part(self) -> tuple[str, bool]:
        if self.peek() == '"':
            end = self._basic_string_end(self.i)
            raw = self.text[self.i:end]
            self.i = end
            return tomllib.loads(f"k = {raw}")["k"], True
        end = self.text.find("'", self.i + 1)
        if end < 0:
            raise _Stop
        part = self.text[self.i + 1:end]
        self.i = end + 1
        return part, True

    def _basic_string_end(self, start: int) -> int:
        j = start + 1
        while j < self.n:
            char = self.text[j]
            if char == "\\":
                j += 2
                continue
            if char == '"':
                return j + 1
            if char == "\n":
                raise _Stop
            j += 1
        raise _Stop

    def value(self, path: Path) -> None:
        self.positions.values.setdefault(path, self.where(self.i))
        text, i = self.text, self.i
        if text.startswith('"""', i) or text.startswith("'''", i):
            end = self.multiline_string_end(i)
            if end < 0:
                raise _Stop
            self.i = end
            return
        if text.startswith('"', i):
            self.i = self._basic_string_end(i)
            return
        if text.startswith("'", i):
            end = text.find("'", i + 1)
            if end < 0:
                raise _Stop
            self.i = end + 1
            return
        if text.startswith("[", i):
            self.i += 1
            index = 0
            while True:
                self.skip_blank(newlines=True)
                if self.peek() == "]":
                    self.i += 1
                    return
                if self.i >= self.n:
                    raise _Stop
                self.value(path + (index,))
                index += 1
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.i += 1
                elif self.peek() != "]":
                    raise _Stop
        if text.startswith("{", i):
            self.i += 1
            while True:
                self.skip_blank(newlines=False)
                if self.peek() == "}":
                    self.i += 1
                    return
                if self.i >= self.n:
                    raise _Stop
                self.key_value(path)
                self.skip_blank(newlines=False)
                if self.peek() == ",":
                    self.i += 1
                elif self.peek() != "}":
                    raise _Stop
        start = self.i
        while self.i < self.n and text[self.i] not in _SCALAR_END:
            self.i += 1
        if self.i == start:
            raise _Stop
