"""Validate rendered manifests against the Kubernetes and Argo CD schemas bundled in ``schemas/``.

The schemas are the standalone, strict JSON Schemas published for each Kubernetes kind (no
unknown fields anywhere) and those of the Argo CD CRDs; ``schemas/README.md`` says where each
came from. A manifest whose kind has no bundled schema is itself a problem, so nothing unchecked
is ever committed. Plain Python: no Django.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jsonschema

FOLDER = Path(__file__).with_name("schemas")
FILES = {
    ("v1", "Namespace"): "namespace-v1.json",
    ("v1", "ResourceQuota"): "resourcequota-v1.json",
    ("v1", "LimitRange"): "limitrange-v1.json",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicy-networking-v1.json",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "rolebinding-rbac-v1.json",
    ("argoproj.io/v1alpha1", "AppProject"): "appproject_v1alpha1.json",
    ("argoproj.io/v1alpha1", "Application"): "application_v1alpha1.json",
}


@dataclass
class SchemaProblem:
    index: int
    kind: str
    name: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}: {self.path or '(top)'}: {self.message}"


@lru_cache(maxsize=None)
def _validator(file_name: str):
    schema = json.loads((FOLDER / file_name).read_text())
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def validate_manifests(manifests: list[dict]) -> list[SchemaProblem]:
    problems = []
    for index, manifest in enumerate(manifests):
        kind = manifest.get("kind", "?")
        name = (manifest.get("metadata") or {}).get("name", "?")
        file_name = FILES.get((manifest.get("apiVersion"), kind))
        if file_name is None or not (FOLDER / file_name).exists():
            problems.append(SchemaProblem(index, kind, name, "", f"no schema bundled for {manifest.get('apiVersion')} {kind}"))
            continue
        for error in sorted(_validator(file_name).iter_errors(manifest), key=lambda e: list(e.absolute_path)):
            path = ".".join(str(part) for part in error.absolute_path)
            problems.append(SchemaProblem(index, kind, name, path, error.message[:300]))
    return problems
