"""Read what vetting tools print into :class:`records.Run`.

* ``vetnode`` — vetnode 0.1.x as it lands in a job's output: rank 0's progress lines
  (``Evaluating <name>: ✅  ❌ …``, glyphs in connection order, so only counts) and its grid table
  (one row per node, one glyph per *local* rank summing up every evaluation), plus, with
  ``--verbose``, every rank's ``Node: <host> \\t result:<EvalResult>`` lines (pydantic's text form,
  the metrics as a Python literal) and ``[<host>-<rank>: Vetted|Cordon]`` tags (no newline after
  them, so they may sit at the start of another rank's line). ``srun -l`` labels are understood.
  Without ``--verbose`` the failing evaluation of a node is named when only one evaluation failed
  anywhere; otherwise the result says which evaluations it could have been.
  An evaluation that raised prints ``Skipped: <name> (error: …)`` on its rank and ❓ on rank 0: it is an
  ``unknown`` result of that rank with the error as its message (vetnode does not cordon for it).
* ``vetnode-legacy`` — vetnode ≤ 0.0.13: ``Running sanity checks: <protocol> on node:<host>`` (≤ 0.0.12),
  result lines (``test_name=… passed=True …``; ``rank=… eval_id=…`` in 0.0.13) and ``Vetted: <host>`` /
  ``Cordon: <host>`` ending each process's block. ``Node: <host> \t unexpected exception: <error>``
  (0.0.8: an evaluation raised, and vetnode cordoned the node for it) is a failed result with status
  ERROR, named by the traceback's ``vetnode/evaluations/<module>.py`` frame where the job output has it.
  ``Skipped: <name> (error: …)`` (0.0.8: the evaluation could not be loaded or verified; 0.0.13: it
  raised, on that rank) is an ``unknown`` result of the node whose verdict ends the block, with a warning
  that says on how many ranks it raised.
* ``dcgm-diag`` — ``dcgmi diag -r N -j``: DCGM 4.x (``"DCGM Diagnostic"``, ``entity_groups``,
  ``metadata``) and 3.x (``"DCGM GPU Diagnostic"``, ``gpu_id``); one result per test and GPU. A
  failure with ISOLATE severity (isolate the GPU) is *critical*.
* ``json`` — Belvedere's run document (``POST /api/v1/vetting/runs/``), close to vetnode's EvalResult.

Problems come back as :class:`records.ParseError` with every problem's line (and column): a run is
stored whole or not at all. Lines that are none of the above (the rest of a job's output) are
ignored. Plain Python: no Django.
"""
from __future__ import annotations

import ast
import json
import re
from datetime import datetime, timezone

from apps.core.json_positions import loads_with_lines

from .records import HEALTH_EXIT_CODES, KINDS, VETNODE_STATUS_NUMBERS, ParseError, Result, Run, outcome_of

FORMATS = ("auto", "vetnode", "vetnode-legacy", "dcgm-diag", "json")
MAX_RESULTS = 200_000
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SRUN_LABEL = re.compile(r"^\s*\d+:\s")
_TAG = re.compile(r"\[([^\[\]\s]+)-(\d+): ?(Vetted|Cordon)\] ?")
_RESULT = re.compile(r"^Node: (?P<host>\S+)\s*\t?\s*result:(?P<body>.*)$")
_GLYPHS = {"✅": "SUCCESS", "❌": "FAILED", "⏭": "SKIPPED", "❓": "UNKNOWN", "🛠": "SUCCESS"}
_EVALUATING = re.compile(r"^Evaluating (?P<name>.+?):(?P<rest>.*)$")
_SKIPPED = re.compile(r"Skipped: (?P<name>.+?) \(error: (?P<error>.*)\)")
_EXCEPTION = re.compile(r"^Node: (?P<host>\S+)\s*\t?\s*unexpected exception: ?(?P<error>.*)$")
_TRACE_EVAL = re.compile(r'^File "[^"]*[/\\]vetnode[/\\]evaluations[/\\](?P<module>\w+)\.py", line \d+')
_SRUN_RANK = re.compile(r"^\s*(\d+):\s")
_LEGACY_HEADER = re.compile(r"^Running sanity checks: (?P<name>.*) on node:(?P<host>\S+)\s*$")
_VERDICT = re.compile(r"^(?P<verdict>Vetted|Cordon): (?P<host>\S+)\s*$")
_ENUM = re.compile(r"<\w+\.(?P<name>[A-Z_]+): (?P<number>\d+)>")


