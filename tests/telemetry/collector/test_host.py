"""The collector's host reader on fake /proc and /sys trees laid out as the kernel and Slurm lay them out.

``/proc/stat`` (``cpu`` and ``cpuN`` lines: user nice system idle iowait irq softirq steal guest
guest_nice, in jiffies), ``/proc/meminfo`` (``Key:  N kB``), ``/proc/vmstat``, ``/proc/pressure/memory``
(PSI), ``/proc/<pid>/stat`` (``pid (comm) state ppid ...``, utime and stime the 14th and 15th fields);
``/sys/devices/system/node/nodeN/{cpulist,meminfo}`` (``Node N MemTotal:  N kB``); Slurm's cgroup v2
``/sys/fs/cgroup/system.slice/slurmstepd.scope/job_<id>/step_<id>/{cpu.stat,cpuset.cpus.effective}`` with
the tasks' ``user/task_<n>/cgroup.procs``. Three NUMA layouts: one domain, two domains, and a GH200
node whose four GPUs' memory are NUMA nodes 4, 12, 20, 28 without CPUs (the ids between them exist,
empty, as the driver reserves them for MIG).
"""
import json

import pytest

from apps.telemetry import hostfields, ingest

from .recording import load

collector = load()
GIB = 1024 ** 3
T0 = 1764000000.0


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def stat_line(name, user, system, idle, iowait=0, steal=0):
    return f"{name} {user} 0 {system} {idle} {iowait} 0 0 {steal} 0 0\n"


def write_stat(proc, cpus, busy, iowait=0, steal=0, idle=100):
    """Every CPU at the same cumulative jiffies; the cpu line their sum."""
    lines = [stat_line("cpu", busy * len(cpus), 0, idle * len(cpus), iowait * len(cpus), steal * len(cpus))]
    lines += [stat_line(f"cpu{c}", busy, 0, idle, iowait, steal) for c in cpus]
    write(proc / "stat", "".join(lines) + "intr 1 0\nctxt 2\n")


def node_meminfo(number, total_kb, used_kb, file_kb):
    return (f"Node {number} MemTotal:       {total_kb} kB\nNode {number} MemFree:        {total_kb - used_kb} kB\n"
            f"Node {number} MemUsed:        {used_kb} kB\nNode {number} FilePages:      {file_kb} kB\n"
            f"Node {number} HugePages_Total:     0\n")


def fake_host(root, numa, gpu_nodes=(), empty_nodes=(), gpu_file_gib=None):
    """numa: {node: [cpus]}; gpu_nodes: NUMA nodes of GPU memory (96 GiB each)."""
    proc, nodes, cgroup = root / "proc", root / "node", root / "cgroup"
    cpus = sorted(c for members in numa.values() for c in members)
    write_stat(proc, cpus, busy=0)
    write(proc / "meminfo", "MemTotal:       536870912 kB\nMemFree:        100000000 kB\n"
                            "MemAvailable:   402653184 kB\nBuffers:            1024 kB\nCached:         20971520 kB\n"
                            "SwapCached:            0 kB\nSwapTotal:       1048576 kB\nSwapFree:         524288 kB\n"
                            "HugePages_Total:       0\n")
    write(proc / "vmstat", "nr_free_pages 25000000\npswpin 10\npswpout 4242\n")
    write(proc / "pressure" / "memory", "some avg10=12.50 avg60=3.00 avg300=1.00 total=123456\n"
                                        "full avg10=1.00 avg60=0.00 avg300=0.00 total=1234\n")
    for number, members in numa.items():
        write(nodes / f"node{number}" / "cpulist", ",".join(map(str, members)) + "\n")
        write(nodes / f"node{number}" / "meminfo", node_meminfo(number, 128 * 1024 ** 2, 64 * 1024 ** 2, 8 * 1024 ** 2))
    for order, number in enumerate(gpu_nodes):
        file_gib = (gpu_file_gib or {}).get(order, 1)
        write(nodes / f"node{number}" / "cpulist", "\n")
        write(nodes / f"node{number}" / "meminfo",
              node_meminfo(number, 96 * 1024 ** 2, (file_gib + 2) * 1024 ** 2, file_gib * 1024 ** 2))
    for number in empty_nodes:
        write(nodes / f"node{number}" / "cpulist", "\n")
        write(nodes / f"node{number}" / "meminfo", node_meminfo(number, 0, 0, 0))
    write(nodes / "possible", "0-35\n")
    (cgroup).mkdir(parents=True)
    return proc, nodes, cgroup


