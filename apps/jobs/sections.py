"""What the jobs app shows on the portal's staff page (apps.core.page_sections): the Slurm clusters and their syncs.

``register()`` is called from JobsConfig.ready().
"""
from __future__ import annotations

from apps.core.page_sections import PageSection, register_page_section

from .selectors import cluster_list


def staff_clusters(request) -> dict:
    return {"clusters": cluster_list()}


def register() -> None:
    register_page_section(PageSection(page="staff", key="clusters", order=10, template="jobs/_staff_clusters.html",
                                      context=staff_clusters))
