"""Choices of the triage app's models (``<Model><Field>Choices``); the plain module ``inbox.py`` keeps the same
values as tuples (``KINDS``, ``STATES``, ``SEVERITIES``) and tests/triage/test_inbox.py holds the two together."""
from django.db import models


class TriageItemKindChoices(models.TextChoices):
    WASTEFUL_JOB = "wasteful_job", "wasteful job"
    STRAGGLER = "straggler", "straggler"
    FAILING_NODE = "failing_node", "failing node"
    NODE_FAULT = "node_fault", "hardware fault"
    BAD_SWITCH = "bad_switch", "bad switch"
    NAMESPACE_REQUEST = "namespace_request", "namespace approval"
    CATALOG_INCIDENT = "catalog_incident", "catalogue incident"


class TriageItemStateChoices(models.TextChoices):
    NEW = "new", "new"
    ACKNOWLEDGED = "acknowledged", "acknowledged"
    RESOLVED = "resolved", "resolved"
    MUTED = "muted", "muted"


class TriageItemSeverityChoices(models.TextChoices):
    CRITICAL = "critical", "critical"
    WARNING = "warning", "warning"
    INFO = "info", "info"
