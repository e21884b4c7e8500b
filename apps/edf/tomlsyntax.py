"""Say exactly what is wrong with an EDF that is not TOML, and read past it.

``tomllib`` is the judge of TOML, but it stops at the first error and its message is written for
parser authors: an unterminated string is "Illegal character '\\n'", a ``[annotations`` header
without its ``]`` after an earlier ``[annotations]`` is "Cannot declare ('annotations',) twice".
This module

* pre-scans the raw text (``scan``) like a TOML lexer: strings (basic, literal, multi-line),
  brackets, comments, table headers and ``key = value`` statements. It finds on its own the
  mistakes whose place tomllib reports badly (a string not closed before the end of its line, a
  table header without its ``]``, an array or inline table that is never closed) and records each
  statement (its lines, its key path) and where every key and table was first defined;
* explains what tomllib reports (``diagnose``) with that record: a key set twice, a table defined
  twice by two headers, a table defined once by dotted keys and once by a header (the two
  annotation spellings), a value redefined as a table;
* repairs the text (closing quotes and brackets where they are missing, blanking statements that
  cannot stay) and parses again, until the rest parses, so the other checks can run on it.

Repairs never add or remove a line, so line numbers stay those of the original text. Lines and
columns are 1-based; columns count characters. Plain Python: no Django.
"""
from __future__ import annotations

import ast
import bisect
import re
import tomllib
from dataclasses import dataclass, field

from .tomlpos import Cursor

TOML_SYNTAX, TABLE_TWICE, KEY_TWICE = "toml-syntax", "toml-table-twice", "toml-key-twice"

_KEY_PART = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_STATEMENT_LIKE = re.compile(rf"[ \t]*{_KEY_PART}(?:[ \t]*\.[ \t]*{_KEY_PART})*[ \t]*=(?!=)")
_HEADER_LIKE = re.compile(r"[ \t]*\[\[?[ \t]*([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*\]?\]?[ \t]*(?:#.*)?\r?$")
_NOT_A_TABLE_NAME = {"true", "false", "inf", "nan"}
_MAX_ROUNDS = 25  # errors told and read past, after those the pre-scan finds; a few on very large texts
_LARGE = 100_000
_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$|\s*\(at end of document\)$")


@dataclass(frozen=True)
class Issue:
    """One syntax finding: always an error."""
    rule: str
    line: int
    column: int
    path: tuple
    message: str
    hint: str | None


@dataclass(frozen=True)
class Definition:
    line: int
    column: int
    how: str  # "header", "array-header", "value", "dotted" (a table made by a dotted key)
    text: str  # the key or header as written


@dataclass
class Statement:
    kind: str  # "header", "array-header", "value", "other" (a line the scanner could not read)
    line: int
    column: int
    end_line: int
    table: tuple  # the table in effect before the statement
    path: tuple  # headers: the table; values: table + key
    text: str  # the key or header as written


@dataclass
class Scan:
    issues: list[Issue] = field(default_factory=list)
    statements: list[Statement] = field(default_factory=list)
    definitions: dict = field(default_factory=dict)  # path -> [Definition, ...] in text order
    inserts: list[tuple[int, int, str]] = field(default_factory=list)  # (offset, sequence, text)
    blank: set[int] = field(default_factory=set)  # lines to blank to read past an issue

    def statement_at(self, line: int) -> Statement | None:
        """The statement on ``line`` (statements are in text order and do not overlap)."""
        index = bisect.bisect_right([statement.line for statement in self.statements], line) - 1
        if index >= 0 and self.statements[index].line <= line <= self.statements[index].end_line:
            return self.statements[index]
        return None

    def first(self, path: tuple, before: int | None = None) -> Definition | None:
        for definition in self.definitions.get(tuple(path), []):
            if before is None or definition.line < before:
                return definition
        return None

    def repaired(self, text: str) -> str:
        """The text with the inserts made (at one offset in the order they were recorded) and the lines blanked:
        built from pieces in one pass, as a copy of the text per insert is quadratic on a text full of them."""
        pieces, previous = [], 0
        for offset, _, insert in sorted(self.inserts):
            pieces += (text[previous:offset], insert)
            previous = offset
        pieces.append(text[previous:])
        return blank_lines("".join(pieces), self.blank)

    def inserted_lines(self, text: str) -> set[int]:
        """The lines of ``text`` where an insert goes (one count of the text's line ends, not one per insert)."""
        starts = [0] + [match.end() for match in re.finditer("\n", text)]
        return {bisect.bisect_right(starts, offset) for offset, _, _ in self.inserts}


