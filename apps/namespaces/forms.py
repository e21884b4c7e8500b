"""The request form's fields and the request spec, both ways.

The page posts plain form fields (it works without JavaScript); its live check posts the same fields
to the preview, so one conversion and one validation serve both. Problems about a spec path
(``quota.gpus.1.count``) are shown next to the form field that holds it (``gpu_count_1``).
"""
from .inventory import Inventory

GPU_ROWS = 3


def split_list(text: str) -> list[str]:
    """A comma- or line-separated list as typed in one field."""
    return _split(text)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.replace(",", "\n").splitlines() if part.strip()]


def spec_from_form(data, inventory: Inventory) -> dict:
    get = lambda name: (data.get(name) or "").strip()  # noqa: E731
    spec = {"team": get("team"), "name": get("name"), "environment": get("environment"), "purpose": data.get("purpose", "").strip(),
            "contacts": _split(get("contacts")), "expires": get("expires"), "psa": get("psa") or "restricted"}
    if spec["psa"] != "restricted":
        spec["psa_justification"] = data.get("psa_justification", "").strip()
    quota = {"cpu": {"requests": get("cpu_requests"), "limits": get("cpu_limits")},
             "memory": {"requests": get("memory_requests"), "limits": get("memory_limits")}, "gpus": [], "storage": {}}
    for row in range(GPU_ROWS):
        model, count = get(f"gpu_model_{row}"), get(f"gpu_count_{row}")
        if model and count and count != "0":
            quota["gpus"].append({"model": model, "profile": get(f"gpu_profile_{row}") or "whole", "count": count})
    for name in inventory.storage_classes:
        size = get(f"storage_{name}_size")
        if size:
            quota["storage"][name] = {"size": size, "pvcs": get(f"storage_{name}_pvcs") or "20"}
    spec["quota"] = quota
    spec["hostnames"] = _split(get("hostnames"))
    blueprints = []
    for key, blueprint in inventory.blueprints.items():
        if data.get(f"bp_{key}"):
            params = {name: get(f"bp_{key}_{name}") for name in blueprint.params if get(f"bp_{key}_{name}")}
            # a service's host name is picked from the namespace's host names, typed once above: the first by default
            for name, rule in blueprint.params.items():
                if rule.get("type") == "hostname" and name not in params and spec["hostnames"]:
                    params[name] = spec["hostnames"][0]
            blueprints.append({"id": key, "params": params})
    spec["blueprints"] = blueprints
    return spec


def form_from_spec(spec: dict, inventory: Inventory) -> dict:
    """Initial values of the form for an existing namespace (a day-2 change starts from what is there)."""
    quota = spec.get("quota") or {}
    out = {"team": spec.get("team", ""), "name": spec.get("name", ""), "environment": spec.get("environment", ""),
           "purpose": spec.get("purpose", ""), "contacts": ", ".join(spec.get("contacts") or []), "expires": str(spec.get("expires", "")),
           "psa": spec.get("psa", "restricted"), "psa_justification": spec.get("psa_justification", ""),
           "cpu_requests": (quota.get("cpu") or {}).get("requests", ""), "cpu_limits": (quota.get("cpu") or {}).get("limits", ""),
           "memory_requests": (quota.get("memory") or {}).get("requests", ""),
           "memory_limits": (quota.get("memory") or {}).get("limits", ""), "hostnames": "\n".join(spec.get("hostnames") or [])}
    for row, item in enumerate((quota.get("gpus") or [])[:GPU_ROWS]):
        out.update({f"gpu_model_{row}": item.get("model", ""), f"gpu_profile_{row}": item.get("profile", "whole"),
                    f"gpu_count_{row}": str(item.get("count", ""))})
    for name, block in (quota.get("storage") or {}).items():
        out.update({f"storage_{name}_size": block.get("size", ""), f"storage_{name}_pvcs": str(block.get("pvcs", ""))})
    for item in spec.get("blueprints") or []:
        out[f"bp_{item['id']}"] = "on"
        for name, value in (item.get("params") or {}).items():
            out[f"bp_{item['id']}_{name}"] = str(value)
    return out


def form_field(path: str, spec: dict) -> str:
    """The form field that holds a spec path, for showing a problem next to it."""
    parts = path.split(".")
    head = parts[0]
    if head == "quota" and len(parts) >= 3 and parts[1] in ("cpu", "memory"):
        return f"{parts[1]}_{parts[2]}"
    if head == "quota" and len(parts) >= 3 and parts[1] == "gpus":
        return f"gpu_{parts[3] if len(parts) > 3 else 'count'}_{parts[2]}"
    if head == "quota" and len(parts) >= 3 and parts[1] == "storage":
        return f"storage_{parts[2]}_{parts[3] if len(parts) > 3 else 'size'}"
    if head == "blueprints" and len(parts) >= 2 and parts[1].isdigit():
        blueprints = spec.get("blueprints") or []
        index = int(parts[1])
        key = blueprints[index]["id"] if index < len(blueprints) and isinstance(blueprints[index], dict) else ""
        if len(parts) >= 4 and parts[2] == "params":
            return f"bp_{key}_{parts[3]}"
        return f"bp_{key}"
    if head in ("contacts", "hostnames"):
        return head
    return head or "form"