def detect(text: str) -> str:
    head = text.lstrip()[:4096]
    if head.startswith("{") or "\n{" in text[:4096] or "DCGM Diagnostic" in head or "DCGM GPU Diagnostic" in head:
        return "dcgm-diag" if ("DCGM Diagnostic" in text[:20000] or "DCGM GPU Diagnostic" in text[:20000]) else "json"
    if "Running sanity checks:" in text or re.search(r"^(?:\d+:\s)?(?:Vetted|Cordon): \S+", text, re.MULTILINE):
        return "vetnode-legacy"
    if "Igniting workers:" in text or "| Node " in text or re.search(r"result:rank=\d+", text) or _TAG.search(text):
        return "vetnode"
    raise ParseError([(1, None, "this is neither vetnode output, nor dcgmi diag JSON, nor a Belvedere run document")],
                     "vetting upload")


def parse(text: str, fmt: str = "auto", *, host: str | None = None) -> Run:
    if fmt not in FORMATS:
        raise ParseError([(None, None, f"unknown format {fmt!r}; choose {', '.join(FORMATS)}")], "vetting upload")
    if not text.strip():
        raise ParseError([(1, None, "the upload is empty")], "vetting upload")
    fmt = detect(text) if fmt == "auto" else fmt
    if fmt == "vetnode":
        return parse_vetnode(text)
    if fmt == "vetnode-legacy":
        return parse_vetnode_legacy(text)
    if fmt == "dcgm-diag":
        return parse_dcgm_diag(text, host=host)
    return parse_run_document(text)


# ---------------------------------------------------------------------------------------------
# vetnode text


def _lines(text: str):
    """(line number, cleaned line, tags found in it, srun -l label or None) with srun labels, colours and
    tags taken out."""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _ANSI.sub("", raw).rstrip("\r")
        label = _SRUN_RANK.match(line)
        line = _SRUN_LABEL.sub("", line, count=1)
        tags = [(host, int(rank), verdict) for host, rank, verdict in _TAG.findall(line)]
        if tags:
            line = _TAG.sub("", line)
        yield number, line, tags, int(label.group(1)) if label else None


def _raised_message(error: str, cordoned: bool) -> str:
    if cordoned:
        return f"raised {error}: vetnode cordoned the node for it"
    return f"raised {error}: vetnode skipped it and did not cordon the node for it"


def _raised_warnings(raised: list[tuple[str, str]], processes: int) -> list[str]:
    """One warning per evaluation that raised somewhere: ``raised`` holds (name, error) per rank."""
    out = []
    for name in dict.fromkeys(name for name, _ in raised):
        errors = [error for other, error in raised if other == name]
        where = "every rank" if processes and len(errors) >= processes else f"{len(errors)} of {processes or '?'} ranks"
        out.append(f"{name} raised on {where} ({errors[0]}): vetnode skips it and does not cordon the node for it")
    return out


def _literal(text: str, line: int, column: int, problems: list):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        problems.append((line, column, f"cannot read the value {text[:60]!r}"))
        return None


def _fields(body: str, line: int, offset: int, problems: list) -> dict:
    """``key=value`` pairs of pydantic's text form of a model; values as Python literals."""
    out: dict = {}
    i, n = 0, len(body)
    while i < n:
        while i < n and body[i] == " ":
            i += 1
        if i >= n:
            break
        equals = body.find("=", i)
        if equals < 0 or not re.fullmatch(r"[A-Za-z_]\w*", body[i:equals]):
            problems.append((line, offset + i + 1, f"expected field=value, found {body[i:i + 30]!r}"))
            return out
        key, j = body[i:equals], equals + 1
        start = j
        if j < n and body[j] in "'\"":
            quote, j = body[j], j + 1
            while j < n and body[j] != quote:
                j += 2 if body[j] == "\\" else 1
            j += 1
        elif j < n and body[j] == "<":
            j = body.find(">", j) + 1 or n
        elif j < n and body[j] in "{[(":
            depth, quote = 0, None
            while j < n:
                char = body[j]
                if quote:
                    if char == "\\":
                        j += 1
                    elif char == quote:
                        quote = None
                elif char in "'\"":
                    quote = char
                elif char in "{[(":
                    depth += 1
                elif char in "}])":
                    depth -= 1
                    if depth == 0:
                        j += 1
                        break
                j += 1
            if depth != 0:
                problems.append((line, offset + start + 1, f"{key}: the value is cut off (unbalanced brackets)"))
                return out
        else:
            while j < n and body[j] != " ":
                j += 1
        raw = body[start:j]
        if j > n or (raw[:1] in "'\"" and (len(raw) < 2 or raw[-1] != raw[0])):
            problems.append((line, offset + start + 1, f"{key}: the quoted value is cut off"))
            return out
        enum = _ENUM.fullmatch(raw)
        if enum:
            out[key] = enum.group("name")
        elif raw in ("None", "True", "False") or raw[:1] in "'\"{[(-0123456789":
            out[key] = _literal(raw, line, offset + start + 1, problems)
        else:
            out[key] = raw
        i = j
    return out


