"""From a validated request to the manifests that provision its namespace.

Everything is built as Python data and serialised by a YAML library — never by filling text
templates with user input — so a purpose such as ``"x\\nkind: ClusterRole"`` is one string value in
one annotation, whatever it contains. The output is deterministic: the same request renders the
same bytes, so committing it again changes nothing.

What a team gets (``reference/service-plane-catalog.md`` A3):

* ``Namespace`` with Pod Security Admission labels (enforce/audit/warn, pinned version), the
  Rancher project label and annotation, and owner, contact, purpose, expiry and request annotations;
* ``ResourceQuota``: CPU and memory requests/limits, GPUs only as ``requests.nvidia.com/…``
  (extended resources have no limits in quota), storage per class;
* ``LimitRange`` with container defaults for CPU and memory — never a GPU default, which would put
  a GPU into every pod;
* default-deny ``NetworkPolicy`` (ingress and egress) and allows for DNS, the namespace itself, the
  ingress controller and monitoring;
* ``RoleBinding`` s to the team's IdP groups (admin, edit, view) — never to individual people;
* an Argo CD ``AppProject`` fencing the team to its namespace, the GitOps repository and the charts
  of its blueprints, with quota, limit and policy kinds blacklisted so they stay the platform's;
* one Argo CD ``Application`` per chosen blueprint, its chart version pinned, its project fixed.

Plain Python: no Django.
"""
from __future__ import annotations

import copy

import yaml

from .inventory import Inventory
from .quantities import bytes_text, cpu_text, parse_quantity, whole
from .spec import namespace_name

PSA_VERSION = "v1.30"
MANAGED_BY = "belvedere"
GUARDED_KINDS = (("", "ResourceQuota"), ("", "LimitRange"), ("networking.k8s.io", "NetworkPolicy"),
                 ("cilium.io", "CiliumNetworkPolicy"), ("cilium.io", "CiliumClusterwideNetworkPolicy"))


class _Dumper(yaml.SafeDumper):
    """Block style; strings that YAML could read as something else are quoted by the emitter."""


def _str(dumper, value):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(manifests: list[dict]) -> str:
    return yaml.dump_all(manifests, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)


def _labels(team: str, name: str, environment: str) -> dict:
    return {"app.kubernetes.io/managed-by": MANAGED_BY, "belvedere.io/team": team, "belvedere.io/namespace": name,
            "belvedere.io/environment": environment}


def render(spec: dict, inventory: Inventory) -> list[dict]:
    """The manifests of the namespace ``spec`` describes (``spec`` must have passed ``validate``).

    They depend on the spec alone — who asked and in which request is in the commit message, not in
    the files — so the same spec always renders the same bytes and re-submitting it commits nothing."""
    team, environment = spec["team"], spec["environment"]
    name = namespace_name(team, spec["name"])
    labels = _labels(team, name, environment)
    psa = spec.get("psa", "restricted")
    project = inventory.rancher_project or f"{team}"
    rancher = f"{inventory.rancher_cluster_id}:{project}"
    namespace = {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {
            "name": name,
            "labels": {**labels, "pod-security.kubernetes.io/enforce": psa, "pod-security.kubernetes.io/enforce-version": PSA_VERSION,
                       "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/audit-version": PSA_VERSION,
                       "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": PSA_VERSION,
                       "field.cattle.io/projectId": project},
            "annotations": {"field.cattle.io/projectId": rancher, "belvedere.io/owner": team, "belvedere.io/purpose": spec.get("purpose", ""),
                            "belvedere.io/contacts": ", ".join(spec.get("contacts") or []), "belvedere.io/expires": str(spec.get("expires", "")),
                            **({"belvedere.io/psa-justification": spec["psa_justification"]} if psa != "restricted" else {})},
        },
    }
    manifests = [namespace, _quota(spec, name, labels, inventory), _limit_range(name, labels, inventory)]
    manifests.extend(_network_policies(name, labels, inventory))
    manifests.extend(_role_bindings(team, name, labels, inventory))
    manifests.append(_app_project(spec, name, labels, inventory))
    manifests.extend(_applications(spec, name, labels, inventory))
    return manifests