@dataclass
class Diagnosis:
    issues: list[Issue]
    data: dict | None  # the recovered text parsed, when it could be
    text: str | None  # the recovered text
    dropped: set[int]  # lines blanked in the recovered text
    repaired: set[int]  # lines where a quote or bracket was added


def blank_lines(text: str, lines) -> str:
    if not lines:
        return text
    out = text.split("\n")
    for number in lines:
        if 1 <= number <= len(out):
            out[number - 1] = "\r" if out[number - 1].endswith("\r") else ""
    return "\n".join(out).replace("\r\n", "\n") if "\r" in text else "\n".join(out)


def path_text(path) -> str:
    """('annotations', 'com', 'hooks', 'ssh', 'enabled') -> 'annotations."com.hooks.ssh.enabled"'; arrays as [i]."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            bare = re.fullmatch(r"[A-Za-z0-9_-]+", part)
            out += ("." if out else "") + (part if bare else '"' + part.replace('"', '\\"') + '"')
    return out


# --------------------------------------------------------------------------------------------
# The pre-scan

def scan(text: str) -> Scan:
    lexer = _Lexer(text)
    lexer.document()
    return lexer.result


class _Lexer(Cursor):
    """The positions, blanks, keys and multi-line strings are read as ``tomlpos`` reads them (``Cursor``);
    what differs is that a mistake is recorded and read past here, where ``tomlpos`` stops."""

    def __init__(self, text: str):
        super().__init__(text)
        self.result = Scan()
        self._sequence = 0
        self._blanked = (0, -1)  # lines blanked after a multi-line string not closed: [from, to)

    # -- positions -------------------------------------------------------------------------------
    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        return self.text[start:self.line_end(start)]

    def insert(self, offset: int, text: str) -> None:
        self._sequence += 1
        self.result.inserts.append((offset, self._sequence, text))

    def issue(self, rule, offset, message, hint, path=()) -> None:
        line, column = self.where(offset)
        self.result.issues.append(Issue(rule, line, column, tuple(path), message, hint))

    def define(self, path, offset, how, text) -> None:
        line, column = self.where(offset)
        self.result.definitions.setdefault(tuple(path), []).append(Definition(line, column, how, text))

    # -- reading ---------------------------------------------------------------------------------
    def document(self) -> None:
        table: tuple = ()
        while True:
            self.skip_blank(newlines=True)
            if self.i >= self.n:
                return
            start = self.i
            if self.text[start] == "[":
                table = self.header(table)
            else:
                self.key_value(table)
            self.rest_of_line()

    def rest_of_line(self) -> None:
        """Whatever follows a statement on its line (a comment, or text tomllib will refuse)."""
        while self.i < self.n and self.text[self.i] != "\n":
            if self.text[self.i] in "\"'":
                self.string(())
            elif self.text[self.i] == "#":
                self.i = self.line_end(self.i)
            else:
                self.i += 1

    def header(self, table: tuple) -> tuple:
        start = self.i
        array = self.text.startswith("[[", start)
        self.i += 2 if array else 1
        parts, key_end = self.dotted_key()
        line, column = self.where(start)
        written = "[" * (1 + array) + self.text[start + 1 + array:key_end].strip()
        if parts is None:
            self.result.statements.append(Statement("other", line, column, line, table, (), written))
            return table
        self.skip_blank(newlines=False)
        closing = "]]" if array else "]"
        if self.text.startswith(closing, self.i):
            self.i += len(closing)
        elif array and self.text.startswith("]", self.i) and self._blank_after(self.i + 1):
            self.issue(TOML_SYNTAX, start, f"{written}] is missing a ]: an array-of-tables header ends with ]]",
                       f"Write {written}]].", parts)
            self.insert(self.i + 1, "]")
            self.i += 1
        elif self.i >= self.n or self.text[self.i] in "#\r\n":
            shown = written + closing
            self.issue(TOML_SYNTAX, start, f"{written} is missing its closing {closing}",
                       f"Write {shown}: add {closing} after '{written.lstrip('[')}' on line {line}.", parts)
            self.insert(key_end, closing)
        else:  # [a b] and the like: tomllib says what it expected
            self.result.statements.append(Statement("other", line, column, line, table, tuple(parts), written))
            return table
        path, current = self.table_of_header(parts, array)
        kind = "array-header" if array else "header"
        self.define(path, start, kind, written + closing)
        self.result.statements.append(Statement(kind, line, column, line, table, path, written + closing))
        return current

    def _blank_after(self, offset: int) -> bool:
        rest = self.text[offset:self.line_end(offset)].strip()
        return not rest or rest.startswith("#")

    def quoted_key_part(self) -> tuple[str, bool]:
        start = self.i
        closed = self.string((), key=True)
        raw = self.text[start:self.i]
        if closed and raw[0] == '"':
            try:
                return tomllib.loads(f"k = {raw}")["k"], True
            except tomllib.TOMLDecodeError:
                return raw[1:-1], True
        return (raw[1:-1] if closed else raw[1:]), closed

    def key_value(self, table: tuple) -> None:
        start = self.i
        line, column = self.where(start)
        parts, key_end = self.dotted_key()
        self.skip_blank(newlines=False)
        written = self.text[start:key_end].strip()
        if parts and written[:1] and written[:1] in "\"'" and "=" in written and not self.text.startswith("=", self.i):
            # "com.hooks.ssh.enabled = "true": the key's closing quote is missing, so the key ran on to the value's
            quote = written[0]
            name = written[1:written.index("=")].rstrip()
            self.issue(TOML_SYNTAX, start, f"the quoted key opened at line {line} col {column} is not closed before "
                       f"the '=': add the closing quote ({quote})",
                       f"e.g. {quote}{name}{quote} = ...", ())
            self.result.blank.add(line)
            self.i = self.line_end(start)
            self.result.statements.append(Statement("other", line, column, line, table, (), written))
            return
        if parts is None or not self.text.startswith("=", self.i):
            self.value((), line)  # keep strings and brackets in step even on a line tomllib refuses
            self.result.statements.append(Statement("other", line, column, self.where(self.i)[0], table, (), written))
            return
        self.i += 1
        full = table + tuple(parts)
        for depth in range(len(table) + 1, len(full)):
            self.define(full[:depth], start, "dotted", written)
        self.define(full, start, "value", written)
        self.value(full, line)
        self.result.statements.append(Statement("value", line, column, self.where(max(self.i - 1, start))[0], table, full, written))

    # -- values ----------------------------------------------------------------------------------
    def value(self, path: tuple, line: int) -> None:
        """Read a value up to the end of its statement: the end of the line outside brackets."""
        stack: list[tuple[str, int]] = []  # open brackets and where
        content_end = self.i  # just after the last thing that is not a blank or a comment
        while self.i < self.n:
            char = self.text[self.i]
            if char == "\n":
                while stack and stack[-1][0] == "{":
                    opened = stack.pop()[1]
                    self.issue(TOML_SYNTAX, opened, f"the inline table opened at line {self.where(opened)[0]} col "
                               f"{self.where(opened)[1]} is not closed before the end of the line: add the closing }}",
                               "An inline table { ... } stays on one line; use a [table] for longer ones.", path)
                    self.insert(content_end, "}")
                if not stack:
                    return
                following = self.text[self.i + 1:self.line_end(self.i + 1)]
                if self.i + 1 >= self.n or self._starts_a_statement(following):
                    self._unclosed(stack, content_end, path)
                    return
                self.i += 1
                continue
            if char == "#":
                self.i = self.line_end(self.i)
                continue
            if char in "\"'":
                self.string(stack, path=path)
                content_end = self.i
                continue
            if char in "[{":
                stack.append((char, self.i))
            elif char in "]}":
                if stack and stack[-1][0] == {"]": "[", "}": "{"}[char]:
                    stack.pop()
            self.i += 1
            if char not in " \t\r":
                content_end = self.i
        if stack:
            while stack and stack[-1][0] == "{":
                opened = stack.pop()[1]
                self.issue(TOML_SYNTAX, opened, f"the inline table opened at line {self.where(opened)[0]} col "
                           f"{self.where(opened)[1]} is not closed: add the closing }}", None, path)
                self.insert(content_end, "}")
            if stack:
                self._unclosed(stack, content_end, path)

    def _blank_to_next_statement(self, first: int) -> None:
        """Blank the lines from ``first`` up to the next one that looks like a statement. The last stretch
        blanked is kept: an unclosed multi-line string opened inside it has the same end, whose lines are
        already blank (looking again would read the lines between once per string)."""
        known_from, known = self._blanked
        if known_from <= first <= known:
            return
        end = first
        while end <= len(self._line_starts) and not self._starts_a_statement(self.line_text(end)):
            end += 1
        self.result.blank.update(range(first, end))
        self._blanked = (first, end)

    def _starts_a_statement(self, line: str) -> bool:
        if _STATEMENT_LIKE.match(line):
            return True
        match = _HEADER_LIKE.match(line)
        return bool(match and match.group(1).lower() not in _NOT_A_TABLE_NAME)

    def _unclosed(self, stack, content_end: int, path) -> None:
        """Arrays still open where the next statement starts (or at the end of the text)."""
        opened = stack[0][1]
        line, column = self.where(opened)
        last = self.where(max(content_end - 1, opened))[0]
        closing = "".join("]" if kind == "[" else "}" for kind, _ in reversed(stack))
        self.issue(TOML_SYNTAX, opened, f"the array opened at line {line} col {column} is not closed: "
                   f"add {closing} after its last element (line {last})",
                   "Every [ needs its ]; a comma may follow the last element.", path)
        self.insert(content_end, closing)
        stack.clear()

    def string(self, stack, path=(), key: bool = False) -> bool:
        """Read a string starting at self.i; record it when it is not closed. True when closed."""
        start = self.i
        quote = self.text[start]
        triple = self.text.startswith(quote * 3, start) and not key
        if triple:
            end = self.multiline_string_end(start)
            if end >= 0:
                self.i = end
                return True
            line, column = self.where(start)
            self.issue(TOML_SYNTAX, start, f"the multi-line string opened at line {line} col {column} is never closed: "
                       f"add the closing {quote * 3}", f"A multi-line string ends with {quote * 3}.", path)
            # Read on from the next line that looks like a statement: the lines between were meant as the string.
            self.result.blank.add(line)
            self._blank_to_next_statement(line + 1)
            self.i = self.line_end(start)
            return False
        j = start + 1
        while j < self.n and self.text[j] != "\n":
            char = self.text[j]
            if quote == '"' and char == "\\" and j + 1 < self.n and self.text[j + 1] != "\n":
                j += 2
                continue
            if char == quote:
                self.i = j + 1
                return True
            j += 1
        # not closed before the end of the line
        end = self.line_end(start)
        line, column = self.where(start)
        rest = self.text[start + 1:end]
        cut = len(rest.rstrip())
        comment = re.search(r"\s+#", rest)
        if comment and not key:
            cut = comment.start()
        elif stack:
            cut = len(rest.rstrip().rstrip("]},").rstrip()) if rest.rstrip().rstrip("]},").rstrip() else cut
        close = quote
        if quote == '"' and (len(rest[:cut]) - len(rest[:cut].rstrip("\\"))) % 2:
            close = '\\"'  # "C:\ would escape the quote added after it
        line_text = self.line_text(line)
        offset_in_line = start + 1 + cut - self._line_starts[line - 1]
        fixed = line_text[:offset_in_line] + quote + line_text[offset_in_line:]
        name = "key" if key else "string"
        self.issue(TOML_SYNTAX, start, f"{name} opened at line {line} col {column} is not closed before the end of the "
                   f"line: add the closing quote ({quote})",
                   f"e.g. {fixed.strip()}" if len(fixed.strip()) <= 120 else f"Add {quote} where the {name} ends.", path)
        self.insert(start + 1 + cut, close)
        self.i = start + 1 + cut  # what follows the added quote (a comment, the closing brackets) is read on
        return False


# --------------------------------------------------------------------------------------------
# Explaining tomllib, and reading past errors

def diagnose(text: str) -> Diagnosis:
    """The syntax issues of a text tomllib refuses, and the text with them repaired, parsed."""
    first = scan(text)
    issues = list(first.issues)
    lexical_lines = {issue.line for issue in issues}
    work = first.repaired(text)
    dropped = set(first.blank)
    repaired = first.inserted_lines(text)
    seen: set = set()
    for _ in range(_MAX_ROUNDS if len(text) <= _LARGE else 3):
        try:
            return Diagnosis(issues, tomllib.loads(work), work, dropped, repaired)
        except tomllib.TOMLDecodeError as exc:
            # The first scan describes the repaired text too: repairs keep every statement on its lines.
            issue, blank = explain(work, first, str(exc))
            key = (issue.rule, issue.line)
            if key not in seen and not (issue.rule == TOML_SYNTAX and issue.line in lexical_lines):
                issues.append(issue)
            seen.add(key)
            blank = {line for line in blank if line not in dropped}
            if not blank:
                break
            work = blank_lines(work, blank)
            dropped |= blank
        except RecursionError:  # tomllib recurses once per level of nested arrays / inline tables
            issues.append(Issue(TOML_SYNTAX, 1, 1, (), "TOML: arrays or inline tables are nested too deeply to read",
                                "An EDF needs at most two levels of brackets."))
            break
    if not issues:  # never: tomllib refused the text, so something was reported above
        issues.append(Issue(TOML_SYNTAX, 1, 1, (), "the text is not valid TOML", None))
    return Diagnosis(issues, None, None, dropped, repaired)


def _names(message: str) -> tuple:
    match = re.search(r"\((.*)\)", message)
    if not match:
        return ()
    try:
        return tuple(str(name) for name in ast.literal_eval("(" + match.group(1).rstrip().rstrip(",") + ",)"))
    except (ValueError, SyntaxError):
        return ()


_SPELLINGS = ("The two annotation spellings cannot be mixed for one hook: use either dotted keys under [annotations] "
              "(com.hooks.ssh.enabled = \"true\") or an [annotations.com.hooks.ssh] table, not both.")


def _section(scan_: Scan, statement: Statement) -> set[int]:
    """The header's line and, unless its keys would fall into the same table, its keys up to the next header."""
    before = [s for s in scan_.statements if s.kind in ("header", "array-header") and s.line < statement.line]
    if before and before[-1].path == statement.path and before[-1].kind == "header":
        return {statement.line}
    after = [s.line for s in scan_.statements if s.kind in ("header", "array-header") and s.line > statement.line]
    end = (after[0] - 1) if after else max([s.end_line for s in scan_.statements] + [statement.line])
    return set(range(statement.line, end + 1))


