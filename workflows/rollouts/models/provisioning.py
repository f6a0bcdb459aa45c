"""Provisioning a received node: rack position, planned links, cabling, switch ports, OS, baseline driver,
burn-in, cluster join. One run per attempt, its steps (ids are Celery task ids) and its log."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q


class ProvisioningStatus(models.TextChoices):
    PENDING = "pending", "Not started"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting (operator or external system)"
    FAILED = "failed", "Failed (operator: retry or roll back)"
    DONE = "done", "Done: node active"
    ROLLED_BACK = "rolled_back", "Rolled back"
    CANCELLED = "cancelled", "Cancelled"


class ProvisioningRun(models.Model):
    """Bringing one node from `received` to `active`.

    Steps run in the order of `workflows.rollouts.provisioning.steps.STEP_ORDER`; `current_step` is the one
    running, waiting or failed. What the steps changed in the CMDB is remembered here (rack position, the
    planned links created) so "roll back" undoes exactly that. One open run per node (partial unique constraint).
    """

    ticket = models.OneToOneField("workflows.Ticket", null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="provisioning_run")
    node = models.ForeignKey("cmdb.Node", null=True, on_delete=models.SET_NULL, related_name="+")
    hostname = models.CharField(max_length=253)
    status = models.CharField(max_length=12, choices=ProvisioningStatus.choices, default=ProvisioningStatus.PENDING,
                              db_index=True)
    is_open = models.BooleanField(default=True)
    current_step = models.CharField(max_length=24, blank=True)
    error = models.TextField(blank=True)
    # Inputs: where to put the node (empty: the first rack of the site with room and power), where it joins.
    options = models.JSONField(default=dict, blank=True)
    cluster = models.ForeignKey("cmdb.Cluster", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # What the steps did, for rollback.
    rack = models.ForeignKey("cmdb.Rack", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    position = models.PositiveSmallIntegerField(null=True, blank=True)
    face = models.CharField(max_length=8, blank=True)
    planned_link_ids = models.JSONField(default=list, blank=True)
    configured_ports = models.JSONField(default=list, blank=True, help_text="Switch ports pushed, with rollback.")
    os_install_ref = models.CharField(max_length=200, blank=True, help_text="The OS install system's job id.")
    correlation_id = models.CharField(max_length=64, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["node"], condition=Q(is_open=True), name="provisioning_one_open_per_node"),
        ]

    def __str__(self) -> str:
        return f"provisioning {self.hostname} ({self.status})"

    @property
    def label(self) -> str:
        return self.ticket.reference if self.ticket_id and self.ticket else f"provisioning #{self.pk}"

    @property
    def lock_key(self) -> str:
        return f"provisioning:{self.pk}"


class ProvisioningStep(models.Model):
    """One step of a provisioning run; its id is the Celery task id (same claim rules as rollout NodeStep).

    A step that fails keeps its row (status failed); "retry" resets it to pending under the same id.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(ProvisioningRun, on_delete=models.CASCADE, related_name="steps")
    name = models.CharField(max_length=24)
    status = models.CharField(max_length=12, default="pending", db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    wake_at = models.DateTimeField(null=True, blank=True, db_index=True)
    state = models.JSONField(default=dict, blank=True)
    message = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [models.UniqueConstraint(fields=["run", "name"], name="provisioningstep_once_per_run")]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class ProvisioningLogLine(models.Model):
    """A log line of a provisioning run (kept when the step's own transaction rolls back)."""

    run = models.ForeignKey(ProvisioningRun, on_delete=models.CASCADE, related_name="log_lines")
    step = models.CharField(max_length=24, blank=True)
    at = models.DateTimeField()
    level = models.CharField(max_length=8, default="info")
    message = models.TextField()

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.at:%H:%M:%S} {self.step} {self.level} {self.message[:80]}"