def _result_from_fields(host: str, fields: dict, line: int, problems: list) -> Result | None:
    if "test_name" in fields:  # vetnode <= 0.0.12
        status = "SUCCESS" if fields.get("passed") is True else "FAILED" if fields.get("passed") is False else "UNKNOWN"
        name, kind_type = fields.get("test_name"), fields.get("test_type") or ""
        metrics = fields.get("metrics", fields.get("metadata"))
    else:
        status = fields.get("status")
        if isinstance(status, int):
            status = VETNODE_STATUS_NUMBERS.get(status, "UNKNOWN")
        name, kind_type, metrics = fields.get("eval_name"), fields.get("eval_type") or "", fields.get("metrics")
    if not name or not isinstance(name, str):
        problems.append((line, None, "the result has no evaluation name"))
        return None
    if status is None:
        problems.append((line, None, f"the result of '{name}' has no status"))
        return None
    rank, local = fields.get("rank"), fields.get("local_rank")
    elapsed = fields.get("elapsedtime")
    return Result(host=str(fields.get("hostname") or host), eval_name=name[:200], eval_type=str(kind_type)[:200], kind="vetnode",
                  status=str(status), outcome=outcome_of(status), rank=rank if isinstance(rank, int) else None,
                  local_rank=local if isinstance(local, int) else None,
                  elapsed_s=float(elapsed) if isinstance(elapsed, (int, float)) and not isinstance(elapsed, bool) else None,
                  metrics=metrics if isinstance(metrics, (dict, list)) else {}, line=line)


def _result_line(match, stripped: str, number: int, problems: list) -> Result | None:
    """The result on a ``Node: <host> \t result:...`` line; None for vetnode 0.0.13's stray ``result:None``
    or when the line has problems (added to ``problems``)."""
    body = match.group("body").strip()
    if body == "None":
        return None  # vetnode 0.0.13's coordinator prints its own return value
    before = len(problems)
    fields = _fields(body, number, stripped.index("result:") + len("result:"), problems)
    return _result_from_fields(match.group("host"), fields, number, problems) if len(problems) == before else None


def _glyph_tokens(text: str) -> list[str]:
    return [_GLYPHS[char] for char in text if char in _GLYPHS]


