"""A namespace request as data, and every rule it must pass.

The same ``validate`` runs for the form's live check (through the API's dry run) and for the real
submission, so the browser and the server can never disagree. Problems name the field (a dotted
path into the request) and say what is allowed. Exceeding the team's envelope is not a problem but
a routing decision (``Check.needs_approval`` with the reasons): the request then waits for named
staff. Going beyond what the cluster has, asking for ``privileged`` pods, or any malformed value is
refused.

Plain Python: no Django.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from .inventory import Inventory
from .quantities import QuantityError, bytes_text, cpu_text, parse_quantity, whole

# Whole-input patterns: always ``fullmatch`` (``re.match`` with ``$`` lets "tracking\n" through).
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
HOSTNAME_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
PSA_LEVELS = ("restricted", "baseline", "privileged")
MAX_TEXT = 500
# Characters that change how text is displayed without showing themselves (bidi overrides, zero
# widths): in a namespace's annotations they would make a reviewer read something else.
HIDDEN = {"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067",
          "\u2068", "\u2069", "\u061c", "\u200e", "\u200f"}


@dataclass
class Problem:
    field: str
    message: str


@dataclass
class Usage:
    """Quota in one place (a namespace, a team, a request): CPU cores, bytes, GPUs by quota key, storage by class."""

    cpu: Decimal = Decimal(0)
    memory: Decimal = Decimal(0)
    gpus: dict = field(default_factory=dict)  # quota resource (nvidia.com/gpu, nvidia.com/mig-1g.10gb) -> count
    storage: dict = field(default_factory=dict)  # class -> bytes
    # (model, profile) -> count: what is taken from each model's capacity. Whole GPUs of every model share
    # one quota key (nvidia.com/gpu), so capacity must be counted per model, not per key.
    models: dict = field(default_factory=dict)

    def __add__(self, other: "Usage") -> "Usage":
        def merged(mine: dict, theirs: dict, zero):
            out = dict(mine)
            for key, value in theirs.items():
                out[key] = out.get(key, zero) + value
            return out

        return Usage(self.cpu + other.cpu, self.memory + other.memory, merged(self.gpus, other.gpus, 0),
                     merged(self.storage, other.storage, Decimal(0)), merged(self.models, other.models, 0))


@dataclass
class Check:
    problems: list[Problem] = field(default_factory=list)
    needs_approval: list[str] = field(default_factory=list)  # why a person must approve
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, field_name: str, message: str) -> None:
        self.problems.append(Problem(field_name, message))


def namespace_name(team: str, suffix: str) -> str:
    return f"{team}-{suffix}"


def _text(check: Check, value, field_name: str, *, required: bool, limit: int = MAX_TEXT) -> str:
    if value is None or value == "":
        if required:
            check.add(field_name, "required")
        return ""
    if not isinstance(value, str):
        check.add(field_name, "must be text")
        return ""
    if len(value) > limit:
        check.add(field_name, f"at most {limit} characters (this has {len(value)})")
    hidden = sorted({f"U+{ord(char):04X}" for char in value if char in HIDDEN or unicodedata.category(char) in ("Cc", "Cf") and char not in "\n\t"})
    if hidden:
        check.add(field_name, f"contains invisible or direction-changing characters ({', '.join(hidden)}); type the text plainly")
    return value


def _quantity(check: Check, value, field_name: str, kind: str) -> Decimal | None:
    if value in (None, ""):
        return Decimal(0)
    try:
        number = parse_quantity(value)
    except QuantityError as exc:
        check.add(field_name, str(exc))
        return None
    if kind == "cpu" and number * 1000 != (number * 1000).to_integral_value():
        check.add(field_name, "CPU has milli-core precision at most (e.g. 250m)")
        return None
    return number


def validate(spec: dict, *, inventory: Inventory, team_members: bool, existing: dict, allocated: Usage, team_usage: Usage,
             envelope: dict, today: date, current: dict | None = None) -> Check:
    """Check a request's ``spec``.

    ``existing``: namespace name -> its team, for names and hostnames in use ({"names": {...}, "hostnames": {...}});
    ``allocated``: what every other namespace holds (for the cluster's capacity); ``team_usage``: what the team's
    other namespaces hold (for its envelope); ``envelope``: the team's allowance; ``current``: the namespace's
    spec when this is a change to it (its own name and hostnames are not "taken")."""
    check = Check()
    if not isinstance(spec, dict):
        check.add("", "a request is an object")
        return check
    known = {"team", "name", "environment", "purpose", "contacts", "expires", "psa", "psa_justification", "quota", "hostnames",
             "blueprints"}
    for key in spec:
        if key not in known:
            check.add(key, f"unknown field; the request has {', '.join(sorted(known))}")
    team = spec.get("team")
    if not isinstance(team, str) or not NAME.fullmatch(team or ""):
        check.add("team", "choose one of your teams (Slurm accounts)")
        team = ""
    elif not team_members:
        check.add("team", f"you are not a member of {team}")
    suffix = spec.get("name")
    if not isinstance(suffix, str) or not suffix:
        check.add("name", "required: the part after the team prefix, e.g. mlflow")
    elif not suffix.isascii() or not NAME.fullmatch(suffix):
        check.add("name", "lowercase letters a-z, digits and '-', starting and ending with a letter or digit (RFC 1123)")
    elif team:
        full = namespace_name(team, suffix)
        if len(full) > 63:
            check.add("name", f"'{full}' has {len(full)} characters; a namespace name has at most 63, so at most "
                              f"{63 - len(team) - 1} after the prefix '{team}-'")
        reserved = next((prefix for prefix in inventory.reserved_prefixes if full.startswith(prefix) or suffix.startswith(prefix)), None)
        if reserved:
            check.add("name", f"names starting with '{reserved}' are reserved for the platform")
        taken_by = existing.get("names", {}).get(full)
        if taken_by is not None and not (current and current.get("name") == suffix and current.get("team") == team):
            check.add("name", f"'{full}' already exists" + ("" if taken_by == team else " (another team's)"))
    environment = spec.get("environment")
    if environment not in inventory.environments:
        check.add("environment", f"one of {', '.join(inventory.environments)}")
        environment = None
    _text(check, spec.get("purpose"), "purpose", required=True)
    contacts = spec.get("contacts")
    if not isinstance(contacts, list) or not contacts:
        check.add("contacts", "at least one e-mail address to reach the people responsible")
    elif len(contacts) > 20:
        check.add("contacts", f"at most 20 addresses (this has {len(contacts)}); use a mailing list")
    else:
        for index, contact in enumerate(contacts):
            if not isinstance(contact, str) or not EMAIL.fullmatch(contact) or not contact.isascii():
                check.add(f"contacts.{index}", "an e-mail address such as jane.doe@example.org")
    expires = spec.get("expires")
    if expires:
        try:
            expiry = date.fromisoformat(str(expires))
        except ValueError:
            check.add("expires", "a date such as 2027-06-30")
        else:
            if expiry <= today:
                check.add("expires", "must be in the future")
            elif (expiry - today).days > 730:
                check.add("expires", "at most two years ahead; renew it later")
    else:
        check.add("expires", "required: when to review whether the namespace is still needed (at most two years ahead)")
    psa = spec.get("psa", "restricted")
    if psa not in PSA_LEVELS:
        check.add("psa", f"one of {', '.join(PSA_LEVELS[:2])}")
    elif psa == "privileged":
        check.add("psa", "privileged pods are never self-service: ask the platform team, with the reason")
    else:
        allowed_psa = inventory.environments.get(environment, {}).get("psa", ["restricted", "baseline"]) if environment else PSA_LEVELS
        if psa not in allowed_psa:
            check.add("psa", f"{environment} namespaces allow {', '.join(allowed_psa)}")
        if psa == "baseline":
            justification = _text(check, spec.get("psa_justification"), "psa_justification", required=True)
            if justification:
                check.needs_approval.append("Pod security 'baseline' is asked for: a person checks the reason")
    usage = _check_quota(check, spec.get("quota"), inventory, environment, allocated)
    _check_hostnames(check, spec.get("hostnames"), inventory, team, existing, current)
    hostnames = spec.get("hostnames") if isinstance(spec.get("hostnames"), list) else []
    _check_blueprints(check, spec.get("blueprints"), inventory, usage, hostnames)
    if environment and inventory.environments[environment].get("approval"):
        check.needs_approval.append(f"{environment} namespaces are approved by a person")
    if check.ok:
        check.needs_approval.extend(_beyond_envelope(team_usage + usage, envelope))
    check.usage = usage
    return check


def normalise(spec: dict, inventory: Inventory) -> dict:
    """The canonical form of a valid spec: quantities in their canonical text (``65536Mi`` -> ``64Gi``),
    counts as integers, defaults written out, services in a fixed order. A form post and an API call
    meaning the same thing store the same spec, so re-submitting it commits nothing."""
    out = {key: spec[key] for key in ("team", "name", "environment", "purpose") if key in spec}
    out["contacts"] = list(spec.get("contacts") or [])
    out["expires"] = str(spec.get("expires", ""))
    out["psa"] = spec.get("psa") or "restricted"
    if out["psa"] != "restricted":
        out["psa_justification"] = spec.get("psa_justification", "")
    quota = spec.get("quota") or {}
    canonical: dict = {}
    for resource, show in (("cpu", cpu_text), ("memory", bytes_text)):
        given = quota.get(resource) or {}
        block = {part: show(parse_quantity(given[part])) for part in ("requests", "limits") if given.get(part) not in (None, "")}
        if block:
            canonical[resource] = block
    canonical["gpus"] = [{"model": item["model"], "profile": item.get("profile") or "whole", "count": whole(item["count"])}
                         for item in quota.get("gpus") or []]
    canonical["storage"] = {name: {"size": bytes_text(parse_quantity(block["size"])), "pvcs": whole(block.get("pvcs") or 20)}
                            for name, block in sorted((quota.get("storage") or {}).items()) if block.get("size") not in (None, "")}
    out["quota"] = canonical
    out["hostnames"] = list(spec.get("hostnames") or [])
    blueprints = []
    for item in sorted(spec.get("blueprints") or [], key=lambda b: b["id"]):
        rules = inventory.blueprints[item["id"]].params
        params = {}
        for name, value in (item.get("params") or {}).items():
            if value in (None, ""):
                continue
            kind = rules[name].get("type")
            params[name] = whole(value) if kind == "count" else bytes_text(parse_quantity(value)) if kind == "size" else value
        blueprints.append({"id": item["id"], "params": params})
    out["blueprints"] = blueprints
    return out


def usage_of(spec: dict, inventory: Inventory) -> Usage:
    """What a committed spec holds, read the way ``validate`` reads its quota, without the other checks:
    the live check adds this up over every namespace at each keystroke."""
    environment = spec.get("environment") if spec.get("environment") in inventory.environments else None
    return _check_quota(Check(), spec.get("quota"), inventory, environment, Usage(gpus={}))


def _check_quota(check: Check, quota, inventory: Inventory, environment, allocated: Usage) -> Usage:
    usage = Usage()
    if not isinstance(quota, dict):
        check.add("quota", "the namespace's quota: cpu, memory, gpus and storage")
        return usage
    unknown = set(quota) - {"cpu", "memory", "gpus", "storage"}
    for key in sorted(unknown):
        check.add(f"quota.{key}", "unknown; the quota has cpu, memory, gpus and storage")
    for resource, kind in (("cpu", "cpu"), ("memory", "bytes")):
        block = quota.get(resource) or {}
        if not isinstance(block, dict):
            check.add(f"quota.{resource}", "requests and limits")
            continue
        for key in sorted(set(block) - {"requests", "limits"}):
            check.add(f"quota.{resource}.{key}", "unknown; give requests and limits")
        requests = _quantity(check, block.get("requests"), f"quota.{resource}.requests", kind)
        limits = _quantity(check, block.get("limits"), f"quota.{resource}.limits", kind)
        if requests is not None and limits is not None:
            if not requests:
                check.add(f"quota.{resource}.requests", "required: pods in the namespace must fit in it")
            elif limits and requests > limits:
                shown = cpu_text if kind == "cpu" else bytes_text
                check.add(f"quota.{resource}.requests", f"{shown(requests)} is more than the limit {shown(limits)}")
            if resource == "cpu":
                usage.cpu = max(requests, limits)
            else:
                usage.memory = max(requests, limits)
    gpus = quota.get("gpus") or []
    if not isinstance(gpus, list):
        check.add("quota.gpus", "a list of {model, profile, count}")
        gpus = []
    elif len(gpus) > 32:
        check.add("quota.gpus", f"at most 32 GPU lines (this has {len(gpus)}); one line per model and profile")
        gpus = []
    seen = set()
    for index, item in enumerate(gpus):
        path = f"quota.gpus.{index}"
        if not isinstance(item, dict):
            check.add(path, "{model, profile, count}")
            continue
        for key in sorted(set(item) - {"model", "profile", "count"}):
            check.add(f"{path}.{key}", "unknown; a GPU line has model, profile and count")
        model = inventory.gpu_models.get(item.get("model"))
        if model is None:
            check.add(f"{path}.model", f"one of {', '.join(inventory.gpu_models)}")
            continue
        profile = item.get("profile", "whole")
        if profile not in model.profiles:
            check.add(f"{path}.profile", f"{model.label}: whole GPUs or the MIG profiles {', '.join(model.mig) or '(none)'}")
            continue
        try:
            count = whole(item.get("count", 0))
        except QuantityError as exc:
            check.add(f"{path}.count", str(exc))
            continue
        if count <= 0:
            check.add(f"{path}.count", "at least 1 (or remove the line)")
            continue
        resource = model.resource(profile)
        if (model.id, profile) in seen:
            what = "whole GPUs" if profile == "whole" else f"MIG {profile}"
            check.add(f"{path}.profile", f"{what} of {model.label} are asked for twice; put the count in one line")
            continue
        seen.add((model.id, profile))
        free = model.capacity(profile) - allocated.models.get((model.id, profile), 0)
        if count > free:
            what = "whole GPUs" if profile == "whole" else f"{profile} slices"
            check.add(f"{path}.count", f"{count} {what} of {model.label} asked, {max(free, 0)} left on the cluster")
        usage.gpus[resource] = usage.gpus.get(resource, 0) + count
        usage.models[(model.id, profile)] = count
    storage = quota.get("storage") or {}
    if not isinstance(storage, dict):
        check.add("quota.storage", "storage class -> {size, pvcs}")
        storage = {}
    elif len(storage) > len(inventory.storage_classes):
        check.add("quota.storage", f"the cluster has {len(inventory.storage_classes)} storage classes: "
                                   f"{', '.join(inventory.storage_classes)}")
        storage = {}
    allowed = inventory.environments.get(environment, {}).get("storage", list(inventory.storage_classes)) if environment else []
    for name, block in storage.items():
        path = f"quota.storage.{name}"
        if name not in inventory.storage_classes:
            check.add(path, f"unknown storage class; the cluster has {', '.join(inventory.storage_classes)}")
            continue
        if environment and name not in allowed:
            check.add(path, f"{environment} namespaces may use {', '.join(allowed)}")
            continue
        if not isinstance(block, dict):
            check.add(path, "{size, pvcs}")
            continue
        for key in sorted(set(block) - {"size", "pvcs"}):
            check.add(f"{path}.{key}", "unknown; a storage class has size and pvcs")
        size = _quantity(check, block.get("size"), f"{path}.size", "bytes")
        if block.get("pvcs") not in (None, ""):
            try:
                if whole(block["pvcs"]) > 1000:
                    check.add(f"{path}.pvcs", "at most 1000 volumes")
            except QuantityError as exc:
                check.add(f"{path}.pvcs", str(exc))
        if size:
            usage.storage[name] = size
    return usage


def _check_hostnames(check: Check, hostnames, inventory: Inventory, team: str, existing: dict, current: dict | None) -> None:
    if hostnames in (None, []):
        return
    if not isinstance(hostnames, list):
        check.add("hostnames", "a list of host names")
        return
    if len(hostnames) > 20:
        check.add("hostnames", f"at most 20 host names (this has {len(hostnames)})")
        return
    suffix = f".{inventory.ingress_domain}"
    own = set((current or {}).get("hostnames") or [])
    for index, host in enumerate(hostnames):
        path = f"hostnames.{index}"
        if not isinstance(host, str) or not host.isascii():
            check.add(path, "a host name in plain ASCII letters")
            continue
        labels = host.split(".")
        if not host.endswith(suffix) or len(host) > 253 or not all(HOSTNAME_LABEL.fullmatch(label) for label in labels):
            check.add(path, f"a name under the cluster's domain, e.g. {team or 'team'}-mlflow{suffix}")
            continue
        first = labels[0]
        if team and not first.startswith(f"{team}-") and first != team:
            check.add(path, f"host names of {team} start with '{team}-' (e.g. {team}-mlflow{suffix})")
        elif host in existing.get("hostnames", {}) and host not in own:
            check.add(path, f"{host} is already in use")
    if len(set(hostnames)) != len(hostnames):
        check.add("hostnames", "a host name is listed twice")


def _check_blueprints(check: Check, blueprints, inventory: Inventory, usage: Usage, hostnames: list) -> None:
    if blueprints in (None, []):
        return
    if not isinstance(blueprints, list):
        check.add("blueprints", "a list of {id, params}")
        return
    if len(blueprints) > len(inventory.blueprints):
        check.add("blueprints", f"at most one of each of the {len(inventory.blueprints)} services")
        return
    seen = set()
    gpus_asked = 0
    asked_by = []
    for index, item in enumerate(blueprints):
        path = f"blueprints.{index}"
        if not isinstance(item, dict) or item.get("id") not in inventory.blueprints:
            check.add(f"{path}.id", f"one of {', '.join(inventory.blueprints)}")
            continue
        blueprint = inventory.blueprints[item["id"]]
        for key in sorted(set(item) - {"id", "params"}):
            check.add(f"{path}.{key}", "unknown; a service has id and params")
        if blueprint.id in seen:
            check.add(f"{path}.id", f"{blueprint.label} is chosen twice")
            continue
        seen.add(blueprint.id)
        params = item.get("params") or {}
        if not isinstance(params, dict):
            check.add(f"{path}.params", "an object")
            continue
        for name in params:
            if name not in blueprint.params:
                check.add(f"{path}.params.{name}", f"{blueprint.label} takes {', '.join(blueprint.params) or 'no parameters'}")
        for name, rule in blueprint.params.items():
            value = params.get(name, rule.get("default"))
            where = f"{path}.params.{name}"
            if value in (None, ""):
                if rule.get("required"):
                    check.add(where, "required" + (f": {rule['help']}" if rule.get("help") else ""))
                continue
            kind = rule.get("type", "text")
            if kind == "hostname":
                if value not in hostnames:
                    check.add(where, "one of the namespace's host names (add it under Network first)" if hostnames
                              else "the namespace has no host names yet: add one under Network")
            elif kind == "size":
                _quantity(check, value, where, "bytes")
            elif kind == "count":
                try:
                    number = whole(value)
                except QuantityError as exc:
                    check.add(where, str(exc))
                    continue
                if number > int(rule.get("max", 64)):
                    check.add(where, f"at most {rule.get('max', 64)}")
            elif kind == "choice":
                if value not in rule.get("choices", []):
                    check.add(where, f"one of {', '.join(map(str, rule.get('choices', [])))}")
            else:
                _text(check, value, where, required=False, limit=200)
        if blueprint.uses_gpus:
            wanted = 1
            for name in blueprint.uses_gpus:
                try:
                    wanted *= whole(params.get(name, blueprint.params[name].get("default", 0)))
                except QuantityError:
                    wanted = 0  # reported above
            if wanted:
                gpus_asked += wanted
                asked_by.append(f"{blueprint.label} {wanted}")
    quota_gpus = usage.gpus.get("nvidia.com/gpu", 0)
    if gpus_asked > quota_gpus:
        check.add("blueprints", f"the services ask for {gpus_asked} whole GPUs ({', '.join(asked_by)}) but the quota has {quota_gpus}: "
                                "add whole GPUs under GPUs (the charts ask for nvidia.com/gpu, not MIG slices)")


def _beyond_envelope(total: Usage, envelope: dict) -> list[str]:
    reasons = []
    if envelope.get("cpu") and total.cpu > parse_quantity(envelope["cpu"]):
        reasons.append(f"CPU: the team would hold {cpu_text(total.cpu)}, its envelope is {envelope['cpu']}")
    if envelope.get("memory") and total.memory > parse_quantity(envelope["memory"]):
        reasons.append(f"memory: the team would hold {bytes_text(total.memory)}, its envelope is {envelope['memory']}")
    for resource, count in sorted(total.gpus.items()):
        allowed = int((envelope.get("gpus") or {}).get(resource, 0))
        if count > allowed:
            reasons.append(f"{resource}: the team would hold {count}, its envelope is {allowed}")
    for name, size in sorted(total.storage.items()):
        allowed = (envelope.get("storage") or {}).get(name)
        if allowed is not None and size > parse_quantity(allowed):
            reasons.append(f"{name} storage: the team would hold {bytes_text(size)}, its envelope is {allowed}")
    return reasons
