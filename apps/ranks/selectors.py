"""Read access to job layouts, joined with the topology."""
from dataclasses import dataclass

from django.core.cache import cache

from apps.core.link_colourings import link_colouring
from apps.jobs.choices import JobStateChoices
from apps.topology.selectors import topology_index_current

from .layout import LayoutError, ParallelSizes, RankLayout, block_placement
from .models import JobLayout
from .ranktable import RankTable, build_rank_table


class LayoutNoLongerFits(ValueError):
    """The stored layout cannot be placed on the job as it is now (its node list changed since)."""


@dataclass
class JobRanks:
    stored: JobLayout
    layout: RankLayout
    table: RankTable


def job_layout_get(job) -> JobLayout | None:
    return JobLayout.objects.filter(job=job).first()


def job_ranks(job) -> JobRanks | None:
    """The job's layout with every rank placed on node, GPU, NIC, switch and group; None without one.

    Raises :class:`LayoutNoLongerFits` when the job's node list no longer holds the stored world size."""
    stored = job_layout_get(job)
    if stored is None:
        return None
    sizes = ParallelSizes(tp=stored.tp, pp=stored.pp, cp=stored.cp, ep=stored.ep, etp=stored.etp, dp=stored.dp,
                          vpp=stored.vpp, order=stored.order, num_layers=stored.num_layers,
                          first_stage_layers=stored.first_stage_layers, last_stage_layers=stored.last_stage_layers)
    try:
        layout = RankLayout(sizes, stored.world_size)
        if stored.rank_map:
            placement = [(host, local) for host, local in stored.rank_map]
        else:
            placement = block_placement(stored.world_size, job.node_list, stored.tasks_per_node)
    except LayoutError as exc:
        raise LayoutNoLongerFits(f"The stored layout no longer fits this job: {exc}. Set the layout again.") from None
    table = build_rank_table(layout.all_coords(), placement, topology_index_current())
    return JobRanks(stored, layout, table)


LINK_LOADS_SECONDS = 60  # the network measurement behind the verdicts is read at most once a minute per process
NETWORK_COLOURING = "network"  # the link colouring (apps.core.link_colourings) that measures the global links


def global_link_loads(job, user) -> dict[tuple[int, int], float] | None:
    """The measured load of the global links per dragonfly group pair ((a, b), a < b → fraction of the
    pair's capacity, over the last minutes) while ``job`` runs; None when the job does not run (a load
    measured now says nothing about it) or nothing measures the links. The measurement comes from the
    registry :mod:`apps.core.link_colourings` (the system app fills it from the switch port counters);
    ranks does not import the apps above it. Only the pair fractions are kept (the same for every user)."""
    if job.state != JobStateChoices.RUNNING:
        return None
    colouring = link_colouring(NETWORK_COLOURING)
    if colouring is None:
        return None
    key = "ranks:global-link-loads"  # one topology, one measurement of it
    cached = cache.get(key)
    if cached is None:
        loads = colouring.loads(user)
        cached = {"pairs": dict(loads.pairs) if loads is not None else None}
        cache.set(key, cached, LINK_LOADS_SECONDS)
    return cached["pairs"]
