"""Demo part: what the whole-machine views need beyond the demo's ~56 running jobs: one clearly wasteful job
and one job crowded by a neighbour.

* **The wasteful job** (``WASTEFUL_NAME``): 16 nodes of another project than the Megatron run's, running for
  seven hours on one dragonfly group away from it; its name gives it the ``idle_gpus`` profile
  (``synthetic_jobs.profile_for``: on every node only GPU 0 works), so by GPU-hours lost
  (``saturation.waste``) it is the biggest wasteful running job by a wide margin.
* **The crowding neighbour** (``NEIGHBOUR_NAME``): 16 nodes of another project on the group the Megatron
  run spills into, from two hours ago, communicating heavily (its GPUs' NVLink traffic near the links'
  ceiling at build time), so the Megatron job's "job in context" panel finds a pipeline boundary that crosses
  into a group where a link-heavy job runs.

Both get their run's telemetry now (at least a sample a minute from two hours before the fleet window on,
10 s for the last minutes, as the telemetry part does for the jobs it covers) and are scored now; the jobs'
timeline keeps them running (``keep_running`` in the feeders' memory) and the telemetry feeder keeps feeding
them by their name's profile. Nodes are ones no demo job used during their window, never down, so their
samples are theirs alone. Fixed choices (no draw from the demo's shared generator), so the parts after this
one build the same demo as without it.
"""
from __future__ import annotations

import math
import random
from datetime import timedelta

from django.conf import settings

from apps.core.demo import DemoContext, demo_feeder, demo_part

DEMO_CLUSTER = "alps"
WASTEFUL_ID, NEIGHBOUR_ID = 1_290_001, 1_290_002
WASTEFUL_NAME = "data-prep-tokenize-commoncrawl"
NEIGHBOUR_NAME = "moe-alltoall-mixtral-8x22b"
WASTEFUL_NODES, WASTEFUL_HOURS = 16, 7
NEIGHBOUR_NODES, NEIGHBOUR_HOURS = 16, 2
JOB_INTERVAL, FINE_INTERVAL = 10, 60
AVOID_GROUPS = {17}  # the catalogue part's silent nodes are drawn from group 17


def reset() -> None:
    """Nothing of its own beyond the two jobs, which go with the demo cluster (the jobs part removes it)."""
    from apps.jobs.models import Job

    Job.objects.filter(cluster__name=DEMO_CLUSTER, cluster__title__startswith="[demo]",
                       job_id__in=[WASTEFUL_ID, NEIGHBOUR_ID]).delete()


def _owners(context: DemoContext, count: int) -> list[tuple[str, str]]:
    """(user, account) pairs of projects the demo researcher is not in, one project each."""
    memberships = context.shared.get("memberships") or {}
    theirs = set(memberships.get("demo") or ())
    pairs = sorted((user, account) for user, accounts in memberships.items() if user not in {"demo", "staff"}
                   for account in accounts if account not in theirs)
    random.Random(f"{context.seed}:system:owners").shuffle(pairs)
    chosen, accounts = [], set()
    for user, account in pairs:
        if account not in accounts:
            chosen.append((user, account))
            accounts.add(account)
        if len(chosen) == count:
            break
    return chosen


def _free_by_group(cluster, since, now) -> dict[int, list[str]]:
    """Up nodes no demo job used since ``since``, by dragonfly group (hostnames sorted)."""
    from django.db.models import Q

    from apps.jobs.models import Job
    from apps.topology.models import Node, NodeStateChoices

    used = {host for nodes in Job.objects.filter(cluster=cluster, start_time__isnull=False, start_time__lt=now)
            .filter(Q(end_time__isnull=True) | Q(end_time__gt=since)).values_list("node_list", flat=True) for host in nodes or []}
    free: dict[int, list[str]] = {}
    for host, group in (Node.objects.exclude(state=NodeStateChoices.STATE_DOWN).exclude(hostname__in=used)
                        .order_by("hostname").values_list("hostname", "group__number")):
        free.setdefault(group, []).append(host)
    return free


