"""The ranks section of the job page, for templates/jobs/detail.html while it includes the section
itself; the panel registry uses apps.ranks.panel directly."""
from .panel import shell


def ranks_context(job, params, topology=None, placement=None) -> dict:
    """The context of templates/ranks/_job_section.html (``topology`` and ``placement`` are no longer
    needed: the rank map loads from the figure endpoint after the page)."""
    return shell(job, params)