def _quota(spec: dict, name: str, labels: dict, inventory: Inventory) -> dict:
    quota = spec.get("quota") or {}
    hard = {}
    for resource, show in (("cpu", cpu_text), ("memory", bytes_text)):
        block = quota.get(resource) or {}
        if block.get("requests"):
            hard[f"requests.{resource}"] = show(parse_quantity(block["requests"]))
        if block.get("limits"):
            hard[f"limits.{resource}"] = show(parse_quantity(block["limits"]))
    gpus: dict[str, int] = {}
    for item in quota.get("gpus") or []:
        model = inventory.gpu_models[item["model"]]
        resource = model.resource(item.get("profile", "whole"))
        gpus[resource] = gpus.get(resource, 0) + whole(item["count"])
    for resource in inventory.gpu_resource_keys():  # extended resources: requests only; 0 forbids what was not asked
        hard[f"requests.{resource}"] = str(gpus.get(resource, 0))
    for storage_class in sorted(inventory.storage_classes):
        block = (quota.get("storage") or {}).get(storage_class)
        key = f"{storage_class}.storageclass.storage.k8s.io"
        if block and block.get("size"):
            hard[f"{key}/requests.storage"] = bytes_text(parse_quantity(block["size"]))
            hard[f"{key}/persistentvolumeclaims"] = str(whole(block.get("pvcs") or 20))
        else:
            hard[f"{key}/persistentvolumeclaims"] = "0"
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "belvedere-quota", "namespace": name, "labels": labels},
            "spec": {"hard": hard}}


def _limit_range(name: str, labels: dict, inventory: Inventory) -> dict:
    limits = inventory.limits or {}
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "belvedere-defaults", "namespace": name, "labels": labels},
            "spec": {"limits": [{"type": "Container",
                                 "defaultRequest": {"cpu": str(limits.get("default_request_cpu", "100m")),
                                                    "memory": str(limits.get("default_request_memory", "256Mi"))},
                                 "default": {"cpu": str(limits.get("default_cpu", "1")), "memory": str(limits.get("default_memory", "1Gi"))}}]}}


def _policy(name: str, labels: dict, policy: str, spec: dict) -> dict:
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": policy, "namespace": name, "labels": labels}, "spec": spec}


def _namespace_selector(namespace: str) -> dict:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}


