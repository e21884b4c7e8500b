"""Every rule of a namespace request, with the field it names; the envelope routes, it does not refuse."""
import copy

import pytest

from apps.namespaces.spec import Usage, validate
from tests.namespaces.conftest import context, typical


def problems(inventory, spec, **overrides):
    check = validate(spec, **context(inventory, **overrides))
    return {p.field: p.message for p in check.problems}


def changed(path, value, base=None):
    spec = copy.deepcopy(base or typical())
    node = spec
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    last = keys[-1]
    if value is KeyError:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return spec


def test_the_typical_request_passes_inside_the_envelope(inventory):
    check = validate(typical(), **context(inventory))
    assert check.ok and check.needs_approval == []
    assert check.usage.gpus == {"nvidia.com/mig-1g.10gb": 2} and int(check.usage.cpu) == 16


# (where in the typical request, the value put there, the field the problem names, words of its message)
RULES = [
    ("name", "MLflow", "name", "lowercase letters"),
    ("name", "-mlflow", "name", "RFC 1123"),
    ("name", "ml_flow", "name", "RFC 1123"),
    ("name", "x" * 60, "name", "at most 55 after the prefix 'a-llm01-'"),
    ("name", "", "name", "required"),
    ("name", "mlflоw", "name", "lowercase letters"),  # a Cyrillic о
    # Issue 16 item 7: whole names only, a trailing newline was accepted by re.match and "$"
    ("name", "tracking\n", "name", "RFC 1123"),
    ("team", "a-llm01\n", "team", "choose one of your teams"),
    ("contacts.0", "jane.doe@example.org\n", "contacts.0", "an e-mail address"),
    ("hostnames.0", "a-llm01-mlflow\n.svc.alps.example.org", "hostnames.0", "a name under the cluster's domain"),
    ("quota.cpu.limits", "16\n\n16", "quota.cpu.limits", "not a Kubernetes quantity"),
    ("team", "A-LLM01", "team", "choose one of your teams"),
    ("environment", "production", "environment", "one of dev, staging, prod"),
    ("purpose", "", "purpose", "required"),
    ("purpose", "x" * 501, "purpose", "at most 500 characters"),
    ("purpose", "normal text \u202e gnp.exe", "purpose", "U+202E"),
    ("purpose", "zero\u200bwidth", "purpose", "U+200B"),
    ("contacts", [], "contacts", "at least one e-mail"),
    ("contacts.0", "jane at example", "contacts.0", "an e-mail address"),
    ("expires", "2026-01-01", "expires", "must be in the future"),
    ("expires", "2030-01-01", "expires", "at most two years ahead"),
    ("expires", "soon", "expires", "a date such as"),
    ("psa", "privileged", "psa", "never self-service"),
    ("psa", "baseline", "psa_justification", "required"),
    ("psa", "root", "psa", "one of restricted, baseline"),
    ("quota.cpu.requests", "32", "quota.cpu.requests", "32 is more than the limit 16"),
    ("quota.memory.requests", "128Gi", "quota.memory.requests", "128Gi is more than the limit 64Gi"),
    ("quota.cpu.requests", "0.0001", "quota.cpu.requests", "milli-core precision"),
    ("quota.cpu.requests", "", "quota.cpu.requests", "required"),
    ("quota.memory.limits", "64 GB", "quota.memory.limits", "not a Kubernetes quantity"),
    ("quota.memory.limits", "1e400", "quota.memory.limits", "exponent 400 is out of range"),
    ("quota.cpu.limits", "99999999999999999999999", "quota.cpu.limits", "larger than any cluster"),
    ("quota.gpus.0.model", "a100", "quota.gpus.0.model", "one of h100, gh200"),
    ("quota.gpus.0.profile", "1g.12gb", "quota.gpus.0.profile", "MIG profiles 1g.10gb, 2g.20gb, 3g.40gb"),
    ("quota.gpus.0.count", "1.5", "quota.gpus.0.count", "whole number"),
    ("quota.gpus.0.count", 0, "quota.gpus.0.count", "at least 1"),
    ("quota.gpus.0.count", 29, "quota.gpus.0.count", "29 1g.10gb slices of NVIDIA H100 SXM 80GB asked, 28 left"),
    ("quota.storage.nfs", {"size": "1Ti"}, "quota.storage.nfs", "unknown storage class"),
    ("quota.storage.cephfs", {"size": "1Ti"}, "quota.storage.cephfs", "dev namespaces may use longhorn, ceph-rbd"),
    ("quota.storage.longhorn.pvcs", 5000, "quota.storage.longhorn.pvcs", "at most 1000"),
    ("quota.tpu", 4, "quota.tpu", "unknown"),
    ("hostnames.0", "mlflow.example.com", "hostnames.0", "a name under the cluster's domain"),
    ("hostnames.0", "mlflow.svc.alps.example.org", "hostnames.0", "start with 'a-llm01-'"),
    ("hostnames.0", "a-llm01_x.svc.alps.example.org", "hostnames.0", "a name under the cluster's domain"),
    ("blueprints.0.id", "jupyterhub", "blueprints.0.id", "one of mlflow, open-webui, ray, wandb, inference"),
    ("blueprints.0.params.hostname", "a-llm01-other.svc.alps.example.org", "blueprints.0.params.hostname", "one of the namespace's host names"),
    ("blueprints.0.params.colour", "blue", "blueprints.0.params.colour", "MLflow tracking server takes hostname, storage"),
    ("blueprints.0.params.storage", "lots", "blueprints.0.params.storage", "not a Kubernetes quantity"),
    ("extra", 1, "extra", "unknown field"),
    ("quota.cpu.burst", "4", "quota.cpu.burst", "unknown; give requests and limits"),
    ("quota.gpus.0.vendor", "nvidia", "quota.gpus.0.vendor", "unknown; a GPU line has model, profile and count"),
    ("quota.storage.longhorn.iops", 100, "quota.storage.longhorn.iops", "unknown; a storage class has size and pvcs"),
    ("blueprints.0.chart", "evil", "blueprints.0.chart", "unknown; a service has id and params"),
    ("contacts", [f"p{i}@example.org" for i in range(21)], "contacts", "at most 20 addresses (this has 21)"),
    ("hostnames", [f"a-llm01-h{i}.svc.alps.example.org" for i in range(25)], "hostnames", "at most 20 host names"),
    ("quota.gpus", [{"model": "h100", "count": 1}] * 33, "quota.gpus", "at most 32 GPU lines"),
    ("quota.gpus", [{"model": "h100", "profile": "1g.10gb", "count": 1}] * 2, "quota.gpus.1.profile",
     "MIG 1g.10gb of NVIDIA H100 SXM 80GB are asked for twice; put the count in one line"),
]