def explain(text: str, scan_: Scan, raw: str) -> tuple[Issue, set[int]]:
    """One tomllib error told plainly, with the lines to blank to read past it."""
    match = _AT.search(raw)
    message = _AT.sub("", raw) if match else raw
    if match and match.group(1):
        line, column = int(match.group(1)), int(match.group(2))
    else:
        line = text.count("\n") + 1
        column = len(text.rsplit("\n", 1)[-1]) + 1
        last = [s for s in scan_.statements if s.line <= line]
        if last:
            line, column = last[-1].line, last[-1].column
    statement = scan_.statement_at(line)
    blank = ({statement.line} | set(range(statement.line, statement.end_line + 1))) if statement else {line}
    at = (statement.line, statement.column) if statement else (line, max(column, 1))

    if message.startswith("Cannot declare") and statement and statement.kind in ("header", "array-header"):
        names = _names(message) or statement.path
        table = path_text(names)
        earlier = scan_.first(names, before=statement.line)
        blank = _section(scan_, statement)
        if earlier is None:
            return Issue(TABLE_TWICE, *at, names, f"[{table}] is defined twice", "Define each table once."), blank
        if earlier.how == "header":
            return Issue(TABLE_TWICE, *at, names, f"[{table}] is defined twice (first at line {earlier.line})",
                         f"Merge them: move the keys below line {statement.line} under the [{table}] of line "
                         f"{earlier.line}, then delete this header."), blank
        if earlier.how == "dotted":
            hint = _SPELLINGS if names[:1] == ("annotations",) else (
                f"Use one spelling: either the dotted key {earlier.text} = ... or a [{table}] table, not both.")
            return Issue(TABLE_TWICE, *at, names, f"[{table}] is defined twice (first by the dotted key "
                         f"{earlier.text} at line {earlier.line})", hint), blank
        if earlier.how == "array-header":
            return Issue(TABLE_TWICE, *at, names, f"[{table}] is defined twice (first as the array of tables "
                         f"[[{table}]] at line {earlier.line})", "Use either [[...]] for every element or one [...] table."), blank
        return Issue(KEY_TWICE, *at, names, f"{table} is set to a value at line {earlier.line}; [{table}] cannot "
                     "make it a table as well", "Keep one of the two."), blank

    if message.startswith("Cannot redefine namespace") and statement and statement.kind == "value":
        names = _names(message)
        table = path_text(names)
        earlier = scan_.first(names, before=statement.line)
        where = f" at line {earlier.line}" if earlier else ""
        hint = _SPELLINGS if names[:1] == ("annotations",) else (
            f"Write {statement.text} under [{table}] without the prefix, or use one spelling for the table.")
        return Issue(TABLE_TWICE, *at, names, f"[{table}] is defined twice (first as a table{where}, then by the "
                     f"dotted key {statement.text} here)", hint), blank

    if message.startswith("Duplicate inline table key"):
        name = message.split("key", 1)[1].strip()
        return Issue(KEY_TWICE, line, max(column, 1), statement.path if statement else (),
                     f"key {name} is set twice in the same inline table", "Keep one of them."), blank

    if (message.startswith(("Cannot overwrite a value", "Cannot mutate immutable namespace"))
            and statement and statement.kind in ("value", "header", "array-header")):
        path = statement.path
        where = f" in [{path_text(statement.table)}]" if statement.table else ""
        earlier = scan_.first(path, before=statement.line)
        if statement.kind != "value":
            blank = _section(scan_, statement)
            first = f" at line {earlier.line}" if earlier else ""
            return Issue(KEY_TWICE, *at, path, f"{path_text(path)} is set to a value{first}; [{path_text(path)}] "
                         "cannot make it a table as well", "Keep one of the two: the value or the table."), blank
        if earlier is not None and earlier.how == "value":
            return Issue(KEY_TWICE, *at, path, f"key {statement.text} is set twice{where} (first at line {earlier.line})",
                         "TOML allows each key once per table: keep one of them."), blank
        if earlier is not None and earlier.how in ("dotted", "header"):
            origin = f"the dotted key {earlier.text}" if earlier.how == "dotted" else f"the header {earlier.text}"
            return Issue(KEY_TWICE, *at, path, f"{statement.text} is already a table (made by {origin} at line "
                         f"{earlier.line}); it cannot also be set to a value", "Keep one of the two."), blank
        for depth in range(len(statement.table) + 1, len(path)):
            prefix = scan_.first(path[:depth], before=statement.line)
            if prefix is not None and prefix.how == "value":
                return Issue(KEY_TWICE, *at, path, f"{path_text(path[:depth])} is set to a value at line {prefix.line}, "
                             f"so {statement.text} cannot add a key to it", "Keep one of the two."), blank
        return Issue(KEY_TWICE, *at, path, f"key {statement.text} is set twice{where}",
                     "TOML allows each key once per table: keep one of them."), blank

    # Anything else: tomllib's words, with a hint where one helps.
    lines = text.splitlines()
    line_text = lines[line - 1] if 0 < line <= len(lines) else ""
    hint = None
    if message.startswith(("Invalid value", "Invalid statement")):
        key, sep, rest = line_text.partition("=")
        rest = rest.strip()
        if sep and rest and rest[0] not in "\"'[{" and not re.match(r"[-+0-9]|true|false|inf|nan", rest):
            hint = f"Strings need quotes: {key.strip()} = \"{rest}\""
    elif "Expected '=' after a key" in message:
        hint = "A line is either KEY = VALUE or a [table] header."
    elif "Unclosed" in message or "Unterminated" in message or "Illegal character" in message:
        hint = "Check the quotes and brackets on this line and the ones above."
    return Issue(TOML_SYNTAX, line, max(column, 1), (), f"TOML: {message}", hint), blank
