"""Health signals -> HealthEvent rows, card and node health, and the failed-card hook (for every new event on a
card graded `marks_failed` or with the action drain_repair: a repair is opened for a degraded card too).

Deduplication: one open event per `dedup_key` (`acc:<id>:<kind>:<code>`, `node:<id>:<kind>:<code>`); the
database holds that. A signal whose event is open only counts occurrences not counted before (fingerprints
remembered per node), so a report sent twice changes nothing. A card is failed while any open event on it is
graded `marks_failed`: an Xid 79 does not heal because the next report has no new Xid; the repair workflow
resolves the event. Warnings only degrade a card while they are being reported.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from cmdb.hooks import AcceleratorFailure, accelerator_failed
from cmdb.models import Accelerator, Health, HealthEvent

from .health import Grade, worst
from .normalize import Signal
from .passes import Pass, PendingSignal

EVENT_UPDATE_FIELDS = ["count", "last_seen_at", "message", "resolved_at"]
# Events about the data or the collection, not the hardware: they never change a card's or a node's health.
NOT_HEALTH = frozenset({"conflict", "collector"})
# Conditions that end when the card shows up in its node's report again.
FOUND_AGAIN = frozenset({"missing", "replaced"})
# Occurrence fingerprints (Xids) stay remembered across reports; condition fingerprints only while reported.
REMEMBERED_OCCURRENCES = 500
logger = logging.getLogger(__name__)


@dataclass
class Failure:
    event: HealthEvent
    card: Accelerator
    is_repeat: bool


def events_open_load(run: Pass, card_ids: list[int]) -> list[HealthEvent]:
    """Open events of this node and of the cards the report touches (a card that moved in brings its own)."""
    query = Q(node_id=run.node.pk)
    if card_ids:
        query |= Q(accelerator_id__in=card_ids)
    return list(HealthEvent.objects.filter(query, resolved_at__isnull=True))


def _key(pending: PendingSignal, node_id: int) -> str:
    if pending.dedup_key:
        return pending.dedup_key
    signal = pending.signal
    if pending.accelerator is not None:
        return f"acc:{pending.accelerator.pk}:{signal.kind}:{signal.code}"[:200]
    return f"node:{node_id}:{signal.kind}:{signal.code}"[:200]


def _scoped(key: str, signal: Signal) -> list[str]:
    """Fingerprints scoped by the event key: the same counter value on two cards is two conditions."""
    return [f"{key}|{f}" for f in signal.fingerprints]


class EventBook:
    """Grades the pass's signals (before any write, so cards are saved once with their final health), then
    turns them into events once every card has an id; `write` saves events with two bulk statements."""

    def __init__(self, run: Pass, open_events: list[HealthEvent]) -> None:
        self.run = run
        self.open = {e.dedup_key: e for e in open_events}
        self.changed: dict[int, HealthEvent] = {}
        self.failures: list[Failure] = []
        self.counted: set[str] = set(run.known_fingerprints)
        self.current_fingerprints: list[str] = []
        self.node_grades: list[Grade] = []
        self.vendor_of = {c.pk: c.model.vendor_id for c in run.node_cards if c.pk}
        self.failing_cards = {
            e.accelerator_id for e in open_events if e.accelerator_id and self._grade_event(e).marks_failed
        }

    def _grade_event(self, event: HealthEvent) -> Grade:
        return self.run.policies.grade(self.vendor_of.get(event.accelerator_id), event.kind, event.code)

    def _counts(self, pending: PendingSignal) -> bool:
        """Does this signal speak about the card now: a new occurrence, or the condition of an open event.
        (An old Xid in a re-sent report, whose event an operator resolved since, does not fail the card again.)"""
        signal = pending.signal
        card = pending.accelerator
        if not signal.fingerprints or (card is not None and not card.pk):
            return True  # a card created by this report has no history
        key = _key(pending, self.run.node.pk)
        if any(scoped not in self.run.known_fingerprints for scoped in _scoped(key, signal)):
            return True
        return key in self.open

    def health(self) -> None:
        """Set health / health_detail of every card on the node from this report's grades and open events."""
        run = self.run
        grades: dict[int, list[tuple[str, str]]] = {}
        for pending in run.signals:
            if pending.signal.kind in NOT_HEALTH or not self._counts(pending):
                continue
            grade = run.policies.grade(pending.vendor_id, pending.signal.kind, pending.signal.code)
            if pending.accelerator is None:
                self.node_grades.append(grade)
            else:
                grades.setdefault(id(pending.accelerator), []).append((grade.health, pending.signal.message))
        seen = {c.pk for c in run.node_cards if c.pk and not c.is_missing}
        for event in self.open.values():
            if not event.accelerator_id or (event.kind in FOUND_AGAIN and event.accelerator_id in seen):
                continue  # a card seen again is no longer missing (the event resolves in apply)
            if self._grade_event(event).marks_failed:
                for card in run.node_cards:
                    if card.pk == event.accelerator_id:
                        grades.setdefault(id(card), []).append((Health.FAILED, event.message))
        for card in run.node_cards:
            details = grades.get(id(card), [])
            status = getattr(card, "_gpuops_status", None)
            if status is None and not card.is_missing and not details:
                continue  # not in this report and not flagged (its section was incomplete): nothing new about it
            base = Health.UNKNOWN if card.is_missing or status not in ("ok", "degraded", "failed") else Health.OK
            health = worst(base, *[h for h, _ in details])
            detail = "; ".join(dict.fromkeys(msg for h, msg in details if h == health))[:500]
            if card.health != health or card.health_detail != detail:
                if card.pk:
                    run.track(card)
                if card.health != health:
                    card.health_changed_at = run.now
                card.health, card.health_detail = health, detail

    def node_health(self) -> str:
        # Node-level signals (an Xid on a bus no card of the CMDB has) degrade the node but fail no card.
        from_node = [Health.DEGRADED if g.health == Health.FAILED else g.health for g in self.node_grades]
        # A missing card's "unknown" says nothing about the node; a missing card that failed (or is degraded) does.
        cards = [
            c.health for c in self.run.node_cards if not c.is_missing or c.health in (Health.FAILED, Health.DEGRADED)
        ]
        return worst(Health.OK, *cards, *from_node)

    def apply(self) -> None:
        """Create or count events (every card has an id now) and resolve `missing` events of cards seen again."""
        run = self.run
        for pending in run.signals:
            signal = pending.signal
            grade = run.policies.grade(pending.vendor_id, signal.kind, signal.code)
            key = _key(pending, run.node.pk)
            scoped = _scoped(key, signal)
            fresh = [f for f in scoped if f not in self.counted]
            self.counted.update(scoped)
            self.current_fingerprints += scoped
            event = self.open.get(key)
            if event is not None:
                if fresh:
                    event.count += len(fresh)
                    event.last_seen_at = run.now
                    event.message = signal.message[:500]
                    if event.pk:
                        self.changed[event.pk] = event
                        run.summary["events_repeated"] += 1
                continue
            if signal.fingerprints and not fresh:
                continue  # counted before and resolved by an operator since: not a new occurrence
            event = HealthEvent(
                node=run.node,
                accelerator=pending.accelerator,
                kind=signal.kind,
                code=signal.code[:32],
                severity=grade.severity,
                action=grade.action,
                message=signal.message[:500],
                dedup_key=key,
                count=max(1, len(fresh)),
                first_seen_at=run.now,
                last_seen_at=run.now,
            )
            self.open[key] = event
            run.events_new.append(event)
            run.summary["events_created"] += 1
            card = pending.accelerator
            if grade.opens_repair and card is not None:
                self.failures.append(Failure(event, card, is_repeat=card.pk in self.failing_cards))
                self.failing_cards.add(card.pk)
        seen = {c.pk for c in run.node_cards if c.pk and not c.is_missing}
        failing_collectors = {p.signal.code for p in run.signals if p.signal.kind == "collector"}
        for event in list(self.open.values()):
            # A collector that works again closes its event: collection trouble is a state, not a history.
            recovered = (
                event.kind == "collector"
                and event.node_id == run.node.pk
                and event.pk
                and event.code not in failing_collectors
            )
            if recovered or (event.kind in FOUND_AGAIN and event.accelerator_id in seen and event.pk):
                event.resolved_at = run.now
                self.changed[event.pk] = event
                del self.open[event.dedup_key]
                run.summary["events_resolved"] += 1

    def fingerprints_to_remember(self) -> list[str]:
        occurrences = [f for f in self.run.known_fingerprints if "|xid:" in f]
        keep = list(dict.fromkeys(self.current_fingerprints + occurrences))
        return keep[: REMEMBERED_OCCURRENCES + len(self.current_fingerprints)]

    def write(self) -> None:
        run = self.run
        if run.events_new:
            HealthEvent.objects.bulk_create(run.events_new)
        if self.changed:
            HealthEvent.objects.bulk_update(list(self.changed.values()), EVENT_UPDATE_FIELDS)

    def hooks_call(self, correlation_id: str) -> list[dict[str, str]]:
        """Tell the workflows (repair tickets) about every card a new severe event failed, once per event.

        Each call runs in a savepoint: a receiver that raises (a guard refusing the ticket) loses only its own
        writes and never the report, which would otherwise fail on every report of the node from then on. The
        failures are logged and returned as report errors, so an operator sees the card that got no ticket."""
        if not self.failures:
            return []
        try:
            # One savepoint for all (two statements whatever the number of cards); only when a receiver raises
            # is every call run again in its own savepoint, to keep the ones that work.
            with transaction.atomic():
                for failure in self.failures:
                    self._hook(failure, correlation_id)
            self.run.summary["hooks_called"] += len(self.failures)
            return []
        except Exception:
            logger.warning("a failed-card hook raised for %s; calling each on its own", self.run.node.hostname)
        problems: list[dict[str, str]] = []
        for failure in self.failures:
            event = failure.event
            try:
                with transaction.atomic():
                    self._hook(failure, correlation_id)
            except Exception as exc:  # any receiver's error: recorded, the report still applies
                logger.exception("failed-card hook for card %s (event %s) raised", failure.card.pk, event.pk)
                self.run.summary["hooks_failed"] += 1
                problems.append(
                    {
                        "path": "$",
                        "message": f"failed-card hook for {failure.card} (event {event.pk}, "
                        f"{event.kind} {event.code}) raised {type(exc).__name__}: {exc}"[:500],
                    }
                )
                continue
            self.run.summary["hooks_called"] += 1
        return problems

    def _hook(self, failure: Failure, correlation_id: str) -> None:
        event = failure.event
        accelerator_failed(
            AcceleratorFailure(
                accelerator_id=failure.card.pk,
                node_id=self.run.node.pk,
                health_event_id=event.pk,
                kind=event.kind,
                code=event.code,
                message=event.message,
                is_repeat=failure.is_repeat,
                extra={
                    "report_id": correlation_id,
                    "severity": event.severity,
                    "action": event.action,
                    "hostname": self.run.node.hostname,
                },
            )
        )
