"""The registry of host fields: the CPU side of a node (Grace on a GH200), its memory, the page cache
and host allocations resident in GPU memory on coherent-memory nodes, and the job step's CPU time.

Each canonical field says its unit, its kind, the *domain* it is measured over and where the
collector reads it (``deploy/collector/belvedere-collector.py``, ``HostSource``; its embedded copy
of the names is checked against this module by ``tests/telemetry/collector/test_host.py``).
Domains (the sample's ``host_metrics`` key, stored in the network table's ``nic`` column):

* ``node`` — the whole node;
* ``numaN`` — a NUMA domain with CPUs (``/sys/devices/system/node/nodeN/cpulist`` not empty);
* ``gpuN`` — GPU N's memory where it is a NUMA node without CPUs (GH200: the Hopper HBM appears
  as such a node; the collector maps it to the GPU by NVML's NUMA id or, failing that, by order);
* ``job<id>.<step>`` — a Slurm job step's cgroup (cgroup v2,
  ``/sys/fs/cgroup/system.slice/slurmstepd.scope/job_<id>/step_<step>``).

Shares are computed by the collector from the differences between two reads (``/proc/stat``
jiffies, cgroup ``usage_usec``, ``/proc/<pid>/stat`` utime + stime), so they are gauges 0..1;
memory is in bytes. NVLink-C2C traffic is not a host field: DCGM exposes it per GPU (fields
1076-1079, ``DCGM_FI_PROF_C2C_*``, DCGM >= 4.1) and it arrives with the GPU samples.
Plain Python: no Django.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

GAUGE, COUNTER = "gauge", "counter"
NODE, NUMA, GPU, STEP = "node", "numa", "gpu", "step"
RATIO, BYTES, COUNT, SECONDS = "ratio", "bytes", "count", "s"

DOMAIN = re.compile(r"^(node|numa\d{1,4}|gpu\d{1,2}|job\d{1,12}\.[A-Za-z0-9_]{1,24})$")
DOMAIN_RULE = "node, numa<N>, gpu<N> or job<id>.<step> (job4242.0, job4242.batch)"

PROC_STAT = "/proc/stat (cpu and cpuN lines: user nice system idle iowait irq softirq steal; Δ between reads)"
PROC_MEMINFO = "/proc/meminfo"
NODE_MEMINFO = "/sys/devices/system/node/nodeN/meminfo"
PROC_VMSTAT = "/proc/vmstat (pswpin, pswpout)"
PRESSURE = "/proc/pressure/memory (PSI, 'some avg10')"
CGROUP = "cgroup v2 cpu.stat usage_usec of the step (Δ / interval / CPUs of cpuset.cpus.effective)"
PROCS = ("/proc/<pid>/stat utime + stime of the step's task processes (cgroup.procs under step_<id>/user/, not "
         "slurmstepd's step_<id>/slurm/); ranks are the first processes below the tasks' roots that are not launchers "
         "(torchrun, a shell, a container runtime), data-loader workers their descendants")


class UnknownHostField(ValueError):
    """A name that is not a canonical host field."""


@dataclass(frozen=True)
class HostField:
    name: str
    domains: tuple[str, ...]  # which of NODE, NUMA, GPU, STEP it is measured over
    unit: str
    kind: str
    meaning: str
    source: str

    def as_dict(self) -> dict:
        return {"name": self.name, "domains": list(self.domains), "unit": self.unit, "kind": self.kind,
                "meaning": self.meaning, "source": self.source}


_FIELDS = [
    HostField("host_cpu_busy", (NODE, NUMA), RATIO, GAUGE,
              "Share of the CPUs' time not idle, iowait or steal (user, nice, system, irq, softirq)", PROC_STAT),
    HostField("host_cpu_iowait", (NODE, NUMA), RATIO, GAUGE, "Share of the CPUs' time idle waiting for I/O", PROC_STAT),
    HostField("host_cpu_steal", (NODE, NUMA), RATIO, GAUGE,
              "Share of the CPUs' time taken by the hypervisor (0 on bare metal)", PROC_STAT),
    HostField("host_mem_total", (NODE, NUMA, GPU), BYTES, GAUGE, "Memory of the domain (MemTotal)",
              f"{PROC_MEMINFO}; {NODE_MEMINFO}"),
    HostField("host_mem_used", (NODE, NUMA), BYTES, GAUGE,
              "Memory in use: MemTotal - MemAvailable (node), MemUsed (NUMA domain)", f"{PROC_MEMINFO}; {NODE_MEMINFO}"),
    HostField("host_page_cache", (NODE, NUMA), BYTES, GAUGE, "Page cache: Cached (node), FilePages (NUMA domain)",
              f"{PROC_MEMINFO}; {NODE_MEMINFO}"),
    HostField("host_swap_used", (NODE,), BYTES, GAUGE, "Swap in use: SwapTotal - SwapFree", PROC_MEMINFO),
    HostField("host_swap_out_pages", (NODE,), COUNT, COUNTER, "Pages swapped out since boot (pswpout)", PROC_VMSTAT),
    HostField("host_mem_pressure", (NODE,), RATIO, GAUGE,
              "Share of the last 10 s in which some task stalled on memory (PSI some avg10 / 100)", PRESSURE),
    HostField("host_gpu_page_cache", (GPU,), BYTES, GAUGE,
              "Page cache resident in this GPU's memory (coherent-memory nodes: FilePages of its NUMA node)",
              NODE_MEMINFO),
    HostField("host_gpu_host_alloc", (GPU,), BYTES, GAUGE,
              "Other host allocations resident in this GPU's memory: MemUsed - FilePages of its NUMA node",
              NODE_MEMINFO),
    HostField("host_job_cpu", (STEP,), RATIO, GAUGE, "Share of the step's CPUs busy with its processes", CGROUP),
    HostField("host_job_cpu_seconds", (STEP,), SECONDS, COUNTER, "CPU time of the step's processes (usage_usec)",
              CGROUP),
    HostField("host_rank_cpu", (STEP,), RATIO, GAUGE,
              "CPU of the training ranks, per rank: Δ(utime + stime) / interval / ranks", PROCS),
    HostField("host_dataloader_cpu", (STEP,), RATIO, GAUGE,
              "CPU of the ranks' data-loader workers, per worker: Δ(utime + stime) / interval / workers (1 = every "
              "worker busy all the time)", PROCS),
    HostField("host_dataloader_workers", (STEP,), COUNT, GAUGE, "Data-loader worker processes of the step", PROCS),
]
HOST_FIELDS: dict[str, HostField] = {field.name: field for field in _FIELDS}
HOST_FIELD_NAMES = tuple(HOST_FIELDS)


def domain_kind(domain: str) -> str | None:
    """NODE, NUMA, GPU or STEP for a valid domain name; None otherwise."""
    if not isinstance(domain, str) or DOMAIN.match(domain) is None:
        return None
    if domain == "node":
        return NODE
    return {"n": NUMA, "g": GPU, "j": STEP}[domain[0]]


def lookup_host(name) -> HostField:
    """The host field of a canonical name; UnknownHostField naming the choices otherwise."""
    field = HOST_FIELDS.get(name) if isinstance(name, str) else None
    if field is None:
        raise UnknownHostField(f"{str(name)[:64]!r} is not a host field; known: {', '.join(HOST_FIELD_NAMES)}")
    return field


def check_host_sample(domain, name) -> str | None:
    """Why (domain, field) is not a valid host sample, or None when it is."""
    kind = domain_kind(domain)
    if kind is None:
        return f"host_metrics must name a domain: {DOMAIN_RULE}"
    try:
        field = lookup_host(name)
    except UnknownHostField as exc:
        return str(exc)
    if kind not in field.domains:
        return f"{field.name} is measured over {', '.join(field.domains)} domains, not {domain}"
    return None


def gpu_index(domain: str) -> int | None:
    return int(domain[3:]) if domain_kind(domain) == GPU else None
