"""The renderer: golden manifests for a typical request, every manifest valid against the bundled
Kubernetes and Argo CD schemas, the platform's guard rails in place, and hostile input inert."""
import copy
import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.namespaces.render import files, render, to_yaml
from apps.namespaces.schemas import FILES, FOLDER, validate_manifests
from apps.namespaces.spec import validate
from tests.namespaces.conftest import context, typical

GOLDEN = Path(__file__).with_name("golden") / "typical"
HOST = "a-llm01-mlflow.svc.alps.example.org"


def golden_request() -> dict:
    spec = typical()
    spec["quota"]["gpus"].append({"model": "gh200", "profile": "whole", "count": 1})
    spec["hostnames"].append("a-llm01-chat.svc.alps.example.org")
    spec["blueprints"].append({"id": "open-webui", "params": {"hostname": "a-llm01-chat.svc.alps.example.org", "gpus": 1}})
    return spec


def rendered_files(spec: dict) -> dict[str, str]:
    manifests = render(spec, _inventory())
    return files(spec, manifests)


def _inventory():
    from apps.namespaces.inventory import load_inventory

    return load_inventory()


def test_golden_manifests_of_a_typical_request(inventory):
    spec = golden_request()
    assert validate(spec, **context(inventory)).ok
    out = rendered_files(spec)
    if os.environ.get("BELVEDERE_UPDATE_GOLDEN"):  # after a deliberate change: regenerate, then review the diff in git
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for stale in GOLDEN.iterdir():
            stale.unlink()
        for name, text in out.items():
            (GOLDEN / name).write_text(text)
    expected = {path.name: path.read_text() for path in sorted(GOLDEN.iterdir())}
    assert sorted(out) == sorted(expected)
    for name in expected:
        assert out[name] == expected[name], f"{name} differs from tests/namespaces/golden/typical/{name}"


def test_the_same_request_renders_the_same_bytes(inventory):
    assert rendered_files(golden_request()) == rendered_files(copy.deepcopy(golden_request()))


def _variants():
    base = golden_request()
    baseline = {**copy.deepcopy(base), "psa": "baseline", "psa_justification": "the Ollama image runs as root"}
    everything = copy.deepcopy(base)
    everything["hostnames"] += ["a-llm01-wandb.svc.alps.example.org", "a-llm01-llm.svc.alps.example.org"]
    everything["quota"]["gpus"] = [{"model": "h100", "profile": "whole", "count": 6}, {"model": "gh200", "profile": "3g.48gb", "count": 2},
                                   {"model": "h100", "profile": "1g.10gb", "count": 4}]
    everything["blueprints"] = [
        {"id": "mlflow", "params": {"hostname": HOST}},
        {"id": "open-webui", "params": {"hostname": "a-llm01-chat.svc.alps.example.org", "gpus": 2, "model_cache": "200Gi"}},
        {"id": "ray", "params": {"workers": 2, "gpus_per_worker": 1}},
        {"id": "wandb", "params": {"hostname": "a-llm01-wandb.svc.alps.example.org", "license": "eyJhbGciOi.license.key"}},
        {"id": "inference", "params": {"hostname": "a-llm01-llm.svc.alps.example.org", "model": "meta-llama/Llama-3.1-8B-Instruct", "gpus": 2}},
    ]
    everything["quota"]["storage"] = {"longhorn": {"size": "1536Mi", "pvcs": 3}, "ceph-rbd": {"size": "2Ti"}}
    bare = {**copy.deepcopy(base), "quota": {"cpu": {"requests": "500m"}, "memory": {"requests": "1Gi"}}, "hostnames": [], "blueprints": []}
    prod = {**copy.deepcopy(bare), "environment": "prod", "quota": {**bare["quota"], "storage": {"cephfs": {"size": "10Ti", "pvcs": 100}}}}
    return {"typical": base, "baseline": baseline, "everything": everything, "bare": bare, "prod": prod}


@pytest.mark.parametrize("variant", list(_variants()))
def test_every_manifest_validates_against_the_bundled_schemas(inventory, variant):
    spec = _variants()[variant]
    check = validate(spec, **context(inventory))
    assert check.ok, check.problems
    manifests = render(spec, inventory)
    assert {(m["apiVersion"], m["kind"]) for m in manifests} <= set(FILES)
    assert validate_manifests(manifests) == []
    # and what is committed is those manifests, byte for byte through YAML
    assert list(yaml.safe_load_all(to_yaml(manifests))) == manifests


