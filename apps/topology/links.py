"""Links into the topology pages that other apps build (stragglers, failing nodes).

Pure: must not import django (the topology page's address is a parameter, ``/topology/`` by default).
"""
from __future__ import annotations

from typing import Iterable
from urllib.parse import urlencode

import hostlist

FOCUS_LABELS = ("focused", "straggler", "failed vetting")  # what the page may call the focused nodes


def compact_hosts(hosts: str | Iterable[str]) -> str:
    """A hostlist expression for ``hosts``: a string is kept as it is (already a hostlist or a comma list),
    names are deduplicated and compressed (``nid[001234-001236]``)."""
    if isinstance(hosts, str):
        return hosts.strip()
    names = sorted({str(host).strip() for host in hosts if str(host).strip()})
    try:
        return hostlist.collect_hostlist(names)
    except Exception:  # noqa: BLE001 - a name hostlist cannot compress: list them plainly
        return ",".join(names)


def job_focus_url(job_nodes: str | Iterable[str], focus_hosts: str | Iterable[str], job_ref: str | None = None, *,
                  label: str | None = None, base: str = "/topology/") -> str:
    """The whole system with ``job_nodes`` highlighted as the job's nodes and ``focus_hosts`` standing out among
    them, e.g. ``/topology/?nodes=nid%5B001234-001361%5D&focus=nid001300&job=alps%2F1234&label=straggler``.

    ``job_nodes`` and ``focus_hosts`` are a Slurm hostlist / comma list or an iterable of hostnames; ``job_ref``
    (``cluster/job_id``) gives the page a link back to the job; ``label`` (one of ``FOCUS_LABELS``) names the
    focused nodes on the page ("focused" when absent)."""
    if label is not None and label not in FOCUS_LABELS:
        raise ValueError(f"label {label!r} is not one of {', '.join(FOCUS_LABELS)}")
    query = {"nodes": compact_hosts(job_nodes), "focus": compact_hosts(focus_hosts)}
    if job_ref:
        query["job"] = str(job_ref)
    if label:
        query["label"] = label
    return base + "?" + urlencode({key: value for key, value in query.items() if value})
