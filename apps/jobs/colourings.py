"""What the jobs app lets the topology page colour nodes by (apps.core.node_colourings): the running job on
each node, as the user looking may see it. The topology app offers it in its "Colour by" select without
importing this app.

``register()`` is called from JobsConfig.ready().
"""
from __future__ import annotations

from apps.core.node_colourings import NodeColouring, NodeLabels, register_node_colouring

from .selectors import OTHER_JOBS, OTHER_USERS_JOBS, running_job_labels_for_user


def running_job_labels(user) -> NodeLabels:
    """The user's largest running jobs by name, their other jobs and other users' jobs in grey."""
    return NodeLabels(labels=running_job_labels_for_user(user), unlabelled="no running job",
                      muted=(OTHER_JOBS, OTHER_USERS_JOBS))


def register() -> None:
    register_node_colouring(NodeColouring(key="job", title="running job", order=10, labels=running_job_labels))