def _create(cluster, job_id: int, name: str, user: str, account: str, nodes: list[str], start, command: str):
    from hostlist import collect_hostlist

    from apps.jobs.choices import JobStateChoices
    from apps.jobs.models import Job, JobStep, node_search_text

    hostlist = collect_hostlist(nodes)
    job = Job.objects.create(
        cluster=cluster, job_id=job_id, name=name, user_name=user, account=account, partition="normal", qos="normal",
        state=JobStateChoices.RUNNING, submit_time=start - timedelta(minutes=12), start_time=start, time_limit_minutes=24 * 60,
        nodes=hostlist, node_list=nodes, node_search=node_search_text(nodes), node_count=len(nodes), tasks=len(nodes) * 4,
        gpus=len(nodes) * 4, working_directory=f"/capstor/scratch/cscs/{user}/{name}", environment="ngc-pytorch-25.01",
        command=command, source="demo")
    JobStep.objects.bulk_create([
        JobStep(job=job, step_id="batch", start_time=start, state=JobStateChoices.RUNNING, nodes=collect_hostlist(nodes[:1]), tasks=1),
        JobStep(job=job, step_id="0", start_time=start + timedelta(seconds=40), state=JobStateChoices.RUNNING, nodes=hostlist,
                tasks=len(nodes) * 4)])
    return job


def _aligned(moment, step: int):
    seconds = math.ceil(moment.timestamp() / step) * step
    return moment + timedelta(seconds=seconds - moment.timestamp())


def _frames(job, profile: str, now, seed: int):
    """The job's run up to ``now``: coarse before the fleet's look-back, a sample a minute after it, 10 s for the
    last minutes (the telemetry part's rule for the jobs it covers). The neighbour's name ("moe-...") gives it
    the communication-heavy profile, which the telemetry feeder keeps feeding."""
    from apps.telemetry.demo import history_points, recent_minutes
    from apps.telemetry.products import choose_step
    from apps.telemetry.synthetic_jobs import Planted, job_chunks

    start = job.start_time
    fine_from = now - timedelta(minutes=max(60, int(settings.DEMO_FLEET_HOURS * 60)) + 120)
    recent = now - timedelta(minutes=recent_minutes())
    coarse = max(JOB_INTERVAL, choose_step((now - start).total_seconds(), max_buckets=history_points()))
    cuts = [(start, coarse), (max(start, min(fine_from, recent)), min(coarse, FINE_INTERVAL)), (max(start, recent), JOB_INTERVAL),
            (now, None)]
    for (lo, interval), (hi, _next) in zip(cuts, cuts[1:]):
        first = _aligned(max(lo, start), interval)
        if hi <= lo or first >= hi:
            continue
        for frame in job_chunks(profile, list(job.node_list), first, (hi - first).total_seconds(), interval_s=float(interval),
                                cluster=DEMO_CLUSTER, seed=(seed * 1_000_003 + job.job_id) * 1_000_033 + int(first.timestamp()),
                                planted=Planted(), elapsed_before_s=(first - start).total_seconds(), hosts_per_chunk=64):
            yield frame