@pytest.mark.parametrize("path, value, field, text", RULES)
def test_each_rule_names_its_field(inventory, path, value, field, text):
    found = problems(inventory, changed(path, value))
    assert field in found, found
    assert text in found[field]


def test_names_and_hosts_in_use_and_reserved_prefixes(inventory):
    taken = {"names": {"a-llm01-mlflow": "a-llm01", "b-moe02-mlflow": "b-moe02"},
             "hostnames": {"a-llm01-mlflow.svc.alps.example.org": "a-llm01-x"}}
    found = problems(inventory, typical(), existing=taken)
    assert found["name"] == "'a-llm01-mlflow' already exists" and found["hostnames.0"].endswith("is already in use")
    foreign = {"names": {"a-llm01-mlflow": "platform"}, "hostnames": {}}  # e.g. made by hand before Belvedere
    assert problems(inventory, typical(), existing=foreign)["name"] == "'a-llm01-mlflow' already exists (another team's)"
    assert problems(inventory, changed("name", "kube-test"))["name"] == "names starting with 'kube-' are reserved for the platform"
    # a change of the namespace itself keeps its own name and hosts
    assert problems(inventory, typical(), existing=taken, current=typical()) == {}


def test_not_a_member_and_capacity_taken_by_others(inventory):
    assert problems(inventory, typical(), team_members=False)["team"] == "you are not a member of a-llm01"
    busy = Usage(models={("h100", "1g.10gb"): 27})
    assert "2 1g.10gb slices of NVIDIA H100 SXM 80GB asked, 1 left" in problems(inventory, typical(), allocated=busy)["quota.gpus.0.count"]


def test_whole_gpus_of_two_models_share_a_quota_key_but_not_a_capacity(inventory):
    spec = changed("quota.gpus", [{"model": "h100", "profile": "whole", "count": 20}, {"model": "gh200", "profile": "whole", "count": 8}])
    check = validate(spec, **context(inventory))
    assert check.ok and check.usage.gpus == {"nvidia.com/gpu": 28}
    assert check.usage.models == {("h100", "whole"): 20, ("gh200", "whole"): 8}
    taken = Usage(gpus={"nvidia.com/gpu": 20}, models={("h100", "whole"): 20})  # another team holds 20 H100
    found = problems(inventory, spec, allocated=taken)
    assert found == {"quota.gpus.0.count": "20 whole GPUs of NVIDIA H100 SXM 80GB asked, 4 left on the cluster"}


