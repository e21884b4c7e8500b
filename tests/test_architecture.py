"""Layers, checked: the import-linter contracts in pyproject.toml hold, and the jobs app's templates
render other apps' sections only through the panel registry."""
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    # lint-imports reads [tool.importlinter] from pyproject.toml; function-level imports count.
    result = subprocess.run([str(Path(sys.executable).with_name("lint-imports")), "--no-cache"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_the_jobs_contract_names_the_panel_and_view_modules_of_every_app_with_a_panel():
    """A new app that registers a job panel must be added to the contract, or the contract proves nothing."""
    config = (ROOT / "pyproject.toml").read_text()
    contract = config[config.index("[[tool.importlinter.contracts]]"):]
    registering = sorted(path.parent.name for path in (ROOT / "apps").glob("*/apps.py")
                         if "register_job_panel" in path.read_text() and path.parent.name != "jobs")
    assert registering, "no app registers a job panel"
    for app in registering:
        assert f'"apps.{app}.panel"' in contract, f"apps.{app}.panel is missing from the jobs contract"


def test_the_layers_contract_places_every_app():
    """A new app must be placed in a layer (lint-imports' ``exhaustive`` says so too), and a layer must name
    only apps that exist."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layered = [contract for contract in contracts if contract["type"] == "layers" and contract.get("containers") == ["apps"]]
    assert len(layered) == 1, "pyproject.toml needs one layers contract over the apps"
    placed = [name.strip() for layer in layered[0]["layers"] for name in re.split(r"[|:]", layer)]
    apps = sorted(path.parent.name for path in (ROOT / "apps").glob("*/apps.py"))
    assert len(apps) >= 11
    assert sorted(placed) == apps
    assert placed[-1] == "core", "core is the lowest layer"


def test_jobs_templates_include_no_other_apps_templates():
    included = []
    for template in (ROOT / "templates" / "jobs").glob("*.html"):
        for name in re.findall(r"{%\s*include\s+[\"']([^\"']+)[\"']", template.read_text()):
            if not name.startswith("jobs/"):
                included.append(f"{template.name}: {name}")
    assert included == []


def test_no_app_reaches_into_another_apps_views_or_api():
    """What apps share goes through public modules (selectors, services, core's registries and API helpers);
    another app's pages (views) and API modules are its transport, not an interface. Function-level imports count."""
    import grimp

    graph = grimp.build_graph("apps", cache_dir=None)
    apps = sorted(path.parent.name for path in (ROOT / "apps").glob("*/apps.py"))
    reaching = []
    for owner in apps:
        if owner == "core":  # core's API helpers (apps.core.api) are shared by design
            continue
        for transport in (f"apps.{owner}.views", f"apps.{owner}.api"):
            if transport not in graph.modules:
                continue
            targets = {transport} | graph.find_descendants(transport)
            for target in targets:
                for importer in graph.find_modules_that_directly_import(target):
                    if not importer.startswith(f"apps.{owner}.") and importer != f"apps.{owner}":
                        reaching.append(f"{importer} -> {target}")
    assert reaching == []


def test_each_app_readme_names_the_apps_it_depends_on():
    """apps/<app>/README.md has a "Depends on" section naming (as `app` or `app.module`) every other app the app imports."""
    import grimp

    graph = grimp.build_graph("apps", cache_dir=None)
    apps = sorted(path.parent.name for path in (ROOT / "apps").glob("*/apps.py"))
    missing = []
    for app in apps:
        readme = (ROOT / "apps" / app / "README.md").read_text()
        assert "## Depends on" in readme, f"apps/{app}/README.md has no Depends on section"
        section = readme.split("## Depends on", 1)[1].split("\n## ", 1)[0]
        modules = {f"apps.{app}"} | graph.find_descendants(f"apps.{app}")
        imported = {target.split(".")[1] for module in modules for target in graph.find_modules_directly_imported_by(module)
                    if target.startswith("apps.") and target.count(".") >= 1}
        missing += [f"{app} imports {other}" for other in sorted(imported - {app}) if not re.search(rf"`{other}[`.]", section)]
    assert missing == []