def parse_vetnode(text: str) -> Run:
    problems: list = []
    verbose: list[Result] = []
    tags: dict[tuple[str, int], str] = {}
    evaluations: dict[str, list[str]] = {}
    errors_of: dict[str, str] = {}
    table_header: list[str] | None = None
    table: dict[str, list[str]] = {}
    order: list[str] = []
    pending: str | None = None  # an "Evaluating X:" whose glyphs are on the next line
    raised: dict[int | None, list] = {}  # srun label -> (name, error, line) of Skipped lines before the rank's tag
    raised_on: list[tuple[str, int, str, str, int]] = []  # (host, rank, name, error, line)
    for number, line, found_tags, label in _lines(text):
        for host, rank, verdict in found_tags:
            tags[(host, rank)] = verdict
            # the tag ends a rank's --verbose block: what that block said it skipped is that rank's
            raised_on.extend((host, rank, name, error, where) for name, error, where in raised.pop(label, []))
        stripped = line.strip()
        if not stripped:
            continue
        match = _RESULT.match(stripped)
        if match:
            result = _result_line(match, stripped, number, problems)
            if result:
                verbose.append(result)
            continue
        skipped = _SKIPPED.search(stripped)
        if skipped:
            errors_of.setdefault(skipped.group("name"), skipped.group("error"))
            raised.setdefault(label, []).append((skipped.group("name"), skipped.group("error"), number))
        evaluating = _EVALUATING.match(stripped)
        if evaluating:
            name = evaluating.group("name").split("Skipped:")[0].strip()
            glyphs = _glyph_tokens(evaluating.group("rest"))
            evaluations[name] = glyphs
            pending = None if glyphs else name
            continue
        if pending and set(stripped) <= set("".join(_GLYPHS) + " \ufe0f"):
            evaluations[pending] = _glyph_tokens(stripped)
            pending = None
            continue
        if stripped.startswith("|"):
            cells = [cell.strip() for cell in stripped.strip("|").split("|")]
            if cells and cells[0] == "Node":
                table_header = cells
                bad = [i for i, cell in enumerate(cells[1:], start=1) if not re.fullmatch(r"Rank-\d+", cell)]
                if bad:
                    problems.append((number, None, f"table header: expected Rank-0, Rank-1 …, found {cells[bad[0]]!r}"))
                continue
            if table_header is None:
                problems.append((number, 1, "a table row before the table's header (| Node | Rank-0 | …)"))
                continue
            if len(cells) != len(table_header):
                problems.append((number, None, f"the row has {len(cells) - 1} rank cells, the header {len(table_header) - 1}"))
                continue
            statuses = []
            for index, cell in enumerate(cells[1:], start=1):
                glyphs = _glyph_tokens(cell)
                if len(glyphs) != 1:
                    column = line.find(cell) + 1 if cell else None
                    problems.append((number, column, f"{cells[0]} {table_header[index]}: expected one of ✅ ❌ ⏭️ ❓, found {cell!r}"))
                    glyphs = ["UNKNOWN"]
                statuses.append(glyphs[0])
            table[cells[0]] = statuses
            order.append(cells[0])
    if problems:
        raise ParseError(problems, "vetnode output")
    if not verbose and not table and not tags:
        raise ParseError([(1, None, "no vetnode results: neither its summary table nor --verbose result lines")], "vetnode output")
    results = list(verbose)
    local_of = {(r.host, r.rank): r.local_rank for r in verbose if r.rank is not None}
    for host, rank, name, error, where in raised_on:
        if not any(r.host == host and r.rank == rank and r.eval_name == name for r in verbose):
            results.append(Result(host=host, eval_name=name[:200], kind="vetnode", status="UNKNOWN", outcome="unknown", rank=rank,
                                  local_rank=local_of.get((host, rank)), message=_raised_message(error, False), line=where))
    seen = {(r.host, r.local_rank) for r in verbose} | {(r.host, r.rank) for r in verbose if r.local_rank is None}
    tagged = {}
    for host, _ in tags:
        tagged[host] = tagged.get(host, 0) + 1
    warnings = []
    failing = [name for name, glyphs in evaluations.items() if "FAILED" in glyphs]
    unknown_cells = sum(status == "UNKNOWN" for host in order for status in table[host])
    for host in order:
        if tagged.get(host, 0) >= len(table[host]):
            continue  # every rank of the node printed its --verbose block: the summary adds nothing
        for local_rank, status in enumerate(table[host]):
            if (host, local_rank) in seen:
                continue
            results.extend(_from_summary(host, local_rank, status, evaluations, failing, errors_of, unknown_cells))
    verbose_ranks = {(r.host, r.rank) for r in verbose}
    for (host, rank), verdict in sorted(tags.items()):
        if (host, rank) in verbose_ranks:
            if verdict == "Cordon" and not any(r.host == host and r.rank == rank and r.outcome in ("fail", "critical") for r in verbose):
                results.append(Result(host=host, eval_name="vetnode verdict", kind="vetnode", status="FAILED", outcome="fail",
                                      rank=rank, message="vetnode cordoned this rank"))
            continue
        if not any(r.host == host for r in results):
            status = "SUCCESS" if verdict == "Vetted" else "FAILED"
            results.append(Result(host=host, eval_name="vetnode verdict", kind="vetnode", status=status, outcome=outcome_of(status),
                                  rank=rank, message=f"vetnode: {verdict}"))
    for name, error in errors_of.items():
        warnings.append(f"{name} raised ({error}): vetnode shows ❓ and does not cordon the node for it")
    if len(results) > MAX_RESULTS:
        raise ParseError([(None, None, f"{len(results):,} results; at most {MAX_RESULTS:,} per upload")], "vetnode output")
    return Run(source="vetnode", results=results, warnings=warnings)


