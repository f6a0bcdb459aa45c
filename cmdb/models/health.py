"""Health signals (XIDs, ECC, vendor health codes) as events, and the policy that grades them (data)."""

from __future__ import annotations

from django.db import models

from .accelerators import Accelerator
from .catalog import Vendor
from .nodes import Node


class Severity(models.TextChoices):
    INFO = "info", "Info"
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"


class HealthAction(models.TextChoices):
    MONITOR = "monitor", "Monitor"
    RESET = "reset", "Reset the accelerator"
    REBOOT = "reboot", "Reboot the node"
    DRAIN_REPAIR = "drain_repair", "Drain and repair"
    RMA = "rma", "RMA the card"


class HealthPolicy(models.Model):
    """How a signal is graded: (vendor or any, kind, code or any) -> severity and action. Editable data.

    The most specific row wins (vendor + code over code over kind).
    """

    vendor = models.ForeignKey(Vendor, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32, help_text="xid, ecc_uncorrectable, remap_failure, vendor_health, ...")
    code = models.CharField(max_length=32, blank=True, help_text="e.g. XID number; blank matches any code.")
    severity = models.CharField(max_length=16, choices=Severity.choices)
    action = models.CharField(max_length=16, choices=HealthAction.choices)
    marks_failed = models.BooleanField(default=False, help_text="Sets the card to failed and opens a repair case.")
    description = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["kind", "code"]
        verbose_name_plural = "health policies"
        constraints = [
            models.UniqueConstraint(
                fields=["vendor", "kind", "code"],
                condition=models.Q(vendor__isnull=False),
                name="healthpolicy_unique_vendor",
            ),
            models.UniqueConstraint(
                fields=["kind", "code"], condition=models.Q(vendor__isnull=True), name="healthpolicy_unique_any_vendor"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.code or '*'} -> {self.severity}/{self.action}"


class HealthEvent(models.Model):
    """A health signal on a card (or node). Deduplicated: while open, a repeat bumps `count`/`last_seen_at`."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_events")
    accelerator = models.ForeignKey(
        Accelerator, null=True, blank=True, on_delete=models.CASCADE, related_name="health_events"
    )
    kind = models.CharField(max_length=32)
    code = models.CharField(max_length=32, blank=True)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    action = models.CharField(max_length=16, choices=HealthAction.choices, default=HealthAction.MONITOR)
    message = models.CharField(max_length=500, blank=True)
    dedup_key = models.CharField(max_length=200)
    count = models.PositiveIntegerField(default=1)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    # Who reported it: "agent" (inventory agent reports) or a monitor ("alertmanager", "generic").
    source = models.CharField(max_length=32, default="agent")

    class Meta:
        ordering = ["-last_seen_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["dedup_key"], condition=models.Q(resolved_at__isnull=True), name="healthevent_one_open_per_key"
            )
        ]
        indexes = [models.Index(fields=["node", "-last_seen_at"])]

    def __str__(self) -> str:
        return f"{self.kind}:{self.code} on {self.accelerator or self.node}"
