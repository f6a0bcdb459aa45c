"""Server side of the inventory agents: credentials, the per-node ingest state and the stored raw reports.

Tokens are stored as SHA-256 hashes only (a leaked database dump gives no usable credential); the clear token is
shown once, when it is issued.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.conf import settings
from django.db import models

from cmdb.models import Node, ServerModel, Site, TrackedModel


class AgentToken(TrackedModel):
    """A credential that lets one node's agent post reports for that node only.

    A node may hold several tokens while an agent is being re-keyed; `revoked_at` ends one. Issue and revoke
    through `inventory_agents.services.tokens` (the clear token never touches the database).
    """

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="agent_tokens")
    token_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the token (hex).")
    prefix = models.CharField(max_length=12, help_text="First characters of the token, to recognise it.")
    description = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    change_log_exclude: ClassVar[frozenset[str]] = TrackedModel.change_log_exclude | {"token_hash", "last_used_at"}

    class Meta:
        ordering = ["node_id", "-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.node})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class EnrollmentToken(TrackedModel):
    """A shared secret baked into an install image: lets new nodes register themselves (status `received`).

    Nodes created through it land in `site` with `server_model` (both required by the CMDB); an operator fixes
    them up when racking. Bounded by `max_uses` and `expires_at`.
    """

    name = models.CharField(max_length=100, unique=True)
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12)
    site = models.ForeignKey(Site, on_delete=models.PROTECT, related_name="+")
    server_model = models.ForeignKey(ServerModel, on_delete=models.PROTECT, related_name="+")
    max_uses = models.PositiveIntegerField(null=True, blank=True, help_text="Blank: unlimited.")
    uses = models.PositiveIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    change_log_exclude: ClassVar[frozenset[str]] = TrackedModel.change_log_exclude | {"token_hash", "uses"}

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AgentState(models.Model):
    """What ingestion remembers per node between reports (one row per node that ever reported).

    `last_hash` is the digest of the last reconciled report's inventory content: a report with the same digest
    (and a full reconcile younger than AGENT_FULL_RECONCILE_MINUTES) only refreshes `Node.last_seen_at`.
    `signal_fingerprints` remembers which health occurrences were counted already, so a re-sent report never
    counts an Xid twice.
    """

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="agent_state")
    last_hash = models.CharField(max_length=64, blank=True)
    last_full_at = models.DateTimeField(null=True, blank=True)
    # collected_at of the last applied report: an older report (replayed from an agent's spool after a newer one
    # was applied) must not roll the CMDB back.
    last_collected_at = models.DateTimeField(null=True, blank=True)
    last_report = models.ForeignKey("Report", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    agent_version = models.CharField(max_length=32, blank=True)
    reports_applied = models.PositiveIntegerField(default=0)
    signal_fingerprints = models.JSONField(default=list, blank=True)
    # The last applied report had no LLDP neighbour and no InfiniBand port: the next one without either has no
    # discovery work to queue (workflows/glue/host_lldp.py). False also means "not known yet".
    host_view_empty = models.BooleanField(default=False)

    class Meta:
        verbose_name = "agent state"

    def __str__(self) -> str:
        return f"agent state of {self.node_id}"


class ReportStatus(models.TextChoices):
    APPLIED = "applied", "Applied"
    SUPERSEDED = "superseded", "Superseded (older than the last applied report)"
    REJECTED = "rejected", "Rejected (invalid)"
    FAILED = "failed", "Failed (server error)"


class Report(models.Model):
    """One received agent report, kept raw for diagnosis. Only the last N per node are kept (beat task prunes).

    Unchanged re-reports (same digest) are not stored: they would only repeat the last row. The id is the
    correlation id of every change record and placement the report caused.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="agent_reports")
    received_at = models.DateTimeField()
    collected_at = models.DateTimeField(null=True, blank=True)
    schema = models.CharField(max_length=64, blank=True)
    agent_version = models.CharField(max_length=32, blank=True)
    report_hash = models.CharField(max_length=64, blank=True)
    size_bytes = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=ReportStatus.choices)
    payload = models.JSONField(null=True, blank=True)
    errors = models.JSONField(default=list, blank=True)
    # What reconciliation did: counts of created/updated/moved/missing cards, events, records.
    summary = models.JSONField(default=dict, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-received_at"]
        indexes = [models.Index(fields=["node", "-received_at"]), models.Index(fields=["status", "-received_at"])]

    def __str__(self) -> str:
        return f"{self.node} @ {self.received_at:%Y-%m-%d %H:%M:%S} ({self.status})"

    @property
    def correlation_id(self) -> str:
        return str(self.id)
