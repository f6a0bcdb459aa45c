"""Provisioning a received node: rack position, planned links, cabling, switch ports, OS, baseline driver,
burn-in, cluster join. The steps run as the provisioning ticket's automated steps (workflows engine); this row
remembers what they did, so a rollback undoes exactly that."""

from __future__ import annotations

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

    The ticket's steps (workflows/definitions/provisioning.py) call workflows.rollouts.provisioning.services,
    which record here what they changed: the rack position assigned, the planned links created, the switch
    ports configured (with their rollback lines), the OS install job, the baseline packages. "Roll back" undoes
    exactly that. `current_step` and `error` show where a failed run stopped. One open run per node (partial
    unique constraint) and a node lock for the whole run.
    """

    ticket = models.OneToOneField(
        "workflows.Ticket", null=True, blank=True, on_delete=models.SET_NULL, related_name="provisioning_run"
    )
    node = models.ForeignKey("cmdb.Node", null=True, on_delete=models.SET_NULL, related_name="+")
    hostname = models.CharField(max_length=253)
    status = models.CharField(
        max_length=12, choices=ProvisioningStatus.choices, default=ProvisioningStatus.PENDING, db_index=True
    )
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
    os_install_ref = models.CharField(
        max_length=200, blank=True, db_index=True, help_text="The OS install system's job id."
    )
    os_install_status = models.CharField(max_length=16, blank=True, help_text="Last status reported or polled.")
    os_install_message = models.CharField(max_length=500, blank=True)
    baseline = models.JSONField(default=list, blank=True, help_text="[[component, version], ...] installed.")
    correlation_id = models.CharField(max_length=64, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
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
