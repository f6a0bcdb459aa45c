"""Received alerts -> ReceivedAlert rows and CMDB health events, through the same writer and health policy as
agent signals (cmdb.services.health_signals): a severe firing alert on a card opens or updates its repair
ticket via the failed-card hook; a resolved alert closes the event it opened.

Idempotent: an alert is (fingerprint, startsAt). A repeated notification of a firing alert (Alertmanager
repeats every repeat_interval, and redelivers after a timeout) only counts the delivery; a resolved one closes
once. Each alert is processed in its own savepoint, so one bad alert does not lose the others.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from django.utils import timezone

from cmdb.services.health_grading import PolicyBook
from cmdb.services.health_signals import health_event_close, health_signal_raise
from gpuops.context import ChangeSource, change_context
from gpuops.metrics import ALERTS_RECEIVED

from ..models import AlertSource, AlertStatus, ReceivedAlert
from .payloads import IncomingAlert
from .rules import rules_load, signal_for
from .targets import target_find

logger = logging.getLogger(__name__)


@dataclass
class IntakeResult:
    outcomes: Counter = field(default_factory=Counter)
    alerts: list[ReceivedAlert] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"received": len(self.alerts), "outcomes": dict(self.outcomes), "ids": [a.pk for a in self.alerts]}


def alerts_receive(*, source: AlertSource, alerts: list[IncomingAlert]) -> IntakeResult:
    """Store and apply every alert of one notification. Returns what happened to each (for the answer)."""
    result = IntakeResult()
    rules = rules_load()
    policies = PolicyBook.load()
    for alert in alerts:
        with change_context(source=ChangeSource.INTEGRATION, correlation_id=f"alert-{alert.fingerprint}"[:64]):
            try:
                row, outcome = _receive_one(source, alert, rules, policies)
            except IntegrityError:  # the same alert delivered twice at once: the other delivery holds it
                row = ReceivedAlert.objects.get(fingerprint=alert.fingerprint, starts_at=alert.starts_at)
                outcome = "duplicate"
        result.outcomes[outcome] += 1
        result.alerts.append(row)
        ALERTS_RECEIVED.labels(source=source.kind, outcome=outcome).inc()
    return result


@transaction.atomic
def _receive_one(source: AlertSource, alert: IncomingAlert, rules, policies) -> tuple[ReceivedAlert, str]:
    row = (
        ReceivedAlert.objects.select_for_update()
        .filter(fingerprint=alert.fingerprint, starts_at=alert.starts_at)
        .first()
    )
    if row is not None:
        return row, _again(row, alert, policies)
    spec = signal_for(alert, rules)
    target = target_find(alert.labels, node_only=bool(spec and spec.node_only))
    row = ReceivedAlert(
        source=source,
        fingerprint=alert.fingerprint,
        starts_at=alert.starts_at,
        ends_at=alert.ends_at,
        status=alert.status,
        alertname=alert.alertname,
        labels=alert.labels,
        annotations=alert.annotations,
        value=alert.value,
        rule=spec.rule if spec else None,
        node=target.node,
        accelerator=target.accelerator,
        is_matched=target.is_matched and spec is not None,
        unmatched_reason=target.reason or ("" if spec else f"no alert rule for {alert.alertname!r}"),
    )
    with transaction.atomic():
        row.save()
    if not row.is_matched:
        logger.info("alert %s (%s) unmatched: %s", alert.alertname, alert.fingerprint, row.unmatched_reason)
        return row, "unmatched"
    if alert.status == AlertStatus.RESOLVED:
        return row, "resolved"  # its firing was never received: nothing to close
    signal = health_signal_raise(
        node=target.node,
        accelerator=target.accelerator,
        kind=spec.kind,
        code=spec.code,
        message=_message(alert, spec.kind, spec.code),
        source=source.kind,
        correlation_id=f"alert-{alert.fingerprint}",
        policies=policies,
    )
    row.health_event = signal.event
    row.error = signal.hook_error
    row.save(update_fields=["health_event", "error", "updated_at"])
    return row, "failed" if signal.grade.marks_failed and target.accelerator else "applied"


def _again(row: ReceivedAlert, alert: IncomingAlert, policies) -> str:
    """The same alert again: a repeat of a firing one, or its resolution."""
    row.notifications += 1
    fields = ["notifications", "updated_at"]
    outcome = "duplicate"
    if alert.status == AlertStatus.RESOLVED and row.status == AlertStatus.FIRING:
        row.status = AlertStatus.RESOLVED
        row.ends_at = alert.ends_at or timezone.now()
        fields += ["status", "ends_at"]
        outcome = "resolved"
        if row.health_event_id and _event_is_this_alerts(row):
            health_event_close(event_id=row.health_event_id, policies=policies)
    row.save(update_fields=fields)
    return outcome


def _event_is_this_alerts(row: ReceivedAlert) -> bool:
    """Close only what alerts opened: an event the agent opened (the same Xid it reported) is the agent's and the
    repair's to close; and not while another firing alert still counts on the same event."""
    event = row.health_event
    if event is None or event.source != (row.source.kind if row.source else event.source):
        return False
    return not (
        ReceivedAlert.objects.filter(health_event_id=event.pk, status=AlertStatus.FIRING).exclude(pk=row.pk).exists()
    )


def _message(alert: IncomingAlert, kind: str, code: str) -> str:
    summary = alert.annotations.get("summary") or alert.annotations.get("description") or ""
    head = f"{alert.alertname}" + (f" ({kind} {code})" if code else f" ({kind})")
    return f"{head}: {summary}".strip(": ")[:500]