def test_services_cannot_ask_for_more_gpus_than_the_quota(inventory):
    spec = typical()  # two MIG slices, no whole GPU
    spec["blueprints"].append({"id": "open-webui", "params": {"hostname": spec["hostnames"][0], "gpus": 3}})
    assert problems(inventory, spec)["blueprints"] == ("the services ask for 3 whole GPUs (Open WebUI + Ollama 3) but the quota has 0: "
                                                       "add whole GPUs under GPUs (the charts ask for nvidia.com/gpu, not MIG slices)")
    spec["quota"]["gpus"].append({"model": "h100", "profile": "whole", "count": 4})
    spec["blueprints"].append({"id": "ray", "params": {"workers": 2}})  # 2 workers x 1 GPU (the default)
    assert problems(inventory, spec)["blueprints"] == ("the services ask for 5 whole GPUs (Open WebUI + Ollama 3, Ray cluster (KubeRay) 2) "
                                                       "but the quota has 4: add whole GPUs under GPUs (the charts ask for nvidia.com/gpu, "
                                                       "not MIG slices)")
    spec["quota"]["gpus"][1]["count"] = 5
    assert "blueprints" not in problems(inventory, spec)


def test_beyond_the_envelope_needs_approval_not_refusal(inventory):
    big = changed("quota.gpus.0.count", 6)
    check = validate(big, **context(inventory))
    assert check.ok and check.needs_approval == ["nvidia.com/mig-1g.10gb: the team would hold 6, its envelope is 4"]
    team = Usage(gpus={"nvidia.com/mig-1g.10gb": 3})
    check = validate(typical(), **context(inventory, team_usage=team))  # 3 held elsewhere + 2 here > 4
    assert check.needs_approval == ["nvidia.com/mig-1g.10gb: the team would hold 5, its envelope is 4"]
    baseline = {**typical(), "psa": "baseline", "psa_justification": "the chart runs its init container as root"}
    assert validate(baseline, **context(inventory)).needs_approval == ["Pod security 'baseline' is asked for: a person checks the reason"]
    prod = {**typical(), "environment": "prod", "quota": {**typical()["quota"], "storage": {"ceph-rbd": {"size": "100Gi"}}}}
    assert validate(prod, **context(inventory)).needs_approval == ["prod namespaces are approved by a person"]


@pytest.mark.parametrize("spec", [None, [], "name: x", 42, {"quota": "lots"}, {"quota": {"gpus": "all"}}, {"blueprints": "mlflow"},
                                  {"hostnames": "x"}, {"contacts": "a@b.c"}])
def test_wrong_types_are_problems_not_crashes(inventory, spec):
    check = validate(spec, **context(inventory))
    assert not check.ok and all(p.field is not None for p in check.problems)


def test_normalise_makes_one_spelling_of_one_meaning(inventory):
    from apps.namespaces.spec import normalise

    api = typical()
    form = copy.deepcopy(api)
    form["quota"]["cpu"] = {"requests": "8000m", "limits": 16}
    form["quota"]["memory"] = {"requests": "32768Mi", "limits": "64Gi"}
    form["quota"]["gpus"][0]["count"] = "2"
    form["quota"]["storage"]["longhorn"] = {"size": "102400Mi", "pvcs": "10"}
    form["blueprints"][0]["params"]["storage"] = "51200Mi"
    assert validate(form, **context(inventory)).ok
    assert normalise(form, inventory) == normalise(api, inventory)
    canonical = normalise(form, inventory)
    assert canonical["quota"]["cpu"] == {"requests": "8", "limits": "16"} and canonical["quota"]["memory"]["requests"] == "32Gi"
    assert canonical["quota"]["gpus"] == [{"model": "h100", "profile": "1g.10gb", "count": 2}]
    assert canonical["quota"]["storage"] == {"longhorn": {"size": "100Gi", "pvcs": 10}}
    assert canonical["blueprints"] == [{"id": "mlflow", "params": {"hostname": "a-llm01-mlflow.svc.alps.example.org", "storage": "50Gi"}}]
    assert validate(canonical, **context(inventory)).ok  # the canonical form passes the same rules