def pid_stat(pid, comm, ppid, utime, stime):
    rest = " ".join(["0"] * 8)  # pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt... then utime stime
    return f"{pid} ({comm}) S {ppid} 1 1 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0 1 0 1 0 0\n"


def fake_step(proc, cgroup, usage_usec, ticks, cpus="0-7"):
    """Job 4242 step 0 as Slurm's cgroup v2 plugin lays it out: slurmstepd (pid 90) in step_0/slurm, the tasks in
    step_0/user/task_<n>: rank 100 with workers 101-102 and rank 200 with worker 201 (its comm has a space); the
    tasks' parent is slurmstepd."""
    step = cgroup / "job_4242" / "step_0"
    write(step / "cpu.stat", f"usage_usec {usage_usec}\nuser_usec {usage_usec // 2}\nsystem_usec 0\n")
    write(step / "cpuset.cpus.effective", f"{cpus}\n")
    write(step / "cgroup.procs", "")
    write(step / "slurm" / "cgroup.procs", "90\n")
    write(proc / "90" / "stat", pid_stat(90, "slurmstepd", 1, 5, 5))
    write(step / "user" / "task_0" / "cgroup.procs", "100\n101\n102\n")
    write(step / "user" / "task_1" / "cgroup.procs", "200\n201\n")
    write(cgroup / "job_4242" / "step_extern" / "cpu.stat", "usage_usec 10\n")
    write(cgroup / "job_4242" / "step_extern" / "cpuset.cpus.effective", "0\n")
    for pid, ppid, comm in ((100, 90, "python"), (101, 100, "pt_data_worker"), (102, 100, "pt_data_worker"),
                            (200, 90, "python"), (201, 200, "pt data worker")):
        write(proc / str(pid) / "stat", pid_stat(pid, comm, ppid, ticks[pid], 0))


def values(samples):
    return {(s.domain, s.field): s.value for s in samples}


def source(paths, **kw):
    proc, nodes, cgroup = paths
    times = iter([T0, T0 + 10, T0 + 20, T0 + 30])
    return collector.HostSource(str(proc), str(nodes), str(cgroup), clock=lambda: next(times), ticks_per_second=100,
                                **kw)


