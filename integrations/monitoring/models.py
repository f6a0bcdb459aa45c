"""Alert sources (who may post alerts), the rule table (which alert is which health signal), received alerts."""

from __future__ import annotations

from django.db import models

from cmdb.models import Accelerator, HealthEvent, Node


class SourceKind(models.TextChoices):
    ALERTMANAGER = "alertmanager", "Prometheus Alertmanager"
    GENERIC = "generic", "Generic JSON (Zabbix, in-house monitors)"


class AlertSource(models.Model):
    """A monitor allowed to post alerts, with its bearer token. Only the token's SHA-256 is stored; the clear
    token is shown once, when the source is created or re-keyed."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=SourceKind.choices, default=SourceKind.ALERTMANAGER)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    token_prefix = models.CharField(max_length=16, editable=False, help_text="The token's first characters.")
    is_active = models.BooleanField(default=True)
    description = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AlertRule(models.Model):
    """Which alerts are which health signal: an alertname (exact) and label matchers -> a signal kind and code.

    The signal is graded by the health policy (cmdb HealthPolicy), like an agent's: the rule says what the alert
    is, the policy says how bad it is. The code is the rule's `code`, or the value of the label `code_label`, or
    the alert's value (`code_from_value`, e.g. dcgm-exporter's DCGM_FI_DEV_XID_ERRORS holds the last Xid). The
    lowest `priority` matching rule wins; `alertname` "*" matches any alert (the generic fallbacks).
    """

    name = models.CharField(max_length=100, unique=True)
    alertname = models.CharField(
        max_length=200, db_index=True, help_text='Exact alertname, "~regex" (a full match), or "*" for any.'
    )
    matchers = models.JSONField(
        default=dict,
        blank=True,
        help_text='Labels the alert must carry: {"label": "value"}; a value "~regex" is a full-match regex.',
    )
    kind = models.CharField(max_length=32, help_text="Health signal kind (xid, ecc_uncorrectable, node_down, ...).")
    code = models.CharField(max_length=32, blank=True)
    code_label = models.CharField(max_length=100, blank=True, help_text="Take the code from this label.")
    code_from_value = models.BooleanField(default=False, help_text="Take the code from the alert's value.")
    scope = models.CharField(
        max_length=8,
        choices=[("card", "The card (falls back to the node)"), ("node", "The node")],
        default="card",
    )
    priority = models.PositiveSmallIntegerField(default=100)
    is_active = models.BooleanField(default=True)
    description = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["priority", "name"]

    def __str__(self) -> str:
        return f"{self.alertname} -> {self.kind}"


class AlertStatus(models.TextChoices):
    FIRING = "firing", "Firing"
    RESOLVED = "resolved", "Resolved"


class ReceivedAlert(models.Model):
    """One alert (fingerprint + startsAt) as received, matched to a node / card or kept unmatched.

    Never dropped: an alert for a host or card the CMDB does not know is stored with `unmatched_reason` and
    listed. Redelivery of the same alert (the same fingerprint and startsAt) updates this row.
    """

    source = models.ForeignKey(AlertSource, null=True, on_delete=models.SET_NULL, related_name="alerts")
    fingerprint = models.CharField(max_length=64)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=AlertStatus.choices, db_index=True)
    alertname = models.CharField(max_length=200, blank=True)
    labels = models.JSONField(default=dict)
    annotations = models.JSONField(default=dict, blank=True)
    value = models.CharField(max_length=64, blank=True)
    rule = models.ForeignKey(AlertRule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    accelerator = models.ForeignKey(Accelerator, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    is_matched = models.BooleanField(default=False, db_index=True)
    unmatched_reason = models.CharField(max_length=300, blank=True)
    health_event = models.ForeignKey(HealthEvent, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error = models.CharField(max_length=500, blank=True)
    notifications = models.PositiveIntegerField(default=1, help_text="How many times it was delivered.")
    received_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "starts_at"], name="receivedalert_unique_occurrence")
        ]
        indexes = [models.Index(fields=["is_matched", "status"])]

    def __str__(self) -> str:
        return f"{self.alertname} {self.fingerprint} ({self.status})"