def _from_summary(host, local_rank, status, evaluations, failing, errors_of, unknown_cells=0) -> list[Result]:
    """Results of one node and local rank from rank 0's summary (no --verbose lines for it). The table's
    glyph sums up every evaluation (a failure wins, ❓ stays only where no evaluation answered), the
    ``Evaluating`` lines only count glyphs: an evaluation's ❓ on a ✅ or ❌ rank is ruled out only when
    its ❓ are no more than the table's ❓ cells."""
    out = []
    attributed = None
    if status == "FAILED":
        if len(failing) == 1:
            attributed = failing[0]
            out.append(Result(host=host, eval_name=attributed, kind="vetnode", status="FAILED", outcome="fail", local_rank=local_rank,
                              message="from vetnode's summary table (the only evaluation that failed anywhere)"))
        else:
            out.append(Result(host=host, eval_name="vetnode summary", kind="vetnode", status="FAILED", outcome="fail",
                              local_rank=local_rank,
                              message=f"failed one of: {', '.join(failing) or 'setup'} (run vetnode with --verbose to know which)"))
    for name, counted in evaluations.items():
        glyphs = set(counted)
        if name == attributed or (status == "FAILED" and name in failing):
            continue  # named above, or one of the candidates
        if glyphs == {"UNKNOWN"} or (status == "UNKNOWN" and "UNKNOWN" in glyphs):
            out.append(Result(host=host, eval_name=name, kind="vetnode", status="UNKNOWN", outcome="unknown", local_rank=local_rank,
                              message=f"vetnode could not run it: {errors_of.get(name, 'error not shown')}"))
        elif status in ("SUCCESS", "FAILED") and counted.count("UNKNOWN") > unknown_cells:
            out.append(Result(host=host, eval_name=name, kind="vetnode", status="SUCCESS|UNKNOWN", outcome="unknown",
                              local_rank=local_rank, message="passed or raised on this rank (vetnode's summary does not say which; "
                              f"where it raised: {errors_of.get(name, 'error not shown')})"))
        elif status in ("SUCCESS", "FAILED"):  # nothing of this evaluation failed on this rank
            passed_only = "SKIPPED" not in glyphs
            out.append(Result(host=host, eval_name=name, kind="vetnode", status="SUCCESS" if passed_only else "SUCCESS|SKIPPED",
                              outcome="pass", local_rank=local_rank,
                              message="" if passed_only else "passed or skipped on this rank (vetnode's summary does not say which)"))
    if status in ("SKIPPED", "UNKNOWN") and not out:
        out.append(Result(host=host, eval_name="vetnode summary", kind="vetnode", status=status, outcome=outcome_of(status),
                          local_rank=local_rank))
    return out


def parse_vetnode_legacy(text: str) -> Run:
    problems: list = []
    results: list[Result] = []
    verdicts: dict[str, tuple[str, int]] = {}
    protocol = ""
    node_of: dict[int | None, str] = {}  # srun label -> the node its "Running sanity checks" header named
    block: dict[int | None, dict] = {}  # srun label -> what the process printed since its last verdict
    exceptions: list[dict] = []  # 0.0.8's "unexpected exception" entries, one per evaluation that raised
    skipped: list[tuple[str, int | None, str, str, int]] = []  # (host, rank, name, error, line)
    entries: dict[str, list] = {}  # host -> its results and exceptions in the order printed (the evaluations' order)
    processes = 0
    for number, line, _, label in _lines(text):
        stripped = line.strip()
        mine = block.setdefault(label, {"skipped": [], "rank": None, "exception": None})
        header = _LEGACY_HEADER.match(stripped)
        if header:
            protocol = protocol or header.group("name")
            node_of[label] = header.group("host")
            continue
        match = _RESULT.match(stripped)
        if match:
            result = _result_line(match, stripped, number, problems)
            if result:
                results.append(result)
                entries.setdefault(result.host, []).append(result)
                mine["rank"] = result.rank if result.rank is not None else mine["rank"]
            mine["exception"] = None
            continue
        exception = _EXCEPTION.match(stripped)
        if exception:
            entry = {"host": exception.group("host"), "error": exception.group("error").strip() or "an exception", "module": None,
                     "line": number}
            exceptions.append(entry)
            entries.setdefault(entry["host"], []).append(entry)
            mine["exception"] = entry
            continue
        frame = _TRACE_EVAL.match(stripped)
        if frame and mine["exception"] is not None:
            if frame.group("module") != "base_eval":  # the deepest frame in an evaluation's own module names it
                mine["exception"]["module"] = frame.group("module")
            continue
        found = _SKIPPED.search(stripped)
        if found:
            mine["skipped"].append((found.group("name").strip(), found.group("error"), number))
            continue
        verdict = _VERDICT.match(stripped)
        if verdict:
            host, word = verdict.group("host"), verdict.group("verdict")
            processes += 1
            skipped.extend((host, mine["rank"], name, error, where) for name, error, where in mine["skipped"])
            block[label] = {"skipped": [], "rank": None, "exception": None}
            if host not in verdicts or word == "Cordon":
                verdicts[host] = (word, number)
    for label, rest in block.items():  # a block cut off before its verdict: the header names its node
        if rest["skipped"] and label in node_of:
            skipped.extend((node_of[label], rest["rank"], name, error, where) for name, error, where in rest["skipped"])
    if problems:
        raise ParseError(problems, "vetnode output")
    if not results and not verdicts and not exceptions:
        raise ParseError([(1, None, "no vetnode results: no 'Node: … result:' lines and no Vetted:/Cordon: lines")], "vetnode output")
    for entry in exceptions:
        name, kind_type = _exception_names(entry, entries)
        results.append(Result(host=entry["host"], eval_name=name[:200], eval_type=kind_type[:200], kind="vetnode", status="ERROR",
                              outcome="fail", message=_raised_message(entry["error"], verdicts.get(entry["host"], ("",))[0] != "Vetted"),
                              line=entry["line"]))
    for host, rank, name, error, where in skipped:
        results.append(Result(host=host, eval_name=name[:200], kind="vetnode", status="UNKNOWN", outcome="unknown", rank=rank,
                              message=_raised_message(error, False), line=where))
    for host, (verdict, number) in verdicts.items():
        mine = [r for r in results if r.host == host]
        if not mine:
            status = "SUCCESS" if verdict == "Vetted" else "FAILED"
            results.append(Result(host=host, eval_name="vetnode verdict", kind="vetnode", status=status, outcome=outcome_of(status),
                                  message=f"vetnode: {verdict}", line=number))
        elif verdict == "Cordon" and not any(r.outcome == "fail" for r in mine):
            results.append(Result(host=host, eval_name="vetnode verdict", kind="vetnode", status="FAILED", outcome="fail",
                                  message="vetnode cordoned the node", line=number))
    warnings = _raised_warnings([(name, error) for _, _, name, error, _ in skipped], processes)
    return Run(source="vetnode-legacy", results=results, protocol_name=protocol, warnings=warnings)


