"""`belvedere report` against the real portal (live server, demo system, a user's API token): the text report
leads with the verdict, --json combines the four answers, errors are one line and exit status 2; and, as issue 20
acceptance 5 asks, the command installed with pip into a separate virtualenv prints the report with only a token."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request

import pytest

from belvedere_client import cli

from .conftest import CLIENT_SOURCE
from .recorder import RecordingServer
from tests.demo_snapshot import load_demo


@pytest.fixture
def demo(live_server, transactional_db):
    """The demo's Megatron run, its user's API token and what the portal itself answers for it."""
    load_demo()
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from apps.jobs.demo import MEGATRON_NAME
    from apps.jobs.models import Job

    job = Job.objects.select_related("cluster").get(name=MEGATRON_NAME)
    user = get_user_model().objects.get(username=job.user_name)
    token = Token.objects.get_or_create(user=user)[0].key
    answers = {}
    for part in ("", "saturation/", "stragglers/", "efficiency/"):
        request = urllib.request.Request(f"{live_server.url}/api/v1/jobs/{job.cluster.name}/{job.job_id}/{part}",
                                         headers={"Authorization": f"Token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answers[part.rstrip("/") or "job"] = json.load(response)
        except urllib.error.HTTPError as error:
            assert error.code == 404, f"{part}: {error.code}"
            answers[part.rstrip("/") or "job"] = None
    return {"cluster": job.cluster.name, "job_id": str(job.job_id), "token": token, "url": live_server.url,
            "answers": answers}


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_text_report_leads_with_the_verdict(demo, capsys, monkeypatch):
    monkeypatch.delenv("BELVEDERE_TOKEN", raising=False)
    code, out, err = run_cli(capsys, "report", demo["cluster"], demo["job_id"], "--url", demo["url"],
                             "--token", demo["token"])
    assert code == 0, err
    saturation, stragglers = demo["answers"]["saturation"], demo["answers"]["stragglers"]
    efficiency = demo["answers"]["efficiency"]
    assert saturation is not None and stragglers, "the demo's Megatron run is scored and has stragglers"
    sections = ["Verdict", "Efficiency", "Events (throughput dips)", "Stragglers", "Job page: "]
    positions = [out.index(section) for section in sections]
    assert positions == sorted(positions)
    verdict = out[positions[0]:positions[1]]
    assert f"{saturation['job_score']:.0f}/100" in verdict
    assert f"limited by {cli.LIMITER_WORDS[saturation['limiter']]}" in verdict
    assert "What to do" in verdict and "--exclude=" in verdict  # the demo's straggler node
    assert all(item["reason"] in out for item in stragglers)
    assert out.rstrip().endswith(demo["answers"]["job"]["url"])
    if efficiency is None or efficiency.get("tokens_per_s_per_gpu") is None:
        assert cli.NO_APP_METRICS in out  # said, not guessed
    else:
        assert f"{efficiency['tokens_per_s_per_gpu']:,.0f}" in verdict
    if efficiency is not None and efficiency.get("mfu") is not None:
        assert f"{100 * efficiency['mfu']:.1f} %" in verdict


def test_json_combines_the_four_answers(demo, capsys):
    code, out, err = run_cli(capsys, "report", demo["cluster"], demo["job_id"], "--url", demo["url"],
                             "--token", demo["token"], "--json")
    assert code == 0, err
    body = json.loads(out)
    answers = demo["answers"]
    assert body["job"]["job_id"] == int(demo["job_id"]) and body["job"]["name"] == answers["job"]["name"]
    assert body["saturation"]["job_score"] == answers["saturation"]["job_score"]
    assert body["stragglers"] == answers["stragglers"] and body["efficiency"] == answers["efficiency"]
    assert body["advice"] and (("efficiency" in body["missing"]) == (answers["efficiency"] is None))


def test_errors_are_one_line_and_status_two(demo, capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("BELVEDERE_TOKEN", raising=False)
    monkeypatch.delenv("BELVEDERE_URL", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no token file there
    base = ["report", demo["cluster"], demo["job_id"], "--url", demo["url"]]
    cases = [
        (base + ["--token", "not-a-token"], "refused the token (401"),
        (["report", demo["cluster"], "999999999", "--url", demo["url"], "--token", demo["token"]], "not found"),
        (base, "no API token"),
        (["report", demo["cluster"], demo["job_id"], "--token", demo["token"]], "no portal address"),
        (["report", demo["cluster"], "12x", "--url", demo["url"], "--token", demo["token"]], "is not a job number"),
    ]
    closed = RecordingServer()
    closed.stop()
    cases.append((["report", "alps", "1", "--url", closed.url, "--token", "t"], "cannot reach the portal"))
    for argv, words in cases:
        code, out, err = run_cli(capsys, *argv)
        assert (code, out) == (2, ""), argv
        assert err.count("\n") == 1 and err.startswith("belvedere: ") and words in err, (argv, err)


def test_another_users_job_is_a_404_not_a_leak(demo, capsys, make_user):
    from rest_framework.authtoken.models import Token

    stranger = Token.objects.create(user=make_user("stranger-no-projects")).key
    code, out, err = run_cli(capsys, "report", demo["cluster"], demo["job_id"], "--url", demo["url"], "--token", stranger)
    assert code == 2 and "not found, or not visible to you" in err


@pytest.mark.integration
@pytest.mark.engine_independent  # a client of the HTTP API: the same on every engine (it built the demo on PostgreSQL too)
def test_the_command_from_a_separate_virtualenv_with_only_a_token(demo, tmp_path):
    source = tmp_path / "src"
    shutil.copytree(CLIENT_SOURCE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python, belvedere = venv / "bin" / "python", venv / "bin" / "belvedere"

    def pip(*args):
        result = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr

    # The wheel is built here (the dev requirements have "wheel", which setuptools < 70.1 builds wheels with) and
    # installed there from the file alone, as a site would copy it to a login node: no package index involved.
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index", "--no-build-isolation", "-w",
                            str(dist), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = list(dist.glob("belvedere_client-*.whl"))
    pip("install", "--no-index", str(wheel))

    home = tmp_path / "home"
    (home / ".config" / "belvedere").mkdir(parents=True)
    (home / ".config" / "belvedere" / "token").write_text(demo["token"] + "\n")
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home), "BELVEDERE_URL": demo["url"]}
    # Nothing of the portal there: no Django, no settings, no database.
    assert subprocess.run([str(python), "-c", "import django"], env=env, capture_output=True).returncode != 0
    text = subprocess.run([str(belvedere), "report", demo["cluster"], demo["job_id"]], env=env, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(f"Job {demo['cluster']}/{demo['job_id']}")
    assert f"{demo['answers']['saturation']['job_score']:.0f}/100" in text.stdout
    assert demo["answers"]["stragglers"][0]["reason"] in text.stdout
    as_json = subprocess.run([str(belvedere), "report", demo["cluster"], demo["job_id"], "--json"], env=env,
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["saturation"]["job_score"] == demo["answers"]["saturation"]["job_score"]