def _network_policies(name: str, labels: dict, inventory: Inventory) -> list[dict]:
    return [
        _policy(name, labels, "default-deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
        _policy(name, labels, "allow-dns", {
            "podSelector": {}, "policyTypes": ["Egress"],
            "egress": [{"to": [{**_namespace_selector(inventory.dns_namespace), "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                        "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]}),
        _policy(name, labels, "allow-same-namespace", {
            "podSelector": {}, "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": [{"podSelector": {}}]}], "egress": [{"to": [{"podSelector": {}}]}]}),
        _policy(name, labels, "allow-ingress-controller", {
            "podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [_namespace_selector(inventory.ingress_namespace)]}]}),
        _policy(name, labels, "allow-monitoring", {
            "podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": [_namespace_selector(inventory.monitoring_namespace)]}]}),
    ]


def _role_bindings(team: str, name: str, labels: dict, inventory: Inventory) -> list[dict]:
    out = []
    for role in ("admin", "edit", "view"):
        pattern = inventory.groups.get(role)
        if not pattern:
            continue
        out.append({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                    "metadata": {"name": f"belvedere-{role}", "namespace": name, "labels": labels},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": pattern.format(team=team)}]})
    return out


def _app_project(spec: dict, name: str, labels: dict, inventory: Inventory) -> dict:
    team = spec["team"]
    repos = sorted({inventory.gitops_repo, *(inventory.blueprints[b["id"]].repo for b in spec.get("blueprints") or [])})
    roles = []
    for role, policy, who in (("admin", "*", "administrators"), ("view", "get", "readers")):
        pattern = inventory.groups.get(role)
        if pattern:
            roles.append({"name": role, "description": f"{team} {who}", "groups": [pattern.format(team=team)],
                          "policies": [f"p, proj:{name}:{role}, applications, {policy}, {name}/*, allow"]})
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
            "metadata": {"name": name, "namespace": inventory.argocd_namespace, "labels": labels,
                         "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
            "spec": {"description": f"{team}: {spec.get('purpose', '')[:200]}", "sourceRepos": repos,
                     "destinations": [{"server": inventory.api_server, "namespace": name}],
                     "clusterResourceWhitelist": [],
                     "namespaceResourceBlacklist": [{"group": group, "kind": kind} for group, kind in GUARDED_KINDS],
                     "orphanedResources": {"warn": True}, "roles": roles}}


def _path(target: str) -> list:
    r"""``ingress.hosts.0.host`` -> ["ingress", "hosts", 0, "host"]; ``\.`` is a dot inside a key
    (``resources.limits.nvidia\.com/gpu``)."""
    parts = [part.replace("\0", ".") for part in target.replace("\\.", "\0").split(".")]
    return [int(part) if part.isdigit() else part for part in parts]


def _set(values: dict, path: list, value) -> None:
    node = values
    for part, following in zip(path[:-1], path[1:]):
        empty = [] if isinstance(following, int) else {}
        if isinstance(part, int):
            while len(node) <= part:
                node.append(None)
            node[part] = node[part] if node[part] is not None else empty
            node = node[part]
        else:
            node = node.setdefault(part, empty)
    last = path[-1]
    if isinstance(last, int):
        while len(node) <= last:
            node.append(None)
    node[last] = value


def _values(blueprint, params: dict) -> dict:
    """The chart values: the platform's fixed ones for the blueprint, then the team's parameters at the
    places the blueprint names."""
    values: dict = copy.deepcopy(blueprint.values)
    for key, rule in blueprint.params.items():
        value = params.get(key, rule.get("default"))
        if value in (None, ""):
            continue
        _set(values, _path(rule.get("value", key)), whole(value) if rule.get("type") == "count" else value)
    return values


def _applications(spec: dict, name: str, labels: dict, inventory: Inventory) -> list[dict]:
    out = []
    for item in sorted(spec.get("blueprints") or [], key=lambda b: b["id"]):
        blueprint = inventory.blueprints[item["id"]]
        out.append({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                    "metadata": {"name": f"{name}-{blueprint.id}", "namespace": inventory.argocd_namespace,
                                 "labels": {**labels, "belvedere.io/blueprint": blueprint.id},
                                 "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
                    "spec": {"project": name,
                             "source": {"repoURL": blueprint.repo, "chart": blueprint.chart, "targetRevision": blueprint.version,
                                        "helm": {"releaseName": blueprint.id, "valuesObject": _values(blueprint, item.get("params") or {})}},
                             "destination": {"server": inventory.api_server, "namespace": name},
                             "syncPolicy": {"automated": {"prune": True, "selfHeal": True},
                                            "syncOptions": ["ServerSideApply=true", "CreateNamespace=false"]}}})
    return out


def readme(spec: dict) -> str:
    """The directory's README: what it is, and the request it was rendered from. Argo CD's directory
    source reads only YAML and JSON files, so this file is never applied. The spec is an indented code
    block, so no text in it can end the block and turn into Markdown."""
    name = namespace_name(spec["team"], spec["name"])
    request = yaml.dump(spec, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)
    return (f"# {name}\n\nNamespace of the team `{spec['team']}` ({spec['environment']}), written by Belvedere. Change it through "
            f"its page in Belvedere, not here: the next change would overwrite an edit.\n\nThe request it was rendered from:\n\n"
            + "".join(f"    {line}\n" for line in request.splitlines()))


def files(spec: dict, manifests: list[dict]) -> dict[str, str]:
    """The namespace's directory in the GitOps repository: file name -> text (deterministic order)."""
    out = {"README.md": readme(spec)}
    order = {"Namespace": "00", "ResourceQuota": "10", "LimitRange": "11", "NetworkPolicy": "20", "RoleBinding": "30",
             "AppProject": "40", "Application": "50"}
    groups: dict[str, list[dict]] = {}
    for manifest in manifests:
        kind = manifest["kind"]
        stem = f"{order[kind]}-{kind.lower()}"
        if kind == "Application":
            stem = f"{order[kind]}-application-{manifest['metadata']['labels']['belvedere.io/blueprint']}"
        groups.setdefault(f"{stem}.yaml", []).append(manifest)
    for file_name in sorted(groups):
        out[file_name] = to_yaml(groups[file_name])
    return out