@demo_part("system", order=66, reset=reset, weight=2)
def build(context: DemoContext) -> dict:
    import pandas as pd

    from apps.jobs.models import Cluster, Job
    from apps.saturation.services import job_saturation_refresh
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.store import telemetry_store
    from apps.telemetry.synthetic_jobs import profile_for
    from apps.topology.models import Node, NodeStateChoices

    key = context.shared.get("megatron_job")
    cluster = Cluster.objects.filter(name=DEMO_CLUSTER, title__startswith="[demo]").first()
    if not key or cluster is None:
        return {}
    try:
        store = telemetry_store()
        store.check()
    except TelemetryUnavailable as exc:
        context.say(f"  system       skipped: {exc}")
        return {}
    owners = _owners(context, 2)
    if len(owners) < 2:
        context.say("  system       skipped: needs two projects the demo researcher is not in")
        return {}
    now = context.now
    megatron = Job.objects.get(cluster=cluster, job_id=key[1])
    megatron_groups = list(dict.fromkeys(Node.objects.filter(hostname__in=megatron.node_list).order_by("hostname")
                                         .values_list("group__number", flat=True)))
    wasteful_start = now - timedelta(hours=WASTEFUL_HOURS, minutes=4)
    free = _free_by_group(cluster, wasteful_start, now)
    # The wasteful job: one group away from the Megatron run, the freest one.
    candidates = [g for g in free if g not in megatron_groups and g not in AVOID_GROUPS and len(free[g]) >= WASTEFUL_NODES]
    # The neighbour: on the group the Megatron run spills into (its later pipeline stages), else its first group.
    neighbour_groups = [g for g in reversed(megatron_groups) if len(free.get(g, [])) >= 4]
    if not candidates or not neighbour_groups:
        context.say("  system       skipped: no free nodes for the wasteful job or the neighbour")
        return {}
    group = max(candidates, key=lambda g: (len(free[g]), -g))
    (waster, waster_account), (talker, talker_account) = owners
    wasteful = _create(cluster, WASTEFUL_ID, WASTEFUL_NAME, waster, waster_account, free[group][:WASTEFUL_NODES], wasteful_start,
                       f"sbatch --nodes={WASTEFUL_NODES} --gpus-per-node=4 {WASTEFUL_NAME}.sbatch")
    neighbour_nodes = []
    for g in neighbour_groups:
        neighbour_nodes += free[g][:NEIGHBOUR_NODES - len(neighbour_nodes)]
        if len(neighbour_nodes) == NEIGHBOUR_NODES:
            break
    neighbour = _create(cluster, NEIGHBOUR_ID, NEIGHBOUR_NAME, talker, talker_account, sorted(neighbour_nodes),
                        now - timedelta(hours=NEIGHBOUR_HOURS, minutes=10),
                        f"srun --environment=megatron-lm-core python pretrain_gpt.py --num-experts 8 --expert-model-parallel-size 8 "
                        f"--tensor-model-parallel-size 4 {NEIGHBOUR_NAME}")
    jobs = [wasteful, neighbour]
    Node.objects.filter(hostname__in=[h for job in jobs for h in job.node_list],
                        state=NodeStateChoices.STATE_IDLE).update(state=NodeStateChoices.STATE_ALLOCATED)

    samples = 0
    windows = context.shared.setdefault("telemetry_windows", [])
    for job in jobs:
        frames = list(_frames(job, profile_for(job.name), now, context.seed))
        if frames:
            samples += store.write(pd.concat(frames, ignore_index=True))
        windows.append((list(job.node_list), job.start_time, now))
    for job in jobs:
        job_saturation_refresh(job)
    keep = context.feed_memory.setdefault("keep_running", [])
    keep.extend(job.pk for job in jobs if job.pk not in keep)
    context.shared["system_wasteful_job"] = (DEMO_CLUSTER, WASTEFUL_ID)
    context.shared["system_neighbour_job"] = (DEMO_CLUSTER, NEIGHBOUR_ID)
    return {"jobs": len(jobs), "samples": samples, "wasteful_group": group,
            "neighbour_groups": sorted(set(Node.objects.filter(hostname__in=neighbour.node_list).values_list("group__number", flat=True)))}


# --- switch port counters: a busy global link between the Megatron run's groups ----------------------------------

FABRIC_STEP = 60  # seconds between fabric-manager exports
FABRIC_BUILD_MINUTES = 15  # counters written at build time, so the pages have "now" at once
BUSY_FRACTIONS = (0.83, 0.61)  # the busy pair: its links' share in each direction


def _pair_fractions(groups: list[int], busy: tuple[int, int] | None, seed: int) -> dict[tuple[int, int], tuple[float, float]]:
    """(a, b) -> (fraction a->b, fraction b->a): 3-18 % everywhere (fixed per pair), the busy pair far above."""
    fractions = {}
    for position, a in enumerate(groups):
        for b in groups[position + 1:]:
            rng = random.Random(f"{seed}:fabric:{a}:{b}")
            fractions[(a, b)] = (0.03 + 0.15 * rng.random(), 0.03 + 0.15 * rng.random())
    if busy is not None:
        fractions[busy] = BUSY_FRACTIONS
    return fractions


