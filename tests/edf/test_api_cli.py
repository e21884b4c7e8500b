"""POST /api/v1/edf/validate/ and `manage.py validate_edf`: formats and exit codes."""
import io
import re

import pytest
from django.core.management import CommandError, call_command

GOOD = 'image = "nvcr.io#nvidia/pytorch:24.10-py3"\nmounts = ["/capstor/scratch/cscs/alice:/scratch"]\nworkdir = "/scratch"\n'
BAD = 'image = "nvcr.io#nvidia/pytorch:24.10-py3"\nworkdir = "relative/dir"\nwritable = "true"\n'


@pytest.fixture
def alice(api_client, make_user):
    api_client.force_authenticate(make_user("alice"))
    return api_client


def test_validate_api_returns_findings_with_positions(alice):
    body = alice.post("/api/v1/edf/validate/", {"text": BAD}, format="json").json()
    assert body["valid"] is False
    lines = {(finding["line"], finding["severity"]) for finding in body["findings"]}
    assert (2, "error") in lines and (3, "error") in lines
    for finding in body["findings"]:
        assert set(finding) >= {"severity", "line", "column", "path", "message", "hint", "rule"}
    assert alice.post("/api/v1/edf/validate/", {"text": GOOD}, format="json").json()["valid"] is True


def test_validate_api_input_errors_use_the_common_format(alice, api_client):
    response = alice.post("/api/v1/edf/validate/", {"text": 42, "env": "nope"}, format="json")
    assert response.status_code == 400
    assert {error["field"] for error in response.json()["errors"]} == {"text", "env"}
    response = alice.post("/api/v1/edf/validate/", {"text": "x" * 1_000_001}, format="json")
    assert response.status_code == 400 and response.json()["errors"][0]["field"] == "text"


def test_cli_prints_compiler_style_lines_and_exits_1_on_errors(tmp_path):
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(GOOD)
    bad.write_text(BAD)
    out = io.StringIO()
    call_command("validate_edf", str(good), stdout=out)
    assert "error" not in out.getvalue()
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("validate_edf", str(good), str(bad), stdout=out)
    assert exit_info.value.code == 1
    lines = [line for line in out.getvalue().splitlines() if not line.startswith("    hint:")]
    assert any(line.startswith(f"{bad}:2:") and ": error: " in line for line in lines), lines
    pattern = re.compile(rf"^({re.escape(str(good))}|{re.escape(str(bad))}):\d+:\d+: (error|warning|info): .+ \[[a-z-]+\]$")
    assert all(pattern.match(line) for line in lines), lines
    assert not any(line.startswith(f"{good}:") and ": error: " in line for line in lines)
    with pytest.raises(CommandError, match="no such file"):
        call_command("validate_edf", str(tmp_path / "absent.toml"))


def test_cli_finds_base_environments_next_to_the_file(tmp_path):
    (tmp_path / "base.toml").write_text(GOOD)
    child = tmp_path / "child.toml"
    child.write_text('base_environment = "base"\nworkdir = "/tmp"\n')
    call_command("validate_edf", str(child), stdout=io.StringIO())  # no SystemExit: valid with its base


def run_cli(*args, cwd=None):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "apps.edf.cli", *map(str, args)], cwd=cwd or root,
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})


def test_standalone_cli_runs_without_django_as_a_pre_commit_hook_would(tmp_path):
    good, bad, latin = tmp_path / "good.toml", tmp_path / "bad.toml", tmp_path / "latin.toml"
    good.write_text(GOOD)
    bad.write_text(BAD)
    latin.write_bytes('image = "caf\xe9"\n'.encode("latin-1"))
    ok = run_cli(good)
    assert ok.returncode == 0 and ": error: " not in ok.stdout and ok.stderr == ""
    failing = run_cli(good, bad, "--quiet")
    assert failing.returncode == 1
    assert failing.stdout.splitlines() == [line for line in failing.stdout.splitlines() if line.startswith(f"{bad}:") and ": error: " in line]
    assert {line.split(":")[1] for line in failing.stdout.splitlines()} == {"2", "3"}
    encoding = run_cli(latin)
    assert encoding.returncode == 1 and encoding.stdout.startswith(f"{latin}:1:13: error: not UTF-8 text (byte 0xe9)")
    missing = run_cli(tmp_path / "absent.toml")
    assert missing.returncode == 1 and "absent.toml:1:1: error: no such file" in missing.stdout
    usage = run_cli()
    assert usage.returncode == 2 and "usage: validate_edf" in usage.stderr


def test_cli_search_path_resolves_bases_from_edf_path(tmp_path):
    library, work = tmp_path / "edf", tmp_path / "work"
    library.mkdir()
    work.mkdir()
    (library / "base.toml").write_text('image = "library/ubuntu:24.04"\nwritable = false\n')
    child = work / "child.toml"
    child.write_text('base_environment = "base"\n[annotations]\ncom.hooks.ssh.enabled = "true"\n')
    unresolved = run_cli(child)
    assert unresolved.returncode == 0 and "[base-unresolved]" in unresolved.stdout
    resolved = run_cli(child, "--search-path", library)
    assert resolved.returncode == 1 and "[hook-needs-writable]" in resolved.stdout and "[base-unresolved]" not in resolved.stdout


def test_the_edf_list_filters_by_owner_and_refuses_a_bad_owner(alice, api_client):
    created = api_client.post("/api/v1/edf/documents/", {"name": "mine", "text": 'image = "ubuntu:24.04"\n'}, format="json")
    assert created.status_code == 201, created.content
    assert [row["name"] for row in api_client.get("/api/v1/edf/documents/?owner=alice").json()["results"]] == ["mine"]
    assert api_client.get("/api/v1/edf/documents/?owner=nobody").json()["results"] == []
    refused = api_client.get("/api/v1/edf/documents/?owner=" + "x" * 151)
    assert refused.status_code == 400 and [error["field"] for error in refused.json()["errors"]] == ["owner"]


BROKEN = 'image = "nvcr.io#nvidia/pytorch:24.10-py3\nworkdir = "relative/dir"\n[env]\nA = "1"\n[env]\n'


def test_validate_api_reports_syntax_errors_and_what_it_found_past_them(alice):
    body = alice.post("/api/v1/edf/validate/", {"text": BROKEN}, format="json").json()
    assert body["valid"] is False and body["resolved"] is None
    found = [(f["rule"], f["line"], f["column"], f["recovered"]) for f in body["findings"]]
    assert ("toml-syntax", 1, 9, False) in found and ("toml-table-twice", 5, 1, False) in found
    assert ("workdir-path", 2, 11, True) in found
    unterminated = next(f for f in body["findings"] if f["rule"] == "toml-syntax")
    assert unterminated["message"] == ('string opened at line 1 col 9 is not closed before the end of the line: '
                                       'add the closing quote (")')


def test_cli_marks_findings_from_the_text_read_past_a_syntax_error(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text(BROKEN)
    out = io.StringIO()
    with pytest.raises(SystemExit):
        call_command("validate_edf", str(broken), stdout=out)
    lines = out.getvalue().splitlines()
    assert f"{broken}:1:9: error: string opened at line 1 col 9 is not closed before the end of the line: " \
           f"add the closing quote (\") [toml-syntax]" in lines
    assert any(line.startswith(f"{broken}:2:11: error: ") and line.endswith(
        "(found on the text read past the syntax error) [workdir-path]") for line in lines), lines
