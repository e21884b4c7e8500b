"""What the vetting app lets the topology page colour nodes by (apps.core.node_colourings): each node's health
state, else its vetting outcome of the last days. The topology app offers it in its "Colour by" select without
importing this app.

``register()`` is called from VettingConfig.ready().
"""
from __future__ import annotations

from apps.core.node_colourings import NodeColouring, NodeLabels, register_node_colouring

from .selectors import vetting_labels


def vetting_node_labels(user) -> NodeLabels:
    """The same for every user: node health is not private."""
    labels, colours = vetting_labels()
    return NodeLabels(labels=labels, unlabelled="not vetted in 7 days", colours=colours)


def register() -> None:
    register_node_colouring(NodeColouring(key="vetting", title="vetting", order=20, labels=vetting_node_labels))
