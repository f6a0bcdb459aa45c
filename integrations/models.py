"""Outbound webhooks: who wants to hear about which events (subscriptions) and each delivery owed to them.

The delivery machinery is in integrations/webhooks/ (signing, fan-out, the delivery task); docs/monitoring.md,
"Out to other systems", is the receiver's side.
"""

from __future__ import annotations

import secrets

from django.db import models
from django.db.models import Q


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class WebhookSubscription(models.Model):
    """A receiver URL and what it wants: object types (`node`, `accelerator`, ..., `ticket`), events (`create`,
    `update`, `delete` for CMDB changes; `opened`, `comment`, a state name, ... for tickets) and sites. An empty
    list (or no site) means all. Events without a site (a vendor, a catalog entry) go only to subscriptions with
    no site filter. Every body is signed with `secret` (HMAC-SHA256, see integrations/webhooks/signing.py)."""

    name = models.CharField(max_length=100, unique=True)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=200, default=new_secret, help_text="Shared with the receiver; signs bodies.")
    object_types = models.JSONField(default=list, blank=True, help_text='e.g. ["node", "accelerator", "ticket"]')
    events = models.JSONField(default=list, blank=True, help_text='e.g. ["create", "update", "opened"]')
    sites = models.ManyToManyField("cmdb.Site", blank=True, related_name="+")
    is_active = models.BooleanField(default=True)
    max_attempts = models.PositiveSmallIntegerField(default=8)
    timeout_s = models.FloatField(default=5.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class DeliveryState(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    FAILED = "failed", "Failed (will retry)"
    DEAD = "dead", "Dead (gave up)"


class WebhookDelivery(models.Model):
    """One event owed to one subscription: the body (fixed at fan-out, so every attempt sends the same bytes),
    the attempts so far and the last answer. Unique per (subscription, event): a fan-out that runs twice writes
    one row. A worker claims the row by compare-and-set on `claimed_until` before it sends, and a delivered or
    dead row is never sent again by a task (only by the admin's "redeliver")."""

    subscription = models.ForeignKey(WebhookSubscription, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=80)
    event = models.CharField(max_length=40)
    object_type = models.CharField(max_length=40)
    payload = models.JSONField()
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_index=True)
    claimed_until = models.DateTimeField(null=True, blank=True)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_excerpt = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(fields=["subscription", "event_id"], name="webhookdelivery_once_per_event"),
        ]
        indexes = [
            models.Index(
                fields=["state", "next_attempt_at"],
                name="webhookdelivery_due",
                condition=Q(state__in=["pending", "failed"]),
            )
        ]

    def __str__(self) -> str:
        return f"{self.event_id} -> {self.subscription_id} ({self.state})"


class WebhookFeedCursor(models.Model):
    """Where the fan-out of CMDB changes stands in the change feed (cmdb/changefeed.py): one row, locked while a
    fan-out runs, so two workers never fan out the same records and none is skipped."""

    name = models.CharField(max_length=40, unique=True, default="cmdb-changes")
    txid = models.BigIntegerField(default=-1)
    last_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} at ({self.txid}, {self.last_id})"


__all__ = ["DeliveryState", "WebhookDelivery", "WebhookFeedCursor", "WebhookSubscription", "new_secret"]


class DriftKind(models.TextChoices):
    SCHEDULER_UNSCHEDULABLE = "scheduler_unschedulable", "Drained or down in the scheduler, schedulable in gpuops"
    SCHEDULER_SCHEDULABLE = "scheduler_schedulable", "Schedulable in the scheduler, cordoned in gpuops"
    MISSING = "missing", "Not known to the scheduler"


class SchedulerDrift(models.Model):
    """A node on which its cluster's scheduler and the CMDB disagree, as the scheduler sync last saw it. The sync
    overwrites neither side: it records the disagreement (with the scheduler's own state and reason) until the
    two agree again, when the row is resolved. At most one open row per node."""

    node = models.ForeignKey("cmdb.Node", on_delete=models.CASCADE, related_name="scheduler_drifts")
    cluster = models.ForeignKey("cmdb.Cluster", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=32, choices=DriftKind.choices)
    scheduler_state = models.CharField(max_length=200, blank=True)
    scheduler_reason = models.CharField(max_length=500, blank=True)
    cmdb_cordoned = models.BooleanField(help_text="Whether gpuops had the node cordoned when the drift was seen.")
    cmdb_cordon_reason = models.CharField(max_length=300, blank=True)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-first_seen_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node"], condition=Q(resolved_at__isnull=True), name="schedulerdrift_one_open_per_node"
            ),
        ]
        indexes = [models.Index(fields=["resolved_at", "-first_seen_at"], name="schedulerdrift_open")]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.kind}"

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None
