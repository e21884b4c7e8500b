"""What the service-plane cluster offers, as the site describes it (``inventory.yaml``).

GPU models with the whole GPUs and the MIG slices they are split into, storage classes and which
environments may use them, the service blueprints teams can pick (each a Helm chart at a pinned
version, with the parameters a team may set), the names the platform reserves, the IdP group names
bound per team, and where things live (Rancher cluster id, Argo CD namespace, ingress and monitoring
namespaces, the GitOps repository). Loaded once, validated, read by validation, rendering and forms.

Plain Python: no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .quantities import QuantityError, parse_quantity

DEFAULT_FILE = Path(__file__).with_name("inventory.yaml")


class InventoryError(ValueError):
    pass


@dataclass(frozen=True)
class GpuModel:
    id: str
    label: str
    whole: int  # whole GPUs on the cluster (quota key requests.nvidia.com/gpu)
    mig: dict  # MIG profile -> slices on the cluster (requests.nvidia.com/mig-<profile>)
    node_label: str = ""  # the node label value that selects this model (nvidia.com/gpu.product)

    def resource(self, profile: str) -> str:
        return "nvidia.com/gpu" if profile == "whole" else f"nvidia.com/mig-{profile}"

    def capacity(self, profile: str) -> int:
        return self.whole if profile == "whole" else int(self.mig.get(profile, 0))

    @property
    def profiles(self) -> list[str]:
        return ["whole", *self.mig]


@dataclass(frozen=True)
class Blueprint:
    id: str
    label: str
    description: str
    repo: str
    chart: str
    version: str
    params: dict  # name -> {"type": hostname|size|count|text|choice, "label", "required", "default", "choices", "help", "value"}
    uses_gpus: tuple = ()  # parameters whose product is the whole GPUs the service asks for (e.g. workers x gpus_per_worker)
    values: dict = field(default_factory=dict)  # chart values the platform fixes (ingress on, GPU type), set before the parameters


@dataclass(frozen=True)
class Inventory:
    cluster_name: str
    rancher_cluster_id: str
    rancher_project: str
    api_server: str
    argocd_namespace: str
    gitops_repo: str
    ingress_domain: str
    ingress_namespace: str
    monitoring_namespace: str
    dns_namespace: str
    environments: dict  # name -> {"storage": [classes], "approval": bool, "psa": [levels]}
    storage_classes: dict  # name -> label
    gpu_models: dict  # id -> GpuModel
    blueprints: dict  # id -> Blueprint
    reserved_prefixes: tuple
    groups: dict  # role -> pattern with {team}
    limits: dict = field(default_factory=dict)  # default container requests/limits for the LimitRange
    default_envelope: dict = field(default_factory=dict)
    storage_capacity: dict = field(default_factory=dict)  # class -> bytes the cluster offers in all (absent: not stated)

    def gpu_resource_keys(self) -> list[str]:
        keys = {"nvidia.com/gpu"}
        for model in self.gpu_models.values():
            keys.update(model.resource(profile) for profile in model.mig)
        return sorted(keys)


def _names(value) -> tuple:
    if not value:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def load_inventory(path: str | Path | None = None) -> Inventory:
    path = Path(path) if path else DEFAULT_FILE
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InventoryError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise InventoryError(f"{path}: expected a mapping")
    try:
        cluster, gitops = data["cluster"], data["gitops"]
        models = {}
        for item in data["gpu_models"]:
            mig = {str(profile): int(count) for profile, count in (item.get("mig") or {}).items()}
            for profile in mig:
                if not re.fullmatch(r"\d+g\.\d+gb(\+me)?", profile):
                    raise InventoryError(f"{path}: MIG profile {profile!r} of {item['id']} is not like 1g.10gb")
            models[item["id"]] = GpuModel(item["id"], item["label"], int(item.get("whole", 0)), mig, item.get("node_label", ""))
        blueprints = {}
        for key, item in data["blueprints"].items():
            blueprints[key] = Blueprint(key, item["label"], item.get("description", ""), item["repo"], item["chart"], str(item["version"]),
                                        item.get("params") or {}, _names(item.get("uses_gpus")), item.get("values") or {})
            unknown = set(blueprints[key].uses_gpus) - set(blueprints[key].params)
            if unknown:
                raise InventoryError(f"{path}: uses_gpus of blueprint {key} names unknown parameters {sorted(unknown)}")
            if not isinstance(blueprints[key].values, dict):
                raise InventoryError(f"{path}: values of blueprint {key} must be a mapping of chart values")
        for env, item in data["environments"].items():
            unknown = set(item.get("storage", [])) - set(data["storage_classes"])
            if unknown:
                raise InventoryError(f"{path}: environment {env} allows unknown storage classes {sorted(unknown)}")
        capacity = {}
        for name, size in (data.get("storage_capacity") or {}).items():
            if name not in data["storage_classes"]:
                raise InventoryError(f"{path}: storage_capacity names unknown storage class {name!r}")
            capacity[name] = parse_quantity(size)
        envelope = data.get("default_envelope") or {}
        for key in ("cpu", "memory"):
            if key in envelope:
                parse_quantity(envelope[key])
        return Inventory(
            cluster_name=cluster["name"], rancher_cluster_id=cluster["rancher_cluster_id"], rancher_project=cluster.get("rancher_project", ""),
            api_server=cluster.get("api_server", "https://kubernetes.default.svc"), argocd_namespace=cluster.get("argocd_namespace", "argocd"),
            gitops_repo=gitops["repo_url"], ingress_domain=cluster["ingress_domain"], ingress_namespace=cluster["ingress_namespace"],
            monitoring_namespace=cluster["monitoring_namespace"], dns_namespace=cluster.get("dns_namespace", "kube-system"),
            environments=data["environments"], storage_classes=data["storage_classes"], gpu_models=models, blueprints=blueprints,
            reserved_prefixes=tuple(data.get("reserved_prefixes", ())), groups=data["groups"], limits=data.get("limits") or {},
            default_envelope=envelope, storage_capacity=capacity)
    except (KeyError, TypeError, ValueError, QuantityError) as exc:
        raise InventoryError(f"{path}: {type(exc).__name__}: {exc}") from exc
