"""The dragonfly topology as stored: groups, switches, nodes, NICs, global links, revisions.

The plain-data form used for computation is :mod:`apps.topology.model`; ``selectors`` converts.
"""
from django.db import models
from django.utils.translation import gettext_lazy as _

from apps.core.models import TimeStampedModel

from .choices import NodeStateChoices


class DragonflyGroup(models.Model):
    """A dragonfly group (on Cray EX usually one cabinet), by the fabric's group id."""

    number = models.PositiveIntegerField(unique=True)
    cabinet = models.CharField(max_length=20, blank=True, help_text=_("Cabinet xname, e.g. x1100."))

    class Meta:
        ordering = ["number"]

    def __str__(self) -> str:
        return f"group {self.number}"


class Switch(models.Model):
    """A Rosetta switch: (group, index within the group 0-31) as in the algorithmic MAC."""

    group = models.ForeignKey("topology.DragonflyGroup", on_delete=models.CASCADE, related_name="switches")
    index = models.PositiveSmallIntegerField()
    xname = models.CharField(max_length=40, blank=True)

    class Meta:
        ordering = ["group__number", "index"]
        constraints = [models.UniqueConstraint(fields=["group", "index"], name="topology_switch_unique")]

    def __str__(self) -> str:
        return f"switch {self.group.number}.{self.index}"


class Node(TimeStampedModel):
    """A compute node and where it sits; its NICs say which switches it reaches."""

    hostname = models.CharField(max_length=64, unique=True)
    xname = models.CharField(max_length=40, blank=True)
    group = models.ForeignKey("topology.DragonflyGroup", on_delete=models.PROTECT, related_name="nodes")
    cabinet = models.CharField(max_length=20, blank=True)
    gpus = models.PositiveSmallIntegerField(default=0)
    gpu_model = models.CharField(max_length=40, blank=True)
    state = models.CharField(max_length=20, choices=NodeStateChoices.choices, default=NodeStateChoices.STATE_UNKNOWN)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname


class Nic(models.Model):
    """One high-speed network interface (hsnN) of a node, and the switch port it plugs into."""

    node = models.ForeignKey("topology.Node", on_delete=models.CASCADE, related_name="nics")
    index = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=20)
    mac = models.CharField(max_length=17, blank=True)
    switch = models.ForeignKey("topology.Switch", on_delete=models.PROTECT, related_name="nics")
    port = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["node__hostname", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="topology_nic_unique")]

    def __str__(self) -> str:
        return f"{self.node.hostname}:{self.name}"


class GlobalLink(models.Model):
    """L2 cables between two switches of different groups (``links`` parallel cables)."""

    switch_a = models.ForeignKey("topology.Switch", on_delete=models.CASCADE, related_name="+")
    switch_b = models.ForeignKey("topology.Switch", on_delete=models.CASCADE, related_name="+")
    links = models.PositiveSmallIntegerField(default=1)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["switch_a", "switch_b"], name="topology_globallink_unique")]

    def __str__(self) -> str:
        return f"{self.switch_a} = {self.switch_b} x{self.links}"


class TopologyRevision(models.Model):
    """One change of the stored topology: where it came from and what it changed.

    The latest number is the cache key for the in-memory topology of every process.
    """

    created = models.DateTimeField(auto_now_add=True)
    source = models.CharField(max_length=200)
    name = models.CharField(max_length=100, blank=True, help_text=_("System name from the imported file."))
    parameters = models.JSONField(default=dict, blank=True)
    summary = models.JSONField(default=dict)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"revision {self.pk} from {self.source}"