def _exception_names(entry: dict, entries: dict[str, list]) -> tuple[str, str]:
    """(evaluation name, type) of an evaluation that raised in vetnode 0.0.8, which prints only the error.
    The traceback's frame in ``vetnode/evaluations/<module>.py`` gives the module, and a result of the same
    module elsewhere in the output its name; without a traceback, a node that printed a result at the same
    place (vetnode prints them in the protocol's order) names it."""
    module = entry["module"]
    if module:
        prefix = f"vetnode.evaluations.{module}."
        for listed in entries.values():
            for other in listed:
                if isinstance(other, Result) and other.eval_type.startswith(prefix):
                    return other.eval_name, other.eval_type
    mine = entries.get(entry["host"], [])
    place = next(i for i, item in enumerate(mine) if item is entry)
    for listed in entries.values():
        other = listed[place] if len(listed) == len(mine) else None
        if isinstance(other, Result) and (not module or other.eval_type.startswith(f"vetnode.evaluations.{module}.")):
            return other.eval_name, other.eval_type
    return (f"unexpected exception in {module}", f"vetnode.evaluations.{module}") if module else ("unexpected exception", "")


# ---------------------------------------------------------------------------------------------
# dcgmi diag -j

_DCGM_ISOLATE = 2


def _json_document(text: str, what: str):
    start = text.find("{")
    if start < 0:
        raise ParseError([(1, None, "no JSON object in the upload")], what)
    prefix_lines = text.count("\n", 0, start)
    try:
        return loads_with_lines(text[start:]), prefix_lines
    except json.JSONDecodeError as exc:
        raise ParseError([(exc.lineno + prefix_lines, exc.colno, f"not JSON: {exc.msg}")], what) from None


