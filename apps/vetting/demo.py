"""Demo part: 90 days of node vetting on the demo system, with repeat offenders and one bad switch.

* vetnode runs of the centre's protocol (gpu idle, cuda saxpy, nccl internode) on allocations of 8-32
  nodes (twice a day in the last month, daily before), 4 ranks per node; the running Megatron job's allocation was vetted in
  its first minute and passed (no planted node or switch is in it, nor in any running job);
* DCGM diagnostics (level 1, per GPU) every third day on a few dozen nodes, and the site's health
  checks every day on a hundred;
* planted: a node whose GPU runs hot at idle (gpu idle fails again and again), a node whose CUDA
  check fails now and then, a node with a DCGM memory failure that asks to isolate the GPU (critical),
  and a switch behind which NCCL bandwidth has been low in every run of the last ten days.

The rules then run over it, and a staff member has already drained the hot node and sent it to repair
(dry runs), so the triage page, node timelines and the topology's vetting colours have something to show.
"""
from datetime import timedelta

from django.db.models import Count
from django.utils import timezone

from apps.core.bulk import insert_rows
from apps.core.demo import DemoContext, demo_part

DEMO_SUBMITTER = "demo"
DEMO_STAFF = "staff"
PROTOCOL = "alps-ml-vetting"
EVALS = (("gpu idle", "vetnode.evaluations.gpu_eval.GPUEval"), ("cuda saxpy", "vetnode.evaluations.cuda_eval.CUDAEval"),
         ("nccl internode", "vetnode.evaluations.nccl_lib_eval.NcclLibEval"))
DAYS = 90


def reset() -> None:
    """Remove the demo's runs, and the recommendations and node states that only they explained."""
    from .models import NodeHealth, NodeHealthEvent, Recommendation, VettingResult, VettingRun

    VettingRun.objects.filter(submitter=DEMO_SUBMITTER).delete()
    for recommendation in Recommendation.objects.all():
        if not VettingResult.objects.filter(id__in=recommendation.evidence).exists():
            recommendation.delete()
    vetted = set(VettingResult.objects.values_list("host", flat=True).distinct())
    NodeHealthEvent.objects.exclude(host__in=vetted).delete()
    NodeHealth.objects.exclude(host__in=vetted).delete()


def _gpus(rng, hot: bool):
    base = 31 if hot else 24
    return {"gpus": [{"id": f"00000009:0{i + 1}:00.0", "module_id": i + 1, "model": "NVIDIA GH200 120GB",
                      "temp": base + rng.randint(0, 3) + (i == 2) * (40 if hot else 0), "memory_total": 97871, "memory_used": 0}
                     for i in range(4)]}


@demo_part("vetting", order=70, reset=reset, weight=5)
def build(context: DemoContext) -> dict:
    from apps.jobs.models import Cluster, Job
    from apps.topology.selectors import topology_index_current

    from .services import rules_evaluate

    hostnames = context.shared.get("hostnames") or []
    if not hostnames:
        return {}
    cluster = Cluster.objects.get(name="alps")
    place = _places(topology_index_current(), hostnames)
    # The planted nodes run no job now: a node drained and in repair, or asked to be excluded, is not one a running
    # job sits on (the job page would say "in repair" inside a running job whose vetting passed at its start).
    busy = {host for nodes in Job.objects.filter(cluster=cluster, state="RUNNING").values_list("node_list", flat=True) for host in nodes}
    key = context.shared.get("megatron_job")
    megatron = Job.objects.get(cluster__name=key[0], job_id=key[1]) if key else None
    planted = _planted(hostnames, place, busy, set(megatron.node_list) if megatron else set())
    history = _History(context.rng, hostnames, cluster, planted, now=timezone.now().replace(second=0, microsecond=0))
    for day in range(DAYS, 0, -1):
        history.add_day(day)
    history.add_isolated_gpu()
    # The running Megatron job was vetted when it started (its first minutes, inside the allocation), and passed:
    # none of the planted nodes or switches is in it.
    if megatron:
        history.vetnode(megatron.start_time + timedelta(minutes=1), list(megatron.node_list), job=megatron)
    rows = _store(history.runs, place)
    outcome = rules_evaluate(now=history.now)
    _drain_and_repair(planted["hot"])
    failing = _failing_nodes()
    context.shared["vetting_planted"] = planted
    return {"runs": len(history.runs), "results": rows, "nodes that failed": failing, "recommendations": outcome["created"]}


def _places(index, hostnames: list[str]) -> dict[str, tuple[int, str]]:
    """host -> (dragonfly group, switch label) of its first NIC, for hosts the topology places."""
    place = {}
    for host in hostnames:
        found = index.nic_of(host, 0)
        if found:
            place[host] = (found.group, found.switch_label)
    return place


