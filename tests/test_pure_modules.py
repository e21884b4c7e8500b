"""Plain modules import no framework: they take and return plain data and are tested without settings or a
database.

The modules are listed once, in pyproject.toml's import-linter contract "Plain modules import no Django"
(lint-imports checks it, indirect imports included). This test reads the same list and checks it on its
own terms: every listed module exists, each one's imports (function-level and relative ones included) name
no framework and no app module off the list, and a module whose docstring calls itself plain is listed.
"""
import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APPS = ROOT / "apps"
FORBIDDEN = {"django", "rest_framework", "celery", "django_plotly_dash", "drf_spectacular", "django_filters",
             "django_tables2", "axes", "csp", "mozilla_django_oidc"}
CONTRACT = "Plain modules import no Django"


def listed_modules() -> list[str]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    found = [contract for contract in contracts if contract["name"].startswith(CONTRACT)]
    assert len(found) == 1, f"pyproject.toml has {len(found)} contracts named {CONTRACT!r}"
    return list(found[0]["source_modules"])


def module_path(name: str) -> Path | None:
    """The file of module ``name`` ("apps.core.panels"): ``panels.py`` or a package's ``__init__.py``."""
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, path: Path) -> set[str]:
    """Every module ``source`` (the text of ``path``) imports, anywhere in it, as absolute names. A relative
    import names its target: ``from . import views`` in apps/core/x.py is ``apps.core.views`` (when that is a
    module) besides the package, ``from .models import Job`` is ``apps.core.models``."""
    names = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module
            names.add(module)
            # "from package import name": name may be a submodule, imported too.
            names.update(f"{module}.{alias.name}" for alias in node.names
                         if alias.name != "*" and module_path(f"{module}.{alias.name}") is not None)
    return names


def parents(name: str) -> list[str]:
    """The packages importing ``name`` runs first: apps, apps.telemetry, apps.telemetry.backends."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def test_the_list_holds_the_known_plain_modules():
    listed = set(listed_modules())
    assert "apps.accounts.claims" in listed
    assert {f"apps.saturation.{name}" for name in ("scoring", "products", "stragglers", "figures")} <= listed
    assert {"apps.telemetry.backends.embedded", "apps.core.panels", "apps.jobs.slurm"} <= listed


@pytest.mark.parametrize("name", listed_modules())
def test_listed_module_exists(name):
    # A module that moved or went away must leave the list (or the contract checks nothing about it).
    assert module_path(name) is not None and module_path(name).name != "__init__.py", f"{name} is not a module"


@pytest.mark.parametrize("name", listed_modules())
def test_listed_module_imports_no_framework(name):
    path = module_path(name)
    assert path is not None, f"{name} does not exist"
    imported = imported_modules(path.read_text(), path)
    framework = {module for module in imported if module.split(".")[0] in FORBIDDEN}
    assert not framework, f"{name} imports {sorted(framework)}"
    # Importing another app module is fine only if that module is listed too (a package: its __init__ is plain).
    listed = set(listed_modules())
    for module in sorted(module for module in imported if module.startswith("apps.")):
        target = module_path(module)
        if target is None or module in listed:
            continue  # a name inside a module ("from .x import y"), or a listed module
        if target.name == "__init__.py":
            inner = imported_modules(target.read_text(), target)
            assert not {m for m in inner if m.split(".")[0] in FORBIDDEN}, f"{name} imports package {module}, which imports a framework"
        else:
            pytest.fail(f"{name} imports {module}, which is not on the list of plain modules")
    # Importing the module runs its packages' __init__ first: they must be plain as well.
    for package in parents(name):
        init = module_path(package)
        inner = imported_modules(init.read_text(), init)
        assert not {m for m in inner if m.split(".")[0] in FORBIDDEN}, f"{package}/__init__.py imports a framework"


def test_a_module_that_calls_itself_plain_is_listed():
    listed = set(listed_modules())
    claiming = []
    for path in sorted(APPS.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "Pure: must not import django" in docstring or ("Plain Python" in docstring and "no Django" in docstring):
            claiming.append(module_name(path))
    assert claiming, "no module calls itself plain"
    assert sorted(set(claiming) - listed) == []


def test_relative_and_function_level_imports_count():
    """The checker itself: the imports that used to escape it are seen."""
    path = APPS / "core" / "panels.py"
    source = "def f():\n    from . import views\n    from .models import Heartbeat\n    import django.db\n"
    imported = imported_modules(source, path)
    assert {"apps.core.views", "apps.core.models", "django.db"} <= imported
    assert imported_modules("from ..jobs.slurm import run_slurm_command\n", path) >= {"apps.jobs.slurm"}