def parse_dcgm_diag(text: str, *, host: str | None) -> Run:
    what = "dcgmi diag JSON"
    document, shift = _json_document(text, what)
    if not host:
        raise ParseError([(None, None, "dcgmi diag output does not name its node: give the host it ran on")], what)
    documents = document.get("iterations") if isinstance(document, dict) and isinstance(document.get("iterations"), list) else [document]
    results, problems, version = [], [], ""
    for doc in documents:
        if not isinstance(doc, dict):
            problems.append((shift + 1, None, "expected a JSON object"))
            continue
        body = doc.get("DCGM Diagnostic") if "DCGM Diagnostic" in doc else doc.get("DCGM GPU Diagnostic")
        if not isinstance(body, dict):
            problems.append((getattr(doc, "line", 0) + shift, None,
                             "no 'DCGM Diagnostic' (DCGM 4) or 'DCGM GPU Diagnostic' (DCGM 3) object"))
            continue
        if body.get("runtime_error"):
            problems.append((getattr(body, "line", 0) + shift, None, f"the diagnostic did not run: {body['runtime_error']}"))
            continue
        metadata = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else doc
        version = str(metadata.get("version") or body.get("version") or version)
        categories = body.get("test_categories")
        if not isinstance(categories, list):
            problems.append((getattr(body, "line", 0) + shift, None, "test_categories is missing or not a list"))
            continue
        for category in categories:
            if not isinstance(category, dict) or not isinstance(category.get("tests"), list):
                problems.append((getattr(category, "line", 0) + shift, None, "a category without a tests list"))
                continue
            for test in category["tests"]:
                if not isinstance(test, dict) or not isinstance(test.get("results"), list) or not test.get("name"):
                    problems.append((getattr(test, "line", 0) + shift, None, "a test needs a name and a results list"))
                    continue
                for item in test["results"]:
                    result = _dcgm_result(item, host, test["name"], str(category.get("category", "")), shift, problems)
                    if result:
                        results.append(result)
    if problems:
        raise ParseError(problems, what)
    if not results:
        raise ParseError([(shift + 1, None, "the diagnostic reports no results")], what)
    return Run(source="dcgm-diag", results=results, protocol_name=f"dcgmi diag (DCGM {version})" if version else "dcgmi diag")


def _dcgm_result(item, host, test, category, shift, problems) -> Result | None:
    line = getattr(item, "line", 0) + shift
    if not isinstance(item, dict) or "status" not in item:
        problems.append((line, None, f"a result of {test} without a status"))
        return None
    status = str(item["status"])
    outcome = outcome_of(status)
    if outcome == "unknown" and status.lower() not in ("unknown",):
        problems.append((line, None, f"{test}: unknown status {status!r} (expected Pass, Fail or Skip)"))
        return None
    gpu = item.get("entity_id", item.get("gpu_id"))
    if item.get("entity_group") not in (None, "GPU"):
        gpu = None
    try:
        gpu = int(gpu) if gpu is not None else None
    except (TypeError, ValueError):
        problems.append((line, None, f"{test}: GPU id {gpu!r} is not a number"))
        return None
    warnings = item.get("warnings") if isinstance(item.get("warnings"), list) else []
    messages = []
    for warning in warnings:
        if isinstance(warning, dict):
            messages.append(f"{warning.get('warning', '').strip()} (DCGM error {warning.get('error_id', '?')})".strip())
            if outcome == "fail" and warning.get("error_severity") == _DCGM_ISOLATE:
                outcome = "critical"
    info = item.get("info")
    if isinstance(info, list):
        messages.extend(str(entry) for entry in info)
    elif info:
        messages.append(str(info))
    return Result(host=host, eval_name=str(test)[:200], eval_type=f"dcgm diag / {category}" if category else "dcgm diag",
                  kind="dcgm_diag", status=status, outcome=outcome, gpu=gpu, message=" ".join(messages)[:4000],
                  metrics={"warnings": warnings} if warnings else {}, line=line)


# ---------------------------------------------------------------------------------------------
# Belvedere's run document


def _timestamp(value, path, line, problems):
    if value in (None, ""):
        return None
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        problems.append((line, None, f"{path}: not an ISO 8601 time: {value!r}"))
        return None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
    # Years no vetting run has, and past which the time in UTC (year 10000) or as a pandas Timestamp (2262) breaks.
    if not _EARLIEST <= moment.timestamp() <= _LATEST:
        problems.append((line, None, f"{path}: {value!r} is not between 2000 and 2200"))
        return None
    return moment.astimezone(timezone.utc)


_EARLIEST, _LATEST = datetime(2000, 1, 1, tzinfo=timezone.utc).timestamp(), datetime(2200, 1, 1, tzinfo=timezone.utc).timestamp()