LAYOUTS = {
    "one domain": ({0: [0, 1, 2, 3]}, (), ()),
    "two domains": ({0: [0, 1], 1: [2, 3]}, (), ()),
    "GH200, four GPUs as NUMA nodes": ({0: [0, 1], 1: [2, 3], 2: [4, 5], 3: [6, 7]}, (4, 12, 20, 28),
                                       (5, 6, 7, 8, 9, 10, 11, 13, 29)),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cpu_shares_per_node_and_numa_domain_come_from_proc_stat_deltas(tmp_path, layout):
    numa, gpu_nodes, empty = LAYOUTS[layout]
    proc, nodes, cgroup = paths = fake_host(tmp_path, numa, gpu_nodes, empty)
    host = source(paths)
    host.open()
    assert host.numa_cpus == numa
    assert sorted(host.gpu_nodes) == list(gpu_nodes)
    first = values(host.read())  # no previous read of the CPUs' time but the one at open
    cpus = sorted(c for members in numa.values() for c in members)
    # 10 s later: 60 jiffies busy, 10 iowait, 5 steal, 25 idle of 100 per CPU
    lines = [stat_line("cpu", 60 * len(cpus), 0, 125 * len(cpus), 10 * len(cpus), 5 * len(cpus))]
    lines += [stat_line(f"cpu{c}", 60, 0, 125, 10, 5) for c in cpus]
    (proc / "stat").write_text("".join(lines))
    assert ("node", "host_cpu_busy") not in first  # no time passed on the CPUs since open: no share yet
    got = values(host.read())
    for domain in ["node", *(f"numa{n}" for n in numa)]:
        assert got[(domain, "host_cpu_busy")] == pytest.approx(0.6)
        assert got[(domain, "host_cpu_iowait")] == pytest.approx(0.1)
        assert got[(domain, "host_cpu_steal")] == pytest.approx(0.05)
    assert not any(domain.startswith("numa") and int(domain[4:]) not in numa for domain, _ in got)


def test_one_numa_domain_busier_than_the_other_is_told_apart(tmp_path):
    proc, nodes, cgroup = paths = fake_host(tmp_path, {0: [0, 1], 1: [2, 3]})
    host = source(paths)
    host.open()
    # each CPU started at 100 idle jiffies; 100 jiffies later CPUs 0 and 1 were busy half of them
    write(proc / "stat", stat_line("cpu", 100, 0, 700, 0) + stat_line("cpu0", 50, 0, 150, 0)
          + stat_line("cpu1", 50, 0, 150, 0) + stat_line("cpu2", 0, 0, 200, 0) + stat_line("cpu3", 0, 0, 200, 0))
    got = values(host.read())
    assert got[("numa0", "host_cpu_busy")] == pytest.approx(0.5)
    assert got[("numa1", "host_cpu_busy")] == pytest.approx(0.0)
    assert got[("node", "host_cpu_busy")] == pytest.approx(0.25)


def test_memory_swap_and_pressure_of_the_node_and_its_numa_domains(tmp_path):
    host = source(fake_host(tmp_path, {0: [0, 1], 1: [2, 3]}))
    host.open()
    got = values(host.read())
    assert got[("node", "host_mem_total")] == 512 * GIB
    assert got[("node", "host_mem_used")] == 128 * GIB  # MemTotal - MemAvailable
    assert got[("node", "host_page_cache")] == 20 * GIB
    assert got[("node", "host_swap_used")] == 512 * 1024 ** 2
    assert got[("node", "host_swap_out_pages")] == 4242
    assert got[("node", "host_mem_pressure")] == pytest.approx(0.125)
    assert got[("numa1", "host_mem_used")] == 64 * GIB and got[("numa1", "host_page_cache")] == 8 * GIB
    assert not any(domain.startswith("gpu") for domain, _ in got)


def test_gh200_page_cache_in_gpu_memory_is_read_from_the_gpus_numa_nodes(tmp_path):
    paths = fake_host(tmp_path, LAYOUTS["GH200, four GPUs as NUMA nodes"][0], (4, 12, 20, 28),
                      (5, 6, 7, 8, 9, 10, 11, 13, 29), gpu_file_gib={1: 23})
    host = source(paths)
    host.open()
    assert host.gpu_nodes == {4: 0, 12: 1, 20: 2, 28: 3}  # the empty MIG ids are not GPUs
    got = values(host.read())
    assert got[("gpu1", "host_gpu_page_cache")] == 23 * GIB
    assert got[("gpu1", "host_gpu_host_alloc")] == 2 * GIB
    assert got[("gpu0", "host_gpu_page_cache")] == 1 * GIB
    assert got[("gpu3", "host_mem_total")] == 96 * GIB
    assert "NUMA node(s) 4, 12, 20, 28" in host.describe()


def test_nvml_numa_ids_override_the_order(tmp_path):
    paths = fake_host(tmp_path, {0: [0, 1]}, (4, 12))
    host = source(paths, gpu_numa={4: 1, 12: 0})
    host.open()
    assert host.gpu_nodes == {4: 1, 12: 0}


def test_job_step_cpu_ranks_and_data_loader_workers_from_the_cgroup(tmp_path):
    proc, nodes, cgroup = paths = fake_host(tmp_path, {0: [0, 1, 2, 3, 4, 5, 6, 7]})
    fake_step(proc, cgroup, 1_000_000, {100: 50, 101: 0, 102: 0, 200: 50, 201: 0})
    host = source(paths)
    host.open()
    first = values(host.read())
    assert first[("job4242.0", "host_job_cpu_seconds")] == 1.0
    assert first[("job4242.0", "host_dataloader_workers")] == 3
    assert ("job4242.0", "host_dataloader_cpu") not in first  # a share needs two reads
    assert ("job4242.extern", "host_job_cpu_seconds") in first
    # 10 s later: the step used 40 CPU-seconds of its 8 CPUs; the workers 10 s each (1000 ticks), the ranks 2 s each
    fake_step(proc, cgroup, 41_000_000, {100: 250, 101: 1000, 102: 1000, 200: 250, 201: 1000})
    got = values(host.read())
    assert got[("job4242.0", "host_job_cpu")] == pytest.approx(0.5)
    assert got[("job4242.0", "host_dataloader_cpu")] == pytest.approx(1.0)
    assert got[("job4242.0", "host_rank_cpu")] == pytest.approx(0.2)


def test_a_node_without_slurm_cgroups_gives_host_fields_only(tmp_path):
    proc, nodes, cgroup = fake_host(tmp_path, {0: [0, 1]})
    host = source((proc, nodes, tmp_path / "no-such-scope"))
    host.open()
    assert not any(domain.startswith("job") for domain, _ in values(host.read()))


def test_no_proc_stat_is_unavailable(tmp_path):
    with pytest.raises(collector.SourceUnavailable, match="stat"):
        collector.HostSource(str(tmp_path), str(tmp_path), str(tmp_path)).open()


def test_field_names_and_domains_are_the_portals(tmp_path):
    assert set(collector.HOST_FIELD_NAMES) == set(hostfields.HOST_FIELD_NAMES)
    paths = fake_host(tmp_path, {0: [0, 1], 1: [2, 3]}, (4, 12), (5,))
    fake_step(paths[0], paths[2], 1, {100: 0, 101: 0, 102: 0, 200: 0, 201: 0})
    host = source(paths)
    host.open()
    host.read()
    write_stat(paths[0], [0, 1, 2, 3], busy=10, idle=190)
    samples = host.read()
    assert {s.field for s in samples} == set(hostfields.HOST_FIELD_NAMES)
    for sample in samples:
        assert hostfields.check_host_sample(sample.domain, sample.field) is None, sample


def test_rows_go_through_ingestion_as_host_metrics(tmp_path):
    from datetime import datetime, timezone
    host = source(fake_host(tmp_path, {0: [0, 1]}, (4,)))
    host.open()
    lines = collector.ndjson(host.read(), "nid001234").decode().splitlines()
    rows = [json.loads(line) for line in lines]
    assert all(set(row) == {"ts", "host", "host_metrics", "field", "value"} for row in rows)
    parsed = ingest.parse_batch(enumerate(rows), now=datetime.fromtimestamp(T0 + 60, timezone.utc),
                                default_cluster="alps")
    assert not parsed.errors and parsed.frame.empty
    assert len(parsed.net) == len(rows)
    assert ("gpu0", "host_gpu_page_cache") in set(zip(parsed.net["nic"], parsed.net["field"]))


def test_dry_run_prints_host_rows_from_the_given_trees(tmp_path):
    import subprocess
    import sys

    from .recording import SCRIPT
    proc, nodes, cgroup = fake_host(tmp_path, {0: [0, 1]}, (4,), gpu_file_gib={0: 23})
    result = subprocess.run([sys.executable, str(SCRIPT), "--source", "none", "--nics", "off", "--host-metrics", "on",
                             "--proc", str(proc), "--node-sysfs", str(nodes), "--cgroup-root", str(cgroup),
                             "--versions", "off", "--dry-run", "--duration", "0.3", "--interval", "0.2",
                             "--hostname", "nid001234"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert {"host_metrics": "gpu0", "field": "host_gpu_page_cache", "value": 23 * GIB, "host": "nid001234"}.items() <= \
        next(row for row in rows if row["field"] == "host_gpu_page_cache").items()


def test_ranks_under_a_launcher_and_their_workers_are_told_apart():
    """torchrun (a task) starts two ranks, each with two data-loader workers; a shell task starts one rank."""
    procs = {10: (1, 0), 11: (10, 0), 12: (10, 0), 13: (11, 0), 14: (11, 0), 15: (12, 0), 16: (12, 0),
             20: (1, 0), 21: (20, 0), 22: (21, 0)}
    names = {10: "torchrun", 11: "python", 12: "python", 13: "pt_data_worker", 14: "pt_data_worker",
             15: "pt_data_worker", 16: "pt_data_worker", 20: "bash", 21: "python", 22: "pt_data_worker"}
    assert collector.split_ranks(procs, names) == ([11, 12, 21], [13, 14, 15, 16, 22])
    assert collector.split_ranks({30: (1, 0)}, {30: "torchrun"}) == ([30], [])  # a launcher alone is what ran


class NumaNvml:
    """NVML as the collector's adapter sees it on a GH200 node: GPU i's memory is NUMA node 4 + 8 i (nvmlDeviceGetNumaNodeId)."""

    def __init__(self, nodes=(4, 12, 20, 28), fail=False):
        self.nodes, self.fail, self.calls = nodes, fail, []

    def init(self):
        self.calls.append("init")
        if self.fail:
            raise RuntimeError("NVML Shared Library Not Found")

    def shutdown(self):
        self.calls.append("shutdown")

    def device_count(self):
        return len(self.nodes)

    def device_handle(self, index):
        return index

    def numa_node(self, handle):
        return self.nodes[handle]


def test_the_gpus_numa_nodes_come_from_nvml_when_it_can_say(tmp_path):
    nvml = NumaNvml(nodes=(12, 4))  # GPU 0's memory is node 12: not the order of the node ids
    assert collector.nvml_numa_map(nvml) == {12: 0, 4: 1} and nvml.calls == ["init", "shutdown"]
    assert collector.nvml_numa_map(NumaNvml(fail=True)) == {}
    assert collector.nvml_numa_map(object()) == {}  # an adapter without the call
    host = source(fake_host(tmp_path, {0: [0, 1]}, (4, 12)), gpu_numa=collector.nvml_numa_map(NumaNvml(nodes=(12, 4))))
    host.open()
    assert host.gpu_nodes == {4: 1, 12: 0}
