"""Modules that declare themselves pure (docstring says "Pure: must not import django", or "Plain
Python" and "no Django") import no framework: they take and return plain data and are tested without
settings or a database."""
import ast
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[1] / "apps"
FORBIDDEN = {"django", "rest_framework", "celery", "django_plotly_dash", "drf_spectacular"}


def pure_modules() -> list[Path]:
    modules = []
    for path in sorted(APPS.rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "Pure: must not import django" in docstring or ("Plain Python" in docstring and "no Django" in docstring):
            modules.append(path)
    return modules


def test_there_are_pure_modules_to_check():
    modules = pure_modules()
    assert APPS / "accounts" / "claims.py" in modules
    assert {APPS / "saturation" / name for name in ("scoring.py", "products.py", "stragglers.py", "figures.py")} <= set(modules)
    assert APPS / "telemetry" / "backends" / "embedded.py" in modules


@pytest.mark.parametrize("path", pure_modules(), ids=lambda path: str(path.relative_to(APPS)))
def test_pure_module_imports_no_framework(path):
    imported, app_modules = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.ImportFrom) and node.level:
            package = path.parent
            for _ in range(node.level - 1):
                package = package.parent
            names = [".".join(["apps", *package.relative_to(APPS).parts, *(node.module or "").split(".")]).rstrip(".")]
        else:
            continue
        imported.update(name.split(".")[0] for name in names)
        app_modules.update(name for name in names if name.startswith("apps."))
    assert not imported & FORBIDDEN, f"{path} imports {sorted(imported & FORBIDDEN)}"
    # Importing another app module is fine only if that module is pure too.
    pure = {".".join(["apps", *p.relative_to(APPS).with_suffix("").parts]) for p in pure_modules()}
    impure = {name for name in app_modules if name not in pure and (APPS.parent / (name.replace(".", "/") + ".py")).exists()}
    assert not impure, f"{path} imports non-pure app modules {sorted(impure)}"