def parse_run_document(data) -> Run:
    """The API's JSON: ``{"results": [...], "source", "protocol": {"name", "text"} , "started", "ended", "job_id", "cluster"}``.
    Problems are (line, column, "field.path: message")."""
    what = "vetting run"
    if isinstance(data, (str, bytes)):
        data, _ = _json_document(data.decode() if isinstance(data, bytes) else data, what)
    problems: list = []
    if not isinstance(data, dict):
        raise ParseError([(1, None, "a run is a JSON object with a results list")], what)
    line = lambda node: getattr(node, "line", None)  # noqa: E731
    source = data.get("source", "json")
    if source not in ("json", "vetnode", "vetnode-legacy", "dcgm-diag", "health", "preflight"):
        problems.append((line(data), None, "source: one of json, vetnode, dcgm-diag, health, preflight"))
    protocol = data.get("protocol") or {}
    if not isinstance(protocol, dict):
        problems.append((line(data), None, "protocol: an object with name and, optionally, text"))
        protocol = {}
    raw_results = data.get("results")
    if not isinstance(raw_results, list) or not raw_results:
        problems.append((line(data), None, "results: a non-empty list of results"))
        raw_results = []
    if len(raw_results) > MAX_RESULTS:
        raise ParseError([(line(data), None, f"results: {len(raw_results):,}; at most {MAX_RESULTS:,} per run")], what)
    job_id = data.get("job_id")
    if job_id is not None and (not isinstance(job_id, int) or isinstance(job_id, bool) or job_id <= 0):
        problems.append((line(data), None, "job_id: a positive whole number"))
        job_id = None
    default_kind = {"dcgm-diag": "dcgm_diag", "health": "health", "preflight": "health"}.get(source, "vetnode")
    results = []
    for index, item in enumerate(raw_results):
        path = f"results.{index}"
        if not isinstance(item, dict):
            problems.append((None, None, f"{path}: each result is an object"))
            continue
        where = line(item)
        host = item.get("hostname", item.get("host"))
        name = item.get("eval_name", item.get("check"))
        kind = item.get("kind", default_kind)
        if not isinstance(host, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", host):
            problems.append((where, None, f"{path}.hostname: a host name (letters, digits, . _ -), not {host!r}"))
            continue
        if not isinstance(name, str) or not name.strip():
            problems.append((where, None, f"{path}.eval_name: the evaluation's (or check's) name"))
            continue
        if kind not in KINDS:
            problems.append((where, None, f"{path}.kind: one of {', '.join(KINDS)}"))
            continue
        status = item.get("status")
        if status is None and "exit_code" in item:
            status = HEALTH_EXIT_CODES.get(item["exit_code"]) if isinstance(item["exit_code"], int) else None
            if status is None:
                problems.append((where, None, f"{path}.exit_code: 0 (OK), 1 (WARN), 2 (CRITICAL) or 3 (UNKNOWN)"))
                continue
        if isinstance(status, bool) or not isinstance(status, (str, int)) or (outcome_of(status) == "unknown" and str(status).upper() != "UNKNOWN"
                                                                                and status != 4):
            problems.append((where, None, f"{path}.status: SUCCESS, FAILED, SKIPPED, UNKNOWN (or 1-4), OK, WARN, CRITICAL, "
                                          f"Pass, Fail or Skip; not {status!r}"))
            continue
        numbers = {}
        for key in ("rank", "local_rank", "gpu"):
            value = item.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                problems.append((where, None, f"{path}.{key}: a whole number >= 0"))
            numbers[key] = value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
        elapsed = item.get("elapsedtime", item.get("elapsed_s"))
        if elapsed is not None and (isinstance(elapsed, bool) or not isinstance(elapsed, (int, float))):
            problems.append((where, None, f"{path}.elapsedtime: seconds, a number"))
            elapsed = None
        metrics = item.get("metrics") or {}
        if not isinstance(metrics, (dict, list)):
            problems.append((where, None, f"{path}.metrics: an object"))
            metrics = {}
        word = VETNODE_STATUS_NUMBERS.get(status, str(status)) if isinstance(status, int) else status
        results.append(Result(host=host, eval_name=name.strip()[:200], eval_type=str(item.get("eval_type") or "")[:200], kind=kind,
                              status=str(word), outcome=outcome_of(status), elapsed_s=elapsed, metrics=metrics,
                              thresholds=item.get("thresholds") if isinstance(item.get("thresholds"), dict) else {},
                              message=str(item.get("message") or "")[:4000], line=where, **numbers))
    started = _timestamp(data.get("started"), "started", line(data), problems)
    ended = _timestamp(data.get("ended"), "ended", line(data), problems)
    if started and ended and ended < started:
        problems.append((line(data), None, "ended: before started"))
    if problems:
        raise ParseError(problems, what)
    return Run(source=source if source != "json" else "json", results=results, protocol_name=str(protocol.get("name") or "")[:200],
               protocol_hash=str(data.get("protocol_hash") or ""), started=started, ended=ended, job_id=job_id,
               cluster=data.get("cluster") if isinstance(data.get("cluster"), str) else None)