def _fabric_frame(moments, memory: dict):
    """Cumulative port counters at ``moments`` for every global port of the demo topology: each value is the
    pair's rate times the seconds since a fixed origin, so feeding a moment again writes the same value."""
    import pandas as pd

    from apps.topology.link_load import LINK_BYTES_PER_S

    from .selectors import port_map

    from apps.topology.selectors import topology_current

    topology = topology_current()
    ports = port_map(topology)
    xname_of = {(s.group, s.index): s.xname for s in topology.switches}
    busy = tuple(memory["busy_pair"]) if memory.get("busy_pair") else None
    fractions = _pair_fractions(list(topology.groups), busy, memory.get("seed", 0))
    origin = memory["origin"]
    rows = {"ts": [], "host": [], "nic": [], "field": [], "value": []}
    for switch, places in ports.places.items():
        for port, place in places.items():
            if place.kind != "global":
                continue
            mine, theirs = place.groups
            pair = (min(mine, theirs), max(mine, theirs))
            out, back = fractions[pair] if mine == pair[0] else fractions[pair][::-1]
            for moment in moments:
                seconds = moment.timestamp() - origin
                for field, fraction in (("port_tx_bytes", out), ("port_rx_bytes", back)):
                    rows["ts"].append(moment)
                    rows["host"].append(xname_of[switch])
                    rows["nic"].append(f"p{port}")
                    rows["field"].append(field)
                    rows["value"].append(float(round(fraction * LINK_BYTES_PER_S * seconds)))
    frame = pd.DataFrame(rows)
    frame.insert(1, "cluster", DEMO_CLUSTER)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    return frame


@demo_part("fabric", order=67, reset=lambda: None)
def build_fabric(context: DemoContext) -> dict:
    """Switch port counters of every global link; the pair joining the Megatron run's first and last group busy."""
    from apps.jobs.models import Job
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.store import telemetry_store
    from apps.topology.models import Node

    key = context.shared.get("megatron_job")
    if not key:
        return {}
    megatron = Job.objects.filter(cluster__name=key[0], job_id=key[1]).first()
    groups = list(dict.fromkeys(Node.objects.filter(hostname__in=megatron.node_list if megatron else [])
                                .order_by("hostname").values_list("group__number", flat=True)))
    busy = (min(groups[0], groups[-1]), max(groups[0], groups[-1])) if len(groups) >= 2 else None
    memory = context.feed_memory.setdefault("fabric", {})
    memory.update(busy_pair=list(busy) if busy else None, seed=context.seed,
                  origin=int(context.now.timestamp()) - 86_400)
    step_end = int(context.now.timestamp()) // FABRIC_STEP * FABRIC_STEP
    moments = [context.now + timedelta(seconds=step_end - context.now.timestamp() - FABRIC_STEP * i)
               for i in range(FABRIC_BUILD_MINUTES * 60 // FABRIC_STEP, -1, -1)]
    try:
        written = telemetry_store().write_net(_fabric_frame(moments, memory))
    except TelemetryUnavailable as exc:
        context.say(f"  fabric       skipped: {exc}")
        return {}
    return {"port_samples": written, "busy_pair": busy}


@demo_feeder("fabric", order=67)
def feed_fabric(context) -> dict:
    """The fabric manager's export every minute: the same counters, one more step."""
    from apps.telemetry.backends.base import TelemetryUnavailable
    from apps.telemetry.store import telemetry_store

    memory = context.memory.get("fabric")
    if not memory:
        return {}
    moments = context.grid(FABRIC_STEP)
    if not moments:
        return {}
    try:
        return {"port_samples": telemetry_store().write_net(_fabric_frame(moments, memory))}
    except TelemetryUnavailable:
        return {}


# The host side of the GH200 nodes (issue 39): its own module, registered with the demo here.
from . import host_demo  # noqa: E402,F401
