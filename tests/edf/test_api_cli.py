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
