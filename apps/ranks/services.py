"""Storing a job's Megatron layout: from sizes, from an exact rank map, or from a parsed log.

Refusals are :class:`LayoutRefused` (a domain error, no HTTP in it); the API maps it to a 400 whose
``errors`` name the fields."""
from dataclasses import dataclass

from django.db import transaction

from .layout import LayoutError, ParallelSizes, RankLayout, block_placement
from .models import JobLayout


@dataclass(frozen=True)
class Problem:
    message: str
    field: str | None = None  # dotted path into the request body (``ranks.3.host``), None: the whole layout


class LayoutRefused(ValueError):
    """The layout cannot be stored; ``detail`` is one sentence, ``problems`` the positioned reasons."""

    def __init__(self, detail: str, problems: list[Problem]):
        super().__init__(detail)
        self.detail = detail
        self.problems = list(problems)


SIZE_FIELDS = ("tp", "pp", "cp", "ep", "etp", "dp", "vpp", "order", "num_layers", "first_stage_layers", "last_stage_layers")


def tasks_per_node_of(job) -> int:
    """Tasks per node from the job (4 per GH200 node when Slurm did not say)."""
    if job.tasks and job.node_count and job.tasks % job.node_count == 0:
        return job.tasks // job.node_count
    if job.gpus and job.node_count and job.gpus % job.node_count == 0:
        return job.gpus // job.node_count
    return 4


def _world_size(job, data: dict, ranks: list | None) -> int:
    if ranks:
        return len(ranks)
    if data.get("dp"):
        return data["tp"] * data["pp"] * data.get("cp", 1) * data["dp"]
    if job.node_count:
        return job.node_count * tasks_per_node_of(job)
    raise LayoutRefused("The job has no nodes yet, so the world size is unknown: give dp, or wait until the job starts.",
                        [Problem("give dp or a rank map", field="dp")])


def _check_rank_map(job, ranks: list[dict], tasks_per_node: int) -> list[list]:
    problems, seen = [], {}
    allowed = set(job.node_list)
    ordered = [None] * len(ranks)
    for position, entry in enumerate(ranks):
        rank, host, local = entry["rank"], entry["host"], entry["local_rank"]
        where = f"ranks.{position}"
        if rank >= len(ranks):
            problems.append(Problem(f"rank {rank} but only {len(ranks)} ranks were given (ranks are 0..{len(ranks) - 1})", field=f"{where}.rank"))
        elif rank in seen:
            problems.append(Problem(f"rank {rank} appears twice (also at ranks.{seen[rank]})", field=f"{where}.rank"))
        else:
            seen[rank] = position
            ordered[rank] = [host, local]
        if allowed and host not in allowed:
            problems.append(Problem(f"{host} is not one of this job's nodes", field=f"{where}.host"))
        if local >= tasks_per_node:
            problems.append(Problem(f"local rank {local} but the job runs {tasks_per_node} tasks per node", field=f"{where}.local_rank"))
        if len(problems) >= 50:
            break
    if problems:
        raise LayoutRefused(f"The rank map has {len(problems)}{'+' if len(problems) >= 50 else ''} problem(s); nothing was stored.", problems)
    return ordered


@transaction.atomic
def layout_set(job, data: dict, *, source: str, submitted_by: str, warnings: list[str] | None = None) -> JobLayout:
    """Validate ``data`` (sizes, optional ``ranks``) against Megatron's rules and the job, and store it."""
    ranks = data.get("ranks") or None
    world_size = _world_size(job, data, ranks)
    tasks_per_node = tasks_per_node_of(job)
    # The map's own problems (unknown hosts, duplicates) first: they say more than a size mismatch.
    rank_map = _check_rank_map(job, ranks, tasks_per_node) if ranks else None
    sizes_fields = {name: data[name] for name in SIZE_FIELDS if data.get(name) is not None}
    try:
        layout = RankLayout(ParallelSizes(**sizes_fields), world_size)
    except LayoutError as exc:
        raise LayoutRefused(f"Not a valid Megatron layout: {exc}", [Problem(str(exc), field=None)]) from None
    if not ranks:
        try:
            block_placement(world_size, job.node_list, tasks_per_node)
        except LayoutError as exc:
            raise LayoutRefused(f"The layout does not fit the job: {exc}", [Problem(str(exc), field=None)]) from None
    resolved = layout.sizes
    values = {
        "tp": resolved.tp, "pp": resolved.pp, "cp": resolved.cp, "ep": resolved.ep, "etp": resolved.etp, "dp": resolved.dp,
        "vpp": resolved.vpp, "order": resolved.order, "num_layers": resolved.num_layers,
        "first_stage_layers": resolved.first_stage_layers, "last_stage_layers": resolved.last_stage_layers,
        "world_size": world_size, "tasks_per_node": tasks_per_node, "rank_map": rank_map, "source": source,
        "submitted_by": submitted_by[:150], "warnings": list(warnings or []),
    }
    stored, _ = JobLayout.objects.update_or_create(job=job, defaults=values)
    return stored