def _planted(hostnames: list[str], place: dict, busy: set[str], in_megatron: set[str]) -> dict:
    """The hot node, the flaky one, the one whose GPU DCGM asks to isolate (idle nodes all three) and the bad
    switch (in group 5, outside the Megatron run) with the nodes behind it."""
    by_switch: dict[str, list[str]] = {}
    for host, (_, switch) in place.items():
        by_switch.setdefault(switch, []).append(host)

    def idle_from(position: int) -> str:
        return next(host for host in hostnames[position:] + hostnames[:position] if host not in busy)

    bad_switch = next(switch for switch, members in sorted(by_switch.items())
                      if len(members) >= 4 and switch.startswith("5.") and not in_megatron & set(members))
    return {"hot": idle_from(376), "flaky": idle_from(1501), "isolate": idle_from(2099), "bad_switch": bad_switch,
            "behind_bad": sorted(by_switch[bad_switch])}


class _History:
    """Vetting runs drawn day by day from the demo's RNG (the order of the draws is the data: keep it)."""

    def __init__(self, rng, hostnames: list[str], cluster, planted: dict, *, now):
        self.rng, self.hostnames, self.cluster, self.now = rng, hostnames, cluster, now
        self.hot, self.flaky, self.isolate, self.behind_bad = planted["hot"], planted["flaky"], planted["isolate"], planted["behind_bad"]
        self.runs: list[tuple] = []  # (VettingRun, its results as dicts)

    def add_run(self, started, source, hosts, results, *, job=None, protocol=PROTOCOL) -> None:
        from .models import VettingRun

        failed = sorted({r["host"] for r in results if r["outcome"] in ("fail", "critical")})
        run = VettingRun(cluster=self.cluster, job=job, job_id_number=job.job_id if job else None, source=source, protocol_name=protocol,
                         protocol_hash="" if source != "vetnode" else "5f2c0e9d1a7b43c8a2d6e0f1b9c3a4d5e6f708192a3b4c5d6e7f8091a2b3c4d",
                         started=started, ended=started + timedelta(minutes=4), submitter=DEMO_SUBMITTER,
                         user_name=job.user_name if job else "", account=job.account if job else "", hosts=len(hosts),
                         failed_hosts=failed, results_total=len(results),
                         results_failed=sum(1 for r in results if r["outcome"] in ("fail", "critical")))
        self.runs.append((run, results))

    def _evaluation(self, host: str, local: int, name: str, hot_now: bool, cuda_bad: bool, recent_bad: bool):
        """(metrics, outcome, status) of one vetnode evaluation on one rank."""
        rng = self.rng
        metrics, outcome, status = {}, "pass", "SUCCESS"
        if name == "gpu idle":
            metrics = _gpus(rng, hot_now)
            if hot_now:
                outcome, status = "fail", "FAILED"
        elif name == "cuda saxpy":
            metrics = {"cuda_version": "12080", "NVRTC_version": "12.8"}
            if cuda_bad:
                outcome, status = "fail", "FAILED"
                metrics = {"error": "outside tolerance for host-device vectors", "cuda_version": 12080, "NVRTC_version": "12.8"}
        elif local != 0:
            outcome, status = "skipped", "SKIPPED"
            metrics = {"bandwidth": "N/A for non-master ranks in internode topology."}
        else:
            low = recent_bad and host in self.behind_bad
            gbs = rng.uniform(8.5, 12.5) if low else rng.uniform(21.0, 23.8)
            metrics = {"bandwidth": f"{gbs:6.2f} GB/s"}
            if gbs <= 16.11:
                outcome, status = "fail", "FAILED"
        return metrics, outcome, status

    def vetnode(self, started, hosts, job=None) -> None:
        """A run of the centre's protocol on ``hosts``: every evaluation on every rank (4 per node)."""
        rng = self.rng
        results = []
        recent_bad = started > self.now - timedelta(days=10)
        for host in hosts:
            hot_now = host == self.hot and rng.random() < 0.8
            cuda_bad = host == self.flaky and rng.random() < 0.5
            for local in range(4):
                for name, kind in EVALS:
                    metrics, outcome, status = self._evaluation(host, local, name, hot_now, cuda_bad, recent_bad)
                    results.append({"host": host, "eval_name": name, "eval_type": kind, "kind": "vetnode", "status": status,
                                    "outcome": outcome, "local_rank": local, "metrics": metrics,
                                    "bandwidth_gbs": float(metrics["bandwidth"].split()[0]) if "GB/s" in str(metrics.get("bandwidth")) else None,
                                    "message": metrics.get("error", "")})
        self.add_run(started, "vetnode", hosts, results, job=job)

    def allocation(self, size, *planted):
        start = self.rng.randrange(len(self.hostnames) - size)
        return sorted(set(self.hostnames[start:start + size - len(planted)]) | set(planted))

    def add_day(self, day: int) -> None:
        """One day ``day`` days ago: routine vetnode runs, the planted nodes' runs, DCGM diagnostics, health checks."""
        rng, now = self.rng, self.now
        for hour in ((9, 21) if day <= 30 else (9,)):
            self.vetnode(now - timedelta(days=day) + timedelta(hours=hour - now.hour), self.allocation(rng.choice((8, 16, 24, 32))))
        if day <= 7 or day % 4 == 0:  # the hot node, vetted often, fails most of the time
            self.vetnode(now - timedelta(days=day, hours=7), self.allocation(16, self.hot))
        if day % 2 == 0:  # the flaky one fails now and then
            self.vetnode(now - timedelta(days=day, hours=5), self.allocation(16, self.flaky))
        if day <= 10:  # the jobs behind the bad switch
            self.vetnode(now - timedelta(days=day, hours=4), self.allocation(12 + len(self.behind_bad), *self.behind_bad))
        if day % 3 == 0:
            self._dcgm_diagnostics(now - timedelta(days=day, hours=2))
        self._health_checks(now - timedelta(days=day, hours=6))

    def _dcgm_diagnostics(self, started) -> None:
        for host in self.rng.sample(self.hostnames, 30):
            results = [{"host": host, "eval_name": test, "eval_type": "dcgm diag / " + category, "kind": "dcgm_diag", "status": "Pass",
                        "outcome": "pass", "gpu": gpu, "metrics": {}, "message": ""}
                       for test, category in (("software", "Deployment"), ("memory", "Hardware"), ("pcie", "Integration"))
                       for gpu in range(4)]
            self.add_run(started, "dcgm-diag", [host], results, protocol="dcgmi diag (DCGM 4.2.3)")

    def _health_checks(self, started) -> None:
        rng = self.rng
        health_hosts = rng.sample(self.hostnames, 100)
        results = [{"host": host, "eval_name": "nhc", "eval_type": "site health check", "kind": "health",
                    "status": "OK" if rng.random() > 0.02 else "WARN", "metrics": {}, "message": ""} for host in health_hosts]
        for result in results:
            result["outcome"] = "pass" if result["status"] == "OK" else "warn"
            if result["status"] == "WARN":
                result["message"] = "check_fs_used /tmp: 91 % used"
        self.add_run(started, "health", health_hosts, results, protocol="nhc 1.4.3")

    def add_isolated_gpu(self) -> None:
        """The isolated GPU: DCGM asks to take it out, yesterday."""
        diag = [{"host": self.isolate, "eval_name": "memory", "eval_type": "dcgm diag / Hardware", "kind": "dcgm_diag",
                 "status": "Fail" if gpu == 1 else "Pass", "outcome": "critical" if gpu == 1 else "pass", "gpu": gpu, "metrics": {},
                 "message": "A memory mismatch was detected on GPU 1, but no error was reported by CUDA or NVML. Run a field diagnostic on "
                            "the GPU. (DCGM error 58)" if gpu == 1 else ""} for gpu in range(4)]
        self.add_run(self.now - timedelta(hours=20), "dcgm-diag", [self.isolate], diag, protocol="dcgmi diag (DCGM 4.2.3)")


