"""Models of the namespaces app: each team's envelope, the namespaces Belvedere manages, the requests
that create, change and tear them down, and every transition with who, when and the git commit."""
from django.conf import settings
from django.db import models

from .choices import ManagedNamespaceStateChoices, NamespaceRequestKindChoices, NamespaceRequestStatusChoices


class TeamEnvelope(models.Model):
    """What a team may hold across its namespaces without asking; requests inside it are approved at once.
    Empty fields fall back to the inventory's ``default_envelope``."""

    project = models.OneToOneField("accounts.Project", on_delete=models.CASCADE, related_name="namespace_envelope")
    cpu = models.CharField(max_length=20, blank=True, help_text="e.g. 64 (cores)")
    memory = models.CharField(max_length=20, blank=True, help_text="e.g. 256Gi")
    namespaces = models.PositiveIntegerField(null=True, blank=True)
    gpus = models.JSONField(default=dict, blank=True, help_text='{"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": 4}')
    storage = models.JSONField(default=dict, blank=True, help_text='{"ceph-rbd": "1Ti"}')
    approvers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="approves_namespaces_of",
                                       help_text="Staff who approve this team's requests beyond the envelope (empty: any staff).")

    def __str__(self) -> str:
        return f"envelope of {self.project.slurm_account}"


class ManagedNamespace(models.Model):
    name = models.CharField(max_length=63, unique=True)
    project = models.ForeignKey("accounts.Project", on_delete=models.PROTECT, related_name="namespaces")
    environment = models.CharField(max_length=20)
    spec = models.JSONField(help_text="The spec last committed.")
    state = models.CharField(max_length=20, choices=ManagedNamespaceStateChoices.choices, default=ManagedNamespaceStateChoices.PROVISIONING)
    commit = models.CharField(max_length=64, blank=True, help_text="The last commit that changed its directory.")
    teardown_step = models.CharField(max_length=20, blank=True)
    backup_requested = models.BooleanField(default=False)
    sync_status = models.CharField(max_length=20, blank=True)
    health_status = models.CharField(max_length=20, blank=True)
    status_message = models.CharField(max_length=1000, blank=True)
    status_detail = models.JSONField(default=dict, blank=True, help_text="Argo CD's answer, parsed: operation, conditions, apps.")
    status_checked = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)
    archived = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NamespaceRequest(models.Model):
    kind = models.CharField(max_length=10, choices=NamespaceRequestKindChoices.choices)
    project = models.ForeignKey("accounts.Project", on_delete=models.PROTECT, related_name="namespace_requests")
    namespace = models.ForeignKey(ManagedNamespace, on_delete=models.PROTECT, null=True, blank=True, related_name="requests")
    name = models.CharField(max_length=63, help_text="The namespace's full name.")
    spec = models.JSONField()
    status = models.CharField(max_length=20, choices=NamespaceRequestStatusChoices.choices, default=NamespaceRequestStatusChoices.DRAFT)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="namespace_requests")
    needs_approval = models.JSONField(default=list, blank=True, help_text="Why a person must approve (empty: within the envelope).")
    approvers = models.JSONField(default=list, blank=True, help_text="Who may approve (usernames; empty: any staff).")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    decision_reason = models.CharField(max_length=500, blank=True)
    commit = models.CharField(max_length=64, blank=True)
    diff = models.TextField(blank=True, help_text="What the request changed in the GitOps repository.")
    message = models.CharField(max_length=1000, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"request {self.pk}: {self.get_kind_display()} {self.name} ({self.status})"

    @property
    def number(self) -> str:
        return f"nsr-{self.pk}"


class RequestEvent(models.Model):
    """One step of a request or a namespace: from, to, who, why, and the commit when there was one."""

    request = models.ForeignKey(NamespaceRequest, on_delete=models.CASCADE, null=True, blank=True, related_name="events")
    namespace = models.ForeignKey(ManagedNamespace, on_delete=models.CASCADE, null=True, blank=True, related_name="events")
    from_state = models.CharField(max_length=20, blank=True)
    to_state = models.CharField(max_length=20)
    actor = models.CharField(max_length=150)
    message = models.CharField(max_length=1000, blank=True)
    commit = models.CharField(max_length=64, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "id"]
