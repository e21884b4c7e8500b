"""The EDF corpus (tests/edf/corpus, format in its README.md) against apps.edf.validator."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from apps.edf import validator
from apps.edf.vocabulary import MAX_EDF_CHARS

CORPUS = Path(__file__).parent / "corpus"
BASES = {path.stem: path.read_text() for path in sorted((CORPUS / "bases").glob("*.toml"))}
CASES = sorted(CORPUS.glob("*.toml"))
SEVERITIES = ("error", "warning", "info")

_EXPECT = re.compile(r"#\s*expect:\s*(error|warning|info)\s+([a-z0-9-]+)\s+line\s+(\d+)(?:\s+col\s+(\d+))?\s*$")


@dataclass
class Case:
    valid: bool = False
    expected: set = field(default_factory=set)  # (severity, rule, line)
    columns: set = field(default_factory=set)  # (severity, rule, line, column)
    env: dict | None = None
    name: str | None = None


def read_case(path: Path) -> Case:
    case = Case()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        if re.match(r"#\s*expect:\s*valid\s*$", stripped):
            case.valid = True
        elif stripped.startswith("# expect:"):
            match = _EXPECT.match(stripped)
            assert match, f"{path.name}:{number}: malformed expectation {stripped!r}"
            severity, rule, at, column = match.groups()
            assert rule in validator.RULES, f"{path.name}:{number}: unknown rule {rule}"
            case.expected.add((severity, rule, int(at)))
            if column:
                case.columns.add((severity, rule, int(at), int(column)))
        elif stripped.startswith("# env:"):
            case.env = dict(item.split("=", 1) for item in stripped[len("# env:"):].split())
        elif stripped.startswith("# name:"):
            case.name = stripped[len("# name:"):].strip()
    return case


def run(path: Path, case: Case) -> validator.Result:
    return validator.validate(path.read_text(), base_environments=BASES, env=case.env, name=case.name)


def describe(findings) -> str:
    return "\n".join(f"  {f.severity} {f.rule} line {f.line} col {f.column} {f.path}: {f.message}" for f in findings)


def test_corpus_is_large_enough():
    assert len(CASES) >= 45
    assert sum(path.name.startswith("valid-") for path in CASES) >= 10


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_corpus_case(path):
    case = read_case(path)
    has_errors = any(severity == "error" for severity, _, _ in case.expected)
    assert case.expected or case.valid, f"{path.name} states no expectation"
    assert case.valid != has_errors, f"{path.name}: '# expect: valid' iff no error is expected"

    result = run(path, case)
    got = {(f.severity, f.rule, f.line) for f in result.findings}
    strict = {item for item in got if item[0] != "info"}
    expected_strict = {item for item in case.expected if item[0] != "info"}
    listing = describe(result.findings)
    assert strict == expected_strict, f"{path.name}: errors/warnings differ\nfound:\n{listing}"
    missing_infos = {item for item in case.expected if item[0] == "info"} - got
    assert not missing_infos, f"{path.name}: expected infos missing: {missing_infos}\nfound:\n{listing}"
    got_columns = {(f.severity, f.rule, f.line, f.column) for f in result.findings}
    assert case.columns <= got_columns, f"{path.name}: columns differ: {case.columns - got_columns}\nfound:\n{listing}"
    assert result.valid is case.valid
    assert result.valid is (not result.errors)
    if result.valid or result.resolved is not None:
        assert result.resolved is None or isinstance(result.resolved["chain"], list)


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_findings_are_well_formed(path):
    case = read_case(path)
    text = path.read_text()
    lines = text.count("\n") + 1
    for finding in run(path, case).findings:
        assert finding.severity in SEVERITIES
        assert finding.rule in validator.RULES
        assert isinstance(finding.line, int) and 1 <= finding.line <= lines, finding
        assert isinstance(finding.column, int) and finding.column >= 1, finding
        assert isinstance(finding.message, str) and finding.message.strip(), finding
        assert finding.hint is None or finding.hint.strip(), finding
        assert isinstance(finding.path, str)


def test_too_large():
    text = 'image = "ubuntu:24.04"\n' + "# padding\n" * (MAX_EDF_CHARS // 10 + 1)
    assert len(text) > MAX_EDF_CHARS
    result = validator.validate(text)
    assert not result.valid
    assert [(f.severity, f.rule, f.line, f.column) for f in result.findings] == [("error", "too-large", 1, 1)]
    assert result.findings[0].message
    # exactly at the limit is still checked
    at_limit = 'image = "ubuntu:24.04"\nentrypoint = false\n'
    at_limit += "#" * (MAX_EDF_CHARS - len(at_limit))
    assert len(at_limit) == MAX_EDF_CHARS
    assert validator.validate(at_limit).valid


def test_every_rule_is_expected_somewhere():
    expected = {rule for path in CASES for _, rule, _ in read_case(path).expected} | {"too-large"}
    assert set(validator.RULES) - expected == set(), "rules without a corpus case"


def test_every_severity_variant_of_a_rule_is_exercised():
    """Rules that report at more than one severity have a case for each, where the code has one."""
    expected = {(severity, rule) for path in CASES for severity, rule, _ in read_case(path).expected}
    for pair in [("error", "base-name"), ("warning", "base-name"), ("info", "base-name"),
                 ("error", "image-local-path"), ("warning", "image-local-path"),
                 ("error", "mount-flag"), ("warning", "mount-flag"), ("error", "mount-sqsh"), ("warning", "mount-sqsh"),
                 ("info", "mount-duplicate"), ("warning", "mount-duplicate"), ("error", "mount-path"), ("info", "mount-path"),
                 ("error", "annotation-value"), ("warning", "annotation-value"),
                 ("error", "var-undefined"), ("info", "var-undefined")]:
        assert pair in expected, pair


def test_bases_are_not_cases_and_load_by_stem():
    assert "ngc-pytorch" in BASES and "depth-11" in BASES
    assert not any(path.parent.name == "bases" for path in CASES)
