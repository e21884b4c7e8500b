"""Read access to job layouts, joined with the topology."""
from dataclasses import dataclass

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
