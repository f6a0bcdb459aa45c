"""The change history: one row per create, update or delete of a CMDB object."""

from __future__ import annotations

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import models

from gpuops.context import ChangeSource


class CurrentTransactionId(models.Func):
    """The id of the writing transaction, as the column default of `ChangeRecord.txid` (see cmdb/changefeed.py).

    PostgreSQL: `pg_current_xact_id()` (a 64-bit xid8, never wraps). SQLite runs one write transaction at a
    time (IMMEDIATE transactions), so the id order already is the commit order there: the column is 0.
    """

    output_field = models.BigIntegerField()

    def as_sql(self, compiler, connection, **extra):
        return "0", []

    def as_postgresql(self, compiler, connection, **extra):
        return "(pg_current_xact_id()::text::bigint)", []


class ChangeAction(models.TextChoices):
    CREATE = "create", "Created"
    UPDATE = "update", "Updated"
    DELETE = "delete", "Deleted"


class ChangeRecord(models.Model):
    """Who changed what, when, through which path, under which correlation id, with the before/after of
    each changed field (`changes = {field: [before, after]}`). Append-only."""

    at = models.DateTimeField(db_index=True)
    content_type = models.ForeignKey(ContentType, on_delete=models.PROTECT, related_name="+")
    object_id = models.PositiveBigIntegerField()
    object_repr = models.CharField(max_length=300)
    action = models.CharField(max_length=8, choices=ChangeAction.choices)
    changes = models.JSONField(default=dict)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_repr = models.CharField(max_length=150, blank=True)
    source = models.CharField(max_length=16, choices=ChangeSource.CHOICES, db_index=True)
    correlation_id = models.CharField(max_length=64, db_index=True)
    # Optional free text: the why (a ticket title, an import file name).
    reason = models.CharField(max_length=300, blank=True)
    # The writing transaction (set by the database, never by Python): the change feed pages by (txid, id) up to
    # the oldest transaction still running, so a row committed late is never skipped (cmdb/changefeed.py).
    txid = models.BigIntegerField(db_default=CurrentTransactionId(), editable=False)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["content_type", "object_id", "-at"]),
            models.Index(fields=["txid", "id"], name="changerecord_feed"),
            # The failure analytics and the spares forecast look for cards turning failed in a period: a few rows
            # among every change ever recorded.
            models.Index(
                fields=["at"], condition=models.Q(changes__health__1="failed"), name="changerecord_turned_failed"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} {self.object_repr} by {self.actor_repr or self.source}"
