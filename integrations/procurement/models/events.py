"""Inbound webhook events, stored raw before anything is processed (procurement and WMS share the table)."""

from __future__ import annotations

from django.db import models


class EventStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    PROCESSING = "processing", "Processing"
    PROCESSED = "processed", "Processed"
    DEFERRED = "deferred", "Deferred (waits for an earlier event)"
    FAILED = "failed", "Failed"


class InboundEvent(models.Model):
    """A signed event as received: the intent row of its processing task.

    Written by the webhook view (signature, timestamp and schema already checked) in the same transaction
    that enqueues the task on commit. The task claims the row by compare-and-set on `status`
    (pending/deferred -> processing), so a duplicate message or a replayed request changes nothing.
    `(source, event_id)` is unique: the peer's event id is the idempotency key. Unique per source rather than
    globally because the procurement system and the WMS number their events independently.
    A deferred event names what it waits for in `waits_for` (e.g. "po:PO-1001") and is re-run when that
    arrives; one still waiting after DEFERRED_EVENT_TIMEOUT_H is failed, never silently dropped. One left in
    `processing` by a worker that died is put back to pending by the sweep task (`claimed_at` says since when).
    """

    channel = models.CharField(
        max_length=16,
        default="procurement",
        help_text="Which endpoint took it, so which task processes it: procurement or wms.",
    )
    source = models.CharField(max_length=32)
    event_id = models.CharField(max_length=128)
    type = models.CharField(max_length=64, db_index=True)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=EventStatus.choices, default=EventStatus.PENDING, db_index=True)
    waits_for = models.CharField(max_length=128, blank=True, db_index=True)
    signed_with = models.PositiveSmallIntegerField(
        default=0, help_text="Index of the secret that verified it (0 = current, 1 = previous during rotation)."
    )
    occurred_at = models.DateTimeField(null=True, blank=True, help_text="When the peer says it happened.")
    received_at = models.DateTimeField(db_index=True)
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When a worker last claimed it.")
    processed_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    request = models.ForeignKey(
        "procurement.ProcurementRequest",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="events",
        help_text="The request it concerned, once known.",
    )

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "event_id"], name="inboundevent_unique_event_per_source"),
        ]
        indexes = [models.Index(fields=["status", "received_at"])]

    def __str__(self) -> str:
        return f"{self.source}:{self.event_id} {self.type} ({self.status})"
