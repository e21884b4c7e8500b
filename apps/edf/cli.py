"""Check EDF files like a compiler: ``file:line:col: severity: message [rule]``, exit 1 on any error.

Runs without Django (``python -m apps.edf.cli FILE...``), so it also works as a pre-commit hook in
a repository that only holds EDFs; ``python manage.py validate_edf`` is the same program.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .validator import ERROR, validate


def base_texts(path: Path, search_path: str) -> dict[str, str]:
    """EDFs a file may inherit from by bare name: those in the search path, then next to the file."""
    folders = [Path(folder) for folder in search_path.split(":") if folder] + [path.parent]
    bases: dict[str, str] = {}
    for folder in folders:
        for candidate in sorted(folder.glob("*.toml")):
            if candidate.resolve() != path.resolve():
                bases.setdefault(candidate.stem, candidate.read_text(encoding="utf-8", errors="replace"))
    return bases


def check_files(files: list[str], *, search_path: str = "", quiet: bool = False, out=sys.stdout) -> int:
    failed = False
    for name in files:
        path = Path(name)
        if not path.is_file():
            out.write(f"{name}:1:1: error: no such file [file]\n")
            failed = True
            continue
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
            out.write(f"{name}:{line}:{column}: error: not UTF-8 text (byte 0x{raw[exc.start]:02x}) [encoding]\n")
            failed = True
            continue
        result = validate(text, base_environments=base_texts(path, search_path), name=path.stem)
        for finding in result.findings:
            if quiet and finding.severity != ERROR:
                continue
            after = " (found on the text read past the syntax error)" if finding.recovered else ""
            out.write(f"{name}:{finding.line}:{finding.column}: {finding.severity}: {finding.message}{after} [{finding.rule}]\n")
            if finding.hint and not quiet:
                out.write(f"    hint: {finding.hint}\n")
        failed = failed or not result.valid
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(prog="validate_edf", description="Validate EDF files; exit status 1 if any has an error.")
    cli.add_argument("files", nargs="+", help="EDF (.toml) files")
    cli.add_argument("--search-path", default=os.environ.get("EDF_PATH", ""),
                     help="colon-separated folders where base_environment names are looked up "
                          "(default $EDF_PATH, then each file's own folder)")
    cli.add_argument("--quiet", action="store_true", help="print errors only")
    return cli


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return check_files(args.files, search_path=args.search_path, quiet=args.quiet)


if __name__ == "__main__":
    sys.exit(main())