def test_the_schemas_catch_what_a_cluster_would_refuse(inventory):
    manifests = render(typical(), inventory)
    broken = copy.deepcopy(manifests)
    broken[0]["metadata"]["lables"] = {"x": "y"}  # a misspelt field: strict schemas refuse unknown fields
    broken[1]["spec"]["hard"]["requests.cpu"] = {"value": 8}  # a quantity must be a string or number
    broken[2]["spec"]["limits"][0]["type"] = 3
    app = next(m for m in broken if m["kind"] == "Application")
    del app["spec"]["destination"]["namespace"]
    app["spec"]["source"]["helm"]["valuesObject"] = "not an object"
    found = {(p.kind, p.path) for p in validate_manifests(broken)}
    assert ("Namespace", "metadata") in found  # additionalProperties names the parent
    assert ("ResourceQuota", "spec.hard.requests.cpu") in found
    assert ("LimitRange", "spec.limits.0.type") in found
    assert ("Application", "spec.source.helm.valuesObject") in found
    assert validate_manifests([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}])[0].message == \
        "no schema bundled for v1 Secret"
    for file_name in FILES.values():
        assert (FOLDER / file_name).exists(), f"{file_name} is missing from apps/namespaces/schemas/"


def test_guard_rails(inventory):
    spec = _variants()["everything"]
    manifests = render(spec, inventory)
    by_kind = {}
    for manifest in manifests:
        by_kind.setdefault(manifest["kind"], []).append(manifest)
    namespace = by_kind["Namespace"][0]["metadata"]
    assert namespace["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert namespace["annotations"]["field.cattle.io/projectId"] == f"{inventory.rancher_cluster_id}:{inventory.rancher_project}"
    hard = by_kind["ResourceQuota"][0]["spec"]["hard"]
    gpu_keys = {key for key in hard if "nvidia.com" in key}
    assert gpu_keys and all(key.startswith("requests.nvidia.com/") for key in gpu_keys)  # extended resources: requests only
    assert hard["requests.nvidia.com/gpu"] == "6" and hard["requests.nvidia.com/mig-3g.48gb"] == "2"
    assert hard["requests.nvidia.com/mig-1g.10gb"] == "4" and hard["requests.nvidia.com/mig-2g.20gb"] == "0"
    assert hard["longhorn.storageclass.storage.k8s.io/requests.storage"] == "1536Mi"
    assert hard["ceph-rbd.storageclass.storage.k8s.io/requests.storage"] == "2Ti"
    assert hard["cephfs.storageclass.storage.k8s.io/persistentvolumeclaims"] == "0"  # not asked: no volumes of that class
    limit_range = yaml.safe_dump(by_kind["LimitRange"][0])
    assert "nvidia" not in limit_range and "gpu" not in limit_range  # a GPU default would put a GPU into every pod
    policies = {m["metadata"]["name"]: m["spec"] for m in by_kind["NetworkPolicy"]}
    assert policies["default-deny"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert set(policies) == {"default-deny", "allow-dns", "allow-same-namespace", "allow-ingress-controller", "allow-monitoring"}
    assert all(subject["kind"] == "Group" for m in by_kind["RoleBinding"] for subject in m["subjects"])
    assert [m["subjects"][0]["name"] for m in by_kind["RoleBinding"]] == ["a-llm01-admins", "a-llm01", "a-llm01-readers"]
    project = by_kind["AppProject"][0]["spec"]
    assert project["destinations"] == [{"server": inventory.api_server, "namespace": "a-llm01-mlflow"}]
    assert project["clusterResourceWhitelist"] == []
    assert {("", "ResourceQuota"), ("", "LimitRange"), ("networking.k8s.io", "NetworkPolicy")} <= \
        {(item["group"], item["kind"]) for item in project["namespaceResourceBlacklist"]}
    assert set(project["sourceRepos"]) == {inventory.gitops_repo} | {bp.repo for bp in inventory.blueprints.values()}
    apps = {m["metadata"]["labels"]["belvedere.io/blueprint"]: m["spec"] for m in by_kind["Application"]}
    assert sorted(apps) == ["inference", "mlflow", "open-webui", "ray", "wandb"]
    for blueprint_id, app in apps.items():
        assert app["source"]["targetRevision"] == inventory.blueprints[blueprint_id].version  # pinned, never a range
        assert app["project"] == "a-llm01-mlflow" and app["destination"]["namespace"] == "a-llm01-mlflow"
    assert apps["ray"]["source"]["helm"]["valuesObject"] == {"worker": {"replicas": 2, "resources": {"limits": {"nvidia.com/gpu": 1}}}}
    assert apps["inference"]["source"]["helm"]["valuesObject"]["servingEngineSpec"]["modelSpec"][0] == \
        {"modelURL": "meta-llama/Llama-3.1-8B-Instruct", "requestGPU": 2}
    assert apps["mlflow"]["source"]["helm"]["valuesObject"] == {"ingress": {"enabled": True, "hosts": [{"host": HOST}]},
                                                             "persistence": {"size": "20Gi"}}
    assert apps["open-webui"]["source"]["helm"]["valuesObject"]["ollama"] == \
        {"enabled": True, "ollama": {"gpu": {"enabled": True, "type": "nvidia", "number": 2}}, "persistentVolume": {"size": "200Gi"}}


INJECTIONS = [
    "x\nkind: ClusterRole\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding",
    "'; quoted: \"both\" # comment",
    "&anchor value *alias !!python/object:os.system",
    "{a: 1, b: [2, 3]}",
    "yes",
    "null",
    "0x1F",
    "2027-01-01",
    "- item\n- other",
    "key: value: other",
    "%YAML 1.1\n--- !!str",
    "...\n---\n",
    "${HOME} $(rm -rf /) `id`",
]


@pytest.mark.parametrize("hostile", INJECTIONS)
def test_yaml_injection_stays_one_string(inventory, hostile):
    spec = typical()
    spec["purpose"] = hostile
    spec["blueprints"] = [{"id": "wandb", "params": {"hostname": HOST, "license": hostile[:200]}}]
    check = validate(spec, **context(inventory))
    assert check.ok, check.problems  # ordinary characters: accepted, and inert
    manifests = render(spec, inventory)
    documents = list(yaml.safe_load_all(to_yaml(manifests)))
    assert len(documents) == len(manifests)
    assert [d["kind"] for d in documents] == [m["kind"] for m in manifests]
    assert documents[0]["metadata"]["annotations"]["belvedere.io/purpose"] == hostile
    wandb = next(d for d in documents if d["kind"] == "Application")
    assert wandb["spec"]["source"]["helm"]["valuesObject"]["global"]["license"] == hostile[:200]
    committed = {name: list(yaml.safe_load_all(text)) if name.endswith(".yaml") else [text]
                 for name, text in rendered_files(spec).items()}
    readme = committed.pop("README.md")
    assert sum(len(documents) for documents in committed.values()) == len(manifests)
    # the README's request is an indented code block: no line of it starts at the margin, so none can end it
    request = readme[0].split("rendered from:\n\n", 1)[1] if isinstance(readme[0], str) else None
    assert request is not None and all(line.startswith("    ") for line in request.splitlines())
    assert yaml.safe_load("".join(f"{line[4:]}\n" for line in request.splitlines())) == spec


@pytest.mark.parametrize("field, value, message", [
    ("purpose", "Tracking \u202eexe.gnp", "U+202E"),  # right-to-left override
    ("purpose", "pay\u200bment", "U+200B"),
    ("purpose", "bell\x07", "U+0007"),
    ("name", "mlflоw", "RFC 1123"),  # Cyrillic о looks like Latin o
    ("name", "ｍlflow", "RFC 1123"),  # fullwidth m
    ("contacts", ["jane@exаmple.org"], "an e-mail address"),  # Cyrillic а
])
def test_unicode_tricks_are_refused(inventory, field, value, message):
    spec = {**typical(), field: value}
    found = [p for p in validate(spec, **context(inventory)).problems]
    assert any(message in p.message for p in found), found


@pytest.mark.parametrize("path, value", [
    (("quota", "cpu", "limits"), "1" + "0" * 40),
    (("quota", "memory", "limits"), "9" * 30 + "Ei"),
    (("quota", "memory", "requests"), "1e31"),
    (("quota", "cpu", "requests"), "NaN"),
    (("quota", "cpu", "requests"), "Infinity"),
    (("quota", "cpu", "requests"), -4),
    (("quota", "memory", "requests"), 10**400),
])
def test_huge_and_odd_numbers_are_refused(inventory, path, value):
    spec = typical()
    spec[path[0]][path[1]][path[2]] = value
    check = validate(spec, **context(inventory))
    assert not check.ok and any(p.field == ".".join(path) for p in check.problems), check.problems


def test_huge_counts_are_refused(inventory):
    spec = typical()
    spec["quota"]["gpus"][0]["count"] = 10**30
    spec["quota"]["storage"]["longhorn"]["pvcs"] = 10**12
    found = {p.field for p in validate(spec, **context(inventory)).problems}
    assert {"quota.gpus.0.count", "quota.storage.longhorn.pvcs"} <= found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(purpose=st.text(min_size=1, max_size=300), license_key=st.text(min_size=1, max_size=200))
def test_any_accepted_text_renders_inert(inventory, purpose, license_key):
    """Property: whatever text passes validation comes back from the YAML exactly, in its own field."""
    spec = typical()
    spec["purpose"] = purpose
    spec["blueprints"] = [{"id": "wandb", "params": {"hostname": HOST, "license": license_key}}]
    if not validate(spec, **context(inventory)).ok:
        return  # refused (invisible characters and the like): nothing is rendered
    manifests = render(spec, inventory)
    documents = list(yaml.safe_load_all(to_yaml(manifests)))
    assert documents == manifests
