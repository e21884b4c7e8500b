"""The demo build's progress (apps/core/demo_progress.py): written by ``manage.py demo`` after each part, read by the
pages that make run serves beside the build (the banner on every page, /demo-build for the browser's updates)."""
import io
import json
import subprocess
import sys

import pytest
from django.core.management import call_command

from apps.core import demo as demo_registry
from apps.core.demo import DemoPart
from apps.core.demo_progress import BUILDING, FAILED, READY, STOPPED, ProgressFile, read_progress
from apps.core.models import DemoState


class Clock:
    def __init__(self, now: float = 1_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_progress_moves_by_the_parts_weights_and_ends_ready(tmp_path):
    clock = Clock()
    path = tmp_path / "demo-build.json"
    progress = ProgressFile(path, parts={"accounts": 1, "telemetry": 40, "network": 19}, seed=7, clock=clock)
    progress.start("accounts")
    seen = read_progress(path)
    assert (seen.state, seen.current, seen.done, seen.fraction) == (BUILDING, "accounts", [], 0.0)
    assert seen.part == "part 1 of 3 (accounts)"
    clock.now += 2
    progress.finish("accounts", 1.5)
    progress.start("telemetry")
    clock.now += 40
    progress.finish("telemetry", 40.2)
    seen = read_progress(path)
    # Two parts of three, but 41 of 60 weights: the bar is where the time is.
    assert [part["name"] for part in seen.done] == ["accounts", "telemetry"]
    assert seen.fraction == pytest.approx(41 / 60)
    assert seen.as_json()["percent"] == 68 and seen.as_json()["parts_done"] == 2 and seen.as_json()["parts_total"] == 3
    progress.start("network")
    clock.now += 20
    progress.finish("network", 19.8)
    progress.ready()
    seen = read_progress(path)
    assert (seen.state, seen.fraction, seen.elapsed) == (READY, 1.0, 62.0)
    assert "pid" not in seen.as_json()
    # Every write replaced the file whole: no partial file is left beside it.
    assert [p.name for p in tmp_path.iterdir()] == ["demo-build.json"]


def test_a_failed_build_keeps_the_last_line_of_its_error(tmp_path):
    path = tmp_path / "demo-build.json"
    progress = ProgressFile(path, parts={"accounts": 1, "topology": 1}, seed=1)
    progress.start("topology")
    progress.failed(RuntimeError("Traceback: lots\nof lines\nIntegrityError: UNIQUE constraint failed: topology_node.name."))
    seen = read_progress(path)
    assert seen.state == FAILED
    assert seen.error == "IntegrityError: UNIQUE constraint failed: topology_node.name"
    progress.failed(KeyboardInterrupt())
    assert read_progress(path).error == "KeyboardInterrupt"


def test_a_build_whose_process_is_gone_reads_as_stopped_not_building(tmp_path):
    path = tmp_path / "demo-build.json"
    # A real process that wrote "building" and was then killed (as Ctrl-C or a reboot during the build does).
    code = ("import sys; from apps.core.demo_progress import ProgressFile; "
            "ProgressFile(sys.argv[1], parts={'a': 1, 'b': 1}, seed=1).start('a')")
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    seen = read_progress(path)
    assert seen.state == STOPPED
    assert "process is gone" in seen.error


@pytest.mark.parametrize("text", ["", "{", "[]", json.dumps({"state": "building"}), json.dumps({"state": "odd", "total": 1,
                                  "seed": 1, "pid": 1, "started": 0, "updated": 0})])
def test_an_unreadable_or_foreign_file_is_no_progress(tmp_path, text):
    path = tmp_path / "demo-build.json"
    path.write_text(text)
    assert read_progress(path) is None
    assert read_progress(tmp_path / "missing.json") is None


# ---------------------------------------------------------------------------------------------
# The command writes it
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def progress_file(settings, tmp_path):
    settings.DEMO_PROGRESS_FILE = tmp_path / "demo-build.json"
    return settings.DEMO_PROGRESS_FILE


@pytest.fixture
def two_parts(monkeypatch):
    """Only two small demo parts registered (the real build's progress is checked by tests/core/test_demo.py)."""
    built = []
    demo_registry.registered_parts()  # the apps' demo modules imported (and registered) before the registry is replaced

    def first(context):
        built.append("first")
        return {"rows": 1}

    monkeypatch.setattr(demo_registry, "_parts", {
        "first": DemoPart("first", 1, first, lambda: None, 3.0),
        "second": DemoPart("second", 2, lambda context: {"rows": 2}, lambda: None),
    })
    return built


@pytest.mark.django_db
def test_the_command_reports_each_part_and_ready(progress_file, two_parts):
    call_command("demo", stdout=io.StringIO())
    seen = read_progress(progress_file)
    assert seen.state == READY
    assert [part["name"] for part in seen.done] == ["first", "second"]
    assert seen.weights == {"first": 3.0, "second": 1.0}
    assert DemoState.objects.count() == 1


@pytest.mark.django_db
def test_a_part_that_raises_leaves_failed_progress_and_no_demo(progress_file, two_parts, monkeypatch):
    def broken(context):
        raise ValueError("the planted fault")

    demo_registry._parts["second"] = DemoPart("second", 2, broken, lambda: None)
    with pytest.raises(ValueError):
        call_command("demo", stdout=io.StringIO())
    seen = read_progress(progress_file)
    assert (seen.state, seen.error, seen.current) == (FAILED, "the planted fault", "second")
    assert [part["name"] for part in seen.done] == ["first"]
    assert not DemoState.objects.exists()


# ---------------------------------------------------------------------------------------------
# The pages read it
# ---------------------------------------------------------------------------------------------
def building(path, done: int = 2) -> ProgressFile:
    progress = ProgressFile(path, parts={"accounts": 1, "topology": 1, "telemetry": 40, "network": 20}, seed=5)
    for name in ["accounts", "topology", "telemetry", "network"][:done]:
        progress.start(name)
        progress.finish(name, 1.0)
    progress.start(["accounts", "topology", "telemetry", "network"][done])
    return progress


@pytest.mark.django_db
def test_the_login_page_shows_the_build_while_it_runs(client, progress_file):
    building(progress_file, done=2)
    page = client.get("/accounts/login/").content.decode()
    assert "The demo system is being built" in page
    assert "Part 3 of 4 (telemetry)" in page
    assert 'value="3"' in page  # 2 of 62 weights
    assert 'data-demo-build-live="true"' in page


@pytest.mark.django_db
def test_no_banner_once_ready_or_without_a_build(client, progress_file):
    assert "demo-build" not in client.get("/accounts/login/").content.decode()
    progress = building(progress_file, done=3)
    progress.finish("network", 1.0)
    progress.ready()
    assert "demo-build" not in client.get("/accounts/login/").content.decode()


@pytest.mark.django_db
def test_a_failed_build_is_said_on_the_page_without_following_it(client, progress_file):
    building(progress_file, done=1).failed(OSError("No space left on device"))
    page = client.get("/accounts/login/").content.decode()
    assert "The demo build failed" in page and "No space left on device" in page
    assert "data-demo-build-live" not in page


def test_the_progress_api_is_public_and_gives_the_logins_once_ready(client, progress_file):
    assert client.get("/demo-build").json()["state"] == "none"
    progress = building(progress_file, done=2)
    answer = client.get("/demo-build").json()
    assert answer["state"] == "building" and answer["current"] == "telemetry" and answer["parts_done"] == 2
    assert "logins" not in answer and "pid" not in answer
    progress.finish("telemetry", 30.0)
    progress.start("network")
    progress.finish("network", 10.0)
    progress.ready()
    answer = client.get("/demo-build").json()
    assert answer["state"] == "ready" and answer["percent"] == 100
    assert {login["username"] for login in answer["logins"]} == {"demo", "staff"}


def test_no_progress_api_in_production(client, settings, progress_file):
    settings.BELVEDERE_PROFILE = "production"
    building(progress_file)
    assert client.get("/demo-build").status_code == 404
