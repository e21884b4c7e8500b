"""Choices of the vetting app's models, named ``<Model><Field>Choices``: models and code compare with these,
never with bare strings.

The plain modules that reason about these values keep them as tuples (``records.KINDS`` and ``OUTCOMES``,
``rules.ACTIONS``, ``SEVERITIES`` and ``KIND_PARAMS``, ``node_states.STATES`` and ``STAFF_ACTIONS``);
``tests/vetting/test_choices.py`` holds the two to the same values.
"""
from django.db import models


class VettingRunSourceChoices(models.TextChoices):
    VETNODE = "vetnode", "vetnode"
    VETNODE_LEGACY = "vetnode-legacy", "vetnode-legacy"
    DCGM_DIAG = "dcgm-diag", "dcgm-diag"
    JSON = "json", "json"
    HEALTH = "health", "health"
    PREFLIGHT = "preflight", "pre-flight"  # the prolog's deploy/slurm/belvedere-preflight.sh


class VettingResultKindChoices(models.TextChoices):
    VETNODE = "vetnode", "vetnode"
    DCGM_DIAG = "dcgm_diag", "DCGM diagnostics"
    HEALTH = "health", "health check"


class VettingResultOutcomeChoices(models.TextChoices):
    PASS = "pass", "pass"
    WARN = "warn", "warn"
    FAIL = "fail", "fail"
    CRITICAL = "critical", "critical"
    SKIPPED = "skipped", "skipped"
    UNKNOWN = "unknown", "unknown"


class RuleKindChoices(models.TextChoices):
    FAILURES_IN_WINDOW = "failures_in_window", "failures in window"
    LOW_BANDWIDTH_SAME_SWITCH = "low_bandwidth_same_switch", "low bandwidth same switch"
    CRITICAL_RESULT = "critical_result", "critical result"
    VERSION_DRIFT = "version_drift", "version drift"


class RuleActionChoices(models.TextChoices):
    """What a rule's finding recommends; also ``Recommendation.action``."""

    SUSPECT = "suspect", "suspect"
    DRAIN_RECOMMENDED = "drain_recommended", "drain recommended"
    EXCLUDE_NOW = "exclude_now", "exclude now"


class RuleSeverityChoices(models.TextChoices):
    """Also ``NodeHealth.severity`` and ``Recommendation.severity``."""

    WARNING = "warning", "warning"
    CRITICAL = "critical", "critical"


class NodeHealthStateChoices(models.TextChoices):
    """Also ``NodeHealthEvent.from_state`` and ``to_state``; the moves between them are ``node_states.py``."""

    HEALTHY = "healthy", "healthy"
    SUSPECT = "suspect", "suspect"
    DRAIN_RECOMMENDED = "drain_recommended", "drain recommended"
    DRAINED = "drained", "drained"
    IN_REPAIR = "in_repair", "in repair"
    RETURNED = "returned", "returned to service"


class NodeHealthActionChoices(models.TextChoices):
    """What staff may do to a node's health state (the API's ``action``)."""

    ACKNOWLEDGE = "acknowledge", "acknowledge"
    DRAIN = "drain", "drain"
    REPAIR = "repair", "repair"
    RETURN = "return", "return"
    CLEAR = "clear", "clear"


class RecommendationSubjectKindChoices(models.TextChoices):
    NODE = "node", "node"
    SWITCH = "switch", "switch"


class RecommendationStatusChoices(models.TextChoices):
    OPEN = "open", "open"
    ACKNOWLEDGED = "acknowledged", "acknowledged"
    DONE = "done", "done"
    DISMISSED = "dismissed", "dismissed"
