"""One health signal from outside the agent (a monitoring alert) -> a HealthEvent, card and node health, and
the failed-card hook: the same grading, dedup keys and hook as agent ingestion, for one signal at a time.

Agent ingestion grades and writes a whole report in bulk (inventory_agents.services.events); a monitor sends
one condition at a time, so this writer locks the card and its open event and writes single rows. Both use the
same dedup key (`acc:<id>:<kind>:<code>`, `node:<id>:<kind>:<code>`): an Xid 79 the agent reported and the same
Xid from DCGM are one event, and one repair ticket.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..hooks import AcceleratorFailure, accelerator_failed
from ..models import Accelerator, Health, HealthEvent, Node
from .changelog import tracked_update
from .health_grading import Grade, PolicyBook, worst

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SignalResult:
    """What a raised signal did: its event (new or counted again), the grade, and a hook error if any."""

    event: HealthEvent
    created: bool
    grade: Grade
    hook_error: str = ""


def signal_dedup_key(*, node_id: int, accelerator_id: int | None, kind: str, code: str) -> str:
    if accelerator_id is not None:
        return f"acc:{accelerator_id}:{kind}:{code}"[:200]
    return f"node:{node_id}:{kind}:{code}"[:200]


def _node_health(node: Node, policies: PolicyBook) -> str:
    """The node's health from its cards and its open node-level events (a node event degrades, never fails)."""
    cards = list(Accelerator.objects.filter(node=node, is_missing=False).values_list("health", flat=True))
    node_events = HealthEvent.objects.filter(node=node, accelerator__isnull=True, resolved_at__isnull=True)
    from_events = [
        Health.DEGRADED if g.health == Health.FAILED else g.health
        for g in (policies.grade(None, e.kind, e.code) for e in node_events)
    ]
    return worst(Health.OK, *cards, *from_events)


def _card_health_set(card: Accelerator, health: str, detail: str, now) -> None:
    if card.health == health and card.health_detail == detail[:500]:
        return
    values = {"health": health, "health_detail": detail[:500]}
    if card.health != health:
        values["health_changed_at"] = now
    tracked_update(Accelerator.objects.filter(pk=card.pk), objs=[card], reason="health signal", **values)


def _node_health_set(node: Node, health: str) -> None:
    if node.health != health:
        tracked_update(Node.objects.filter(pk=node.pk), objs=[node], reason="health signal", health=health)


@transaction.atomic
def health_signal_raise(
    *,
    node: Node,
    accelerator: Accelerator | None,
    kind: str,
    code: str,
    message: str,
    source: str,
    correlation_id: str = "",
    policies: PolicyBook | None = None,
) -> SignalResult:
    """Open (or count again) the event of one signal, grade it with the health policy, set the card's and the
    node's health, and - for a new event on a card graded `marks_failed` or drain_repair - call
    `cmdb.hooks.accelerator_failed` (the workflows open or update the repair ticket), exactly as agent ingestion
    does.

    The hook runs in a savepoint: a receiver that raises loses only its own writes; the event stands and the
    error is returned (`hook_error`) for the caller to record.
    """
    now = timezone.now()
    code = code[:32]
    policies = policies or PolicyBook.load()
    node = Node.objects.select_for_update().get(pk=node.pk)
    card = None
    if accelerator is not None:
        card = Accelerator.objects.select_for_update().select_related("model").get(pk=accelerator.pk)
    grade = policies.grade(card.model.vendor_id if card else None, kind, code)
    key = signal_dedup_key(node_id=node.pk, accelerator_id=card.pk if card else None, kind=kind, code=code)
    event = HealthEvent.objects.select_for_update().filter(dedup_key=key, resolved_at__isnull=True).first()
    was_failing = False
    if card is not None:
        vendor = card.model.vendor_id
        was_failing = any(
            policies.grade(vendor, e.kind, e.code).marks_failed
            for e in HealthEvent.objects.filter(accelerator=card, resolved_at__isnull=True)
        )
    created = False
    if event is not None:
        event.count += 1
        event.last_seen_at = now
        event.message = message[:500]
        event.save(update_fields=["count", "last_seen_at", "message"])
    else:
        try:
            with transaction.atomic():  # a concurrent writer opening the same key wins; count on its event
                event = HealthEvent.objects.create(
                    node=node,
                    accelerator=card,
                    kind=kind[:32],
                    code=code,
                    severity=grade.severity,
                    action=grade.action,
                    message=message[:500],
                    dedup_key=key,
                    count=1,
                    first_seen_at=now,
                    last_seen_at=now,
                    source=source[:32],
                )
            created = True
        except IntegrityError:
            event = HealthEvent.objects.select_for_update().get(dedup_key=key, resolved_at__isnull=True)
            event.count += 1
            event.last_seen_at = now
            event.save(update_fields=["count", "last_seen_at"])
    if card is not None and grade.health != Health.OK:  # an info signal says nothing about the card's health
        base = card.health if card.health != Health.UNKNOWN else Health.OK
        health = worst(base, grade.health)
        # The detail names what set the health: a warning does not overwrite why a card is failed.
        _card_health_set(card, health, message if health == grade.health else card.health_detail, now)
    _node_health_set(node, worst(node.health, _node_health(node, policies)))
    hook_error = ""
    if created and card is not None and grade.opens_repair:
        try:
            with transaction.atomic():
                accelerator_failed(
                    AcceleratorFailure(
                        accelerator_id=card.pk,
                        node_id=node.pk,
                        health_event_id=event.pk,
                        kind=event.kind,
                        code=event.code,
                        message=event.message,
                        is_repeat=was_failing,
                        extra={
                            "source": source,
                            "report_id": correlation_id,
                            "severity": event.severity,
                            "action": event.action,
                            "hostname": node.hostname,
                        },
                    )
                )
        except Exception as exc:  # any receiver's error: recorded by the caller, the event stands
            logger.exception("failed-card hook for card %s (event %s) raised", card.pk, event.pk)
            hook_error = f"failed-card hook raised {type(exc).__name__}: {exc}"[:500]
    return SignalResult(event=event, created=created, grade=grade, hook_error=hook_error)


@transaction.atomic
def health_event_close(*, event_id: int, policies: PolicyBook | None = None) -> bool:
    """Resolve an open event (its monitor says the condition ended). Returns False if it was resolved already.

    A card degraded only by open warnings is OK again when the last one closes; a failed card stays failed:
    its repair ticket decides (an Xid 79 does not heal because the alert stopped firing), as with the agent.
    """
    event = HealthEvent.objects.select_for_update().filter(pk=event_id).first()
    if event is None or event.resolved_at is not None:
        return False
    event.resolved_at = timezone.now()
    event.save(update_fields=["resolved_at"])
    policies = policies or PolicyBook.load()
    node = Node.objects.select_for_update().get(pk=event.node_id)
    if event.accelerator_id:
        card = Accelerator.objects.select_for_update().select_related("model").get(pk=event.accelerator_id)
        if card.health == Health.DEGRADED:
            vendor = card.model.vendor_id
            remaining = [
                policies.grade(vendor, e.kind, e.code).health
                for e in HealthEvent.objects.filter(accelerator=card, resolved_at__isnull=True)
            ]
            _card_health_set(card, worst(Health.OK, *remaining), "", event.resolved_at)
    if node.health == Health.DEGRADED:
        _node_health_set(node, _node_health(node, policies))
    return True