def _store(runs: list[tuple], place: dict) -> int:
    """Write the runs and their results (placed on group and switch); the number of results."""
    from .models import VettingResult, VettingRun

    VettingRun.objects.bulk_create([run for run, _ in runs], batch_size=500)
    rows = []
    for run, results in runs:
        group_switch = {host: place.get(host, (None, "")) for host in {r["host"] for r in results}}
        for result in results:
            group, switch = group_switch[result["host"]]
            rows.append(VettingResult(
                run=run, time=run.started, host=result["host"], group=group, switch=switch, job_id_number=run.job_id_number,
                user_name=run.user_name, account=run.account, kind=result["kind"], eval_name=result["eval_name"],
                eval_type=result["eval_type"], status=result["status"], outcome=result["outcome"], local_rank=result.get("local_rank"),
                gpu=result.get("gpu"), bandwidth_gbs=result.get("bandwidth_gbs"), metrics=result.get("metrics", {}),
                message=result.get("message", "")))
    insert_rows(VettingResult, rows)
    return len(rows)


def _drain_and_repair(hot: str) -> None:
    """A staff member already acted: the hot node was drained and is in repair. That drain is planted history (a dry run
    changes no state), so it goes through a backend that asks no Slurm and says so in the event's output."""
    from apps.topology.models import Node, NodeStateChoices

    from .scontrol import SlurmNodeActions
    from .services import node_act

    planted = SlurmNodeActions(lambda command, timeout: "demo history, planted by manage.py demo: no Slurm was asked", dry_run=False)
    for action, reason in (("drain", "GPU 2 at 71 °C idle, three weeks running"), ("repair", "RMA: thermal pad on GPU 2")):
        try:
            node_act(hot, action, actor=DEMO_STAFF, reason=reason, backend=planted)
        except Exception:  # noqa: BLE001 - a state the rules did not reach: skip, the demo stays consistent
            break
    # Slurm shows the node the staff member drained as drained (the planted backend asked no Slurm).
    Node.objects.filter(hostname=hot).update(state=NodeStateChoices.STATE_DRAIN)


def _failing_nodes() -> int:
    from .models import VettingResult

    return VettingResult.objects.filter(run__submitter=DEMO_SUBMITTER, outcome__in=("fail", "critical")).values("host").annotate(
        n=Count("id")).count()
