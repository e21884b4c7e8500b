"""Where the test time went, against the budget in tests/README.md.

Usage: python .ci/budget.py test-artifacts/ci/make-test.xml test-artifacts/ci/integration.xml

Reads pytest's JUnit files (a test's time there is its setup, call and teardown: a module's shared world is
counted in its first test) and prints, for each test directory, the minutes each profile spent there beside
the minutes tests/README.md gives it ("## Budget" table: directory, make test, integration profile). A
directory over its share is marked; so is one the table does not name. It never fails the run: times on a
shared machine vary, and the table is for the person who adds the next test.
"""
from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROFILES = {"make-test": "make test", "integration": "integration"}  # make-test-installations.xml is make test too


def budget(readme: Path = ROOT / "tests" / "README.md") -> dict[str, tuple[float | None, float | None]]:
    """{directory: (make test minutes, integration minutes)} from the README's "## Budget" table."""
    rows: dict[str, tuple[float | None, float | None]] = {}
    section = False
    if not readme.exists():
        return rows
    for line in readme.read_text().splitlines():
        if line.startswith("## "):
            section = line.strip().lower() == "## budget"
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if section and line.startswith("|") else []
        name = re.match(r"`?([^`\s]+)", cells[0]) if len(cells) >= 3 else None
        if name and name.group(1).startswith("tests"):
            rows[name.group(1)] = (_minutes(cells[1]), _minutes(cells[2]))
    return rows


def _minutes(cell: str) -> float | None:
    found = re.search(r"[\d.]+", cell)
    return float(found.group()) if found else None


def directory_of(classname: str, file: str | None) -> str:
    """tests/core for "tests.core.test_demo" (or its file); a top-level module is "tests"."""
    parts = (file or "").split("/") if file else classname.split(".")
    parts = [part for part in parts if part]
    if len(parts) >= 3 and parts[0] == "tests":
        return f"tests/{parts[1]}"
    return "tests"


def measured(path: Path) -> tuple[dict[str, float], int]:
    seconds: dict[str, float] = defaultdict(float)
    count = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        seconds[directory_of(case.get("classname", ""), case.get("file"))] += float(case.get("time") or 0)
        count += 1
    return seconds, count


def main(paths: list[str]) -> int:
    shares = budget()
    profiles: dict[str, dict[str, float]] = {"make test": defaultdict(float)}  # make test first, whatever the order
    for name in sorted(paths, key=lambda name: not Path(name).stem.startswith("make-test")):
        path = Path(name)
        profile = next((label for stem, label in PROFILES.items() if path.stem.startswith(stem)), path.stem)
        seconds, count = measured(path)
        merged = profiles.setdefault(profile, defaultdict(float))
        for directory, spent in seconds.items():
            merged[directory] += spent
        print(f"\n==> {path.name} ({profile}): {count} tests, {sum(seconds.values()) / 60:.1f} min in tests")
    directories = sorted({directory for seconds in profiles.values() for directory in seconds} | set(shares))
    labels = list(profiles)
    print(f"\n  {'directory':<22}" + "".join(f" {label + ' min':>18} {'budget':>7}" for label in labels))
    over = []
    for directory in directories:
        share = shares.get(directory, (None, None))
        line = f"  {directory:<22}"
        for label in labels:
            spent = profiles[label].get(directory, 0.0) / 60
            allowed = share[0] if label == "make test" else share[1]
            mark = " " if allowed is None or spent <= allowed else "!"
            if allowed is None and spent >= 0.05:
                mark = "?"
            if mark != " ":
                over.append((directory, label, spent, allowed))
            line += f" {spent:>17.1f}{mark} {'' if allowed is None else f'{allowed:g}':>7}"
        print(line)
    for directory, label, spent, allowed in over:
        if allowed is None:
            print(f"  ? {directory} ({label}): {spent:.1f} min, and tests/README.md gives it no budget")
        else:
            print(f"  ! {directory} ({label}): {spent:.1f} min, over its {allowed:g} min")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
