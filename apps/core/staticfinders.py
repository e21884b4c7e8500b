"""Serve JavaScript that ships inside Python packages as ordinary static files.

Plotly's Python package carries plotly.min.js; exposing that one file (not the package's data
folders) under ``/static/vendor/`` keeps pages working on offline HPC networks and keeps the
browser's copy in step with the pinned Python package.
"""
from importlib.util import find_spec
from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

VENDORED = {
    # static path: (python package, file inside it)
    "vendor/plotly.min.js": ("plotly", "package_data/plotly.min.js"),
}


def _source(package: str, relative: str) -> Path | None:
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    return path if path.exists() else None


class VendoredPackageFinder(BaseFinder):
    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        if path in VENDORED:
            source = _source(*VENDORED[path])
            if source:
                return [str(source)] if find_all else str(source)
        return [] if find_all else None

    def list(self, ignore_patterns):
        for static_path, (package, relative) in VENDORED.items():
            source = _source(package, relative)
            if source is None:
                continue
            storage = FileSystemStorage(location=str(source.parent))
            storage.prefix = str(Path(static_path).parent)
            yield source.name, storage
