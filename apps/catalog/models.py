"""Models of the catalog app: the products loaded from their files (each change kept as a version), the
runs of their quality checks, and the incidents those checks open and close."""
from django.conf import settings
from django.db import models

from .choices import CheckRunKindChoices, CheckRunStatusChoices, DataProductStateChoices


class DataProduct(models.Model):
    name = models.SlugField(max_length=63, unique=True)
    title = models.CharField(max_length=200)
    domain = models.CharField(max_length=100, db_index=True)
    status = models.CharField(max_length=20, help_text="proposed, active, deprecated or retired (from the file)")
    owner_team = models.CharField(max_length=100, db_index=True)
    owner_contact = models.CharField(max_length=200)
    version = models.CharField(max_length=50)
    definition = models.JSONField(help_text="The validated file, durations in seconds.")
    source_file = models.CharField(max_length=500)
    digest = models.CharField(max_length=64, help_text="sha256 of the file's text")
    loaded = models.DateTimeField()
    search_text = models.TextField(blank=True, help_text="name, title, purpose, tags and columns, lowercased, for search")
    # Current quality (the last run of each check), for the list's badges and filters.
    state = models.CharField(max_length=10, choices=DataProductStateChoices.choices, default=DataProductStateChoices.UNKNOWN, db_index=True)
    state_as_of = models.DateTimeField(null=True, blank=True, help_text="When the checks that set the state ran.")
    newest_sample = models.DateTimeField(null=True, blank=True, help_text="The timestamp that drove the state.")
    coverage = models.FloatField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True, help_text="kind -> {status, summary} of the last run of each check")
    last_run = models.DateTimeField(null=True, blank=True)
    next_run = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["domain", "name"]

    def __str__(self) -> str:
        return self.name


class ProductVersion(models.Model):
    """One loaded state of a product's file: a new row whenever the file's text changed."""

    product = models.ForeignKey(DataProduct, on_delete=models.CASCADE, related_name="versions")
    version = models.CharField(max_length=50)
    digest = models.CharField(max_length=64)
    definition = models.JSONField()
    changes = models.JSONField(default=list, blank=True, help_text="Top-level keys that changed from the previous version.")
    loaded = models.DateTimeField()

    class Meta:
        ordering = ["-loaded", "-id"]


class CheckRun(models.Model):
    product = models.ForeignKey(DataProduct, on_delete=models.CASCADE, related_name="checks")
    kind = models.CharField(max_length=20, choices=CheckRunKindChoices.choices)
    ran = models.DateTimeField(db_index=True)
    status = models.CharField(max_length=10, choices=CheckRunStatusChoices.choices)
    summary = models.CharField(max_length=1000)
    measured = models.JSONField(default=dict, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-ran", "-id"]
        indexes = [models.Index(fields=["product", "kind", "-ran"], name="catalog_check_latest")]


class Incident(models.Model):
    """Opened by a check that fails (a target breached), closed by the first run of the same check that passes."""

    product = models.ForeignKey(DataProduct, on_delete=models.CASCADE, related_name="incidents")
    kind = models.CharField(max_length=20)
    opened = models.DateTimeField()
    closed = models.DateTimeField(null=True, blank=True)
    opened_by = models.ForeignKey(CheckRun, on_delete=models.SET_NULL, null=True, related_name="+")
    closed_by = models.ForeignKey(CheckRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    message = models.CharField(max_length=1000)
    # The people's side: staff acknowledge it (someone looks), assign it to a staff member, and resolve it by hand.
    acknowledged = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    assignee = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                    help_text="Who closed it by hand (empty when a passing check closed it).")

    class Meta:
        ordering = ["-opened", "-id"]
        constraints = [models.UniqueConstraint(fields=["product", "kind"], condition=models.Q(closed__isnull=True),
                                               name="catalog_one_open_incident_per_check")]

    @property
    def open(self) -> bool:
        return self.closed is None

    @property
    def state(self) -> str:
        """open (nobody looked yet), acknowledged, or resolved (closed by a passing check or by hand)."""
        from .choices import IncidentStateChoices

        if self.closed is not None:
            return IncidentStateChoices.RESOLVED
        return IncidentStateChoices.ACKNOWLEDGED if self.acknowledged is not None else IncidentStateChoices.OPEN


class IncidentSubscription(models.Model):
    """A person who wants mail when one product opens an incident."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="catalog_subscriptions")
    product = models.ForeignKey(DataProduct, on_delete=models.CASCADE, related_name="subscriptions")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["product__name", "user_id"]
        constraints = [models.UniqueConstraint(fields=["user", "product"], name="catalog_one_subscription_per_product")]
